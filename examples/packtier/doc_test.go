package packtier_test

import (
	"path/filepath"
	"testing"

	"github.com/strata-sched/strata/internal/testutil"
)

// TestTutorialExcerpts keeps docs/writing-a-tier.md true: every Go block that
// follows an "<!-- include: FILE -->" marker must appear, as it is, in FILE.
func TestTutorialExcerpts(t *testing.T) {
	testutil.DocExcerpts(t, filepath.Join("..", ".."), filepath.Join("docs", "writing-a-tier.md"), 3)
}
