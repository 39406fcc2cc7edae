package clickcount_test

import (
	"path/filepath"
	"testing"

	"github.com/strata-sched/strata/internal/testutil"
)

// TestStreamingDocExcerpts keeps docs/streaming.md true: every Go block
// that follows an "<!-- include: FILE -->" marker must appear, as it is, in
// FILE (which make test compiles and tests).
func TestStreamingDocExcerpts(t *testing.T) {
	testutil.DocExcerpts(t, filepath.Join("..", ".."), filepath.Join("docs", "streaming.md"), 4)
}
