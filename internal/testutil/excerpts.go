package testutil

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// DocExcerpts keeps a document true to the code it quotes: every Go block of
// doc (a path under root) that follows an "<!-- include: FILE -->" marker
// must appear, as it is, in FILE (a path under root, which make test compiles
// and tests). The document must hold at least min such includes.
func DocExcerpts(t *testing.T, root, doc string, min int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, doc))
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(string(b), "<!-- include: ")
	if len(parts)-1 < min {
		t.Fatalf("%s has %d includes, want at least %d", doc, len(parts)-1, min)
	}
	for _, p := range parts[1:] {
		file, rest, ok := strings.Cut(p, " -->")
		if !ok {
			t.Fatalf("%s: unterminated include marker: %.40q", doc, p)
		}
		_, block, ok := strings.Cut(rest, "```go\n")
		if !ok {
			t.Fatalf("%s: include of %s is not followed by a Go block", doc, file)
		}
		block, _, ok = strings.Cut(block, "\n```")
		if !ok {
			t.Fatalf("%s: unterminated Go block after include of %s", doc, file)
		}
		src, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(src), block) {
			t.Errorf("%s: the excerpt of %s is no longer in that file:\n%s", doc, file, block)
		}
	}
}
