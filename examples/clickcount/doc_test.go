package clickcount_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStreamingDocExcerpts keeps docs/streaming.md true: every Go block
// that follows an "<!-- include: FILE -->" marker must appear, as it is, in
// FILE (which make test compiles and tests).
func TestStreamingDocExcerpts(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "streaming.md"))
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(string(doc), "<!-- include: ")
	if len(parts) < 5 {
		t.Fatalf("docs/streaming.md has %d includes, want at least 4", len(parts)-1)
	}
	for _, p := range parts[1:] {
		file, rest, ok := strings.Cut(p, " -->")
		if !ok {
			t.Fatalf("unterminated include marker: %.40q", p)
		}
		_, block, ok := strings.Cut(rest, "```go\n")
		if !ok {
			t.Fatalf("include of %s is not followed by a Go block", file)
		}
		block, _, ok = strings.Cut(block, "\n```")
		if !ok {
			t.Fatalf("unterminated Go block after include of %s", file)
		}
		src, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(src), block) {
			t.Errorf("docs/streaming.md: the excerpt of %s is no longer in that file:\n%s", file, block)
		}
	}
}
