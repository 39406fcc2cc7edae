package sim

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func libraryFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("scenarios/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("the scenario library has %d files, want at least 10", len(files))
	}
	return files
}

// TestScenarioLibrary runs every scenario of the library with every policy it
// lists and requires every assertion to hold. Each scenario must have
// assertions, and must be documented in docs/simulation.md, where its table
// block and its plot must be those of this run (docs_test.go).
func TestScenarioLibrary(t *testing.T) {
	doc, err := os.ReadFile("../docs/simulation.md")
	if err != nil {
		t.Fatalf("docs/simulation.md: %v", err)
	}
	docs := newDocsChecker(t)
	defer docs.finish(t)
	for _, f := range libraryFiles(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			sc, err := LoadScenario(f)
			if err != nil {
				t.Fatal(err)
			}
			if len(sc.Assertions) == 0 {
				t.Fatal("a library scenario needs assertions")
			}
			if !strings.Contains(string(doc), "`"+sc.Name+"`") {
				t.Errorf("scenario %s is not documented in docs/simulation.md", sc.Name)
			}
			res, err := Run(context.Background(), sc, Options{})
			if err != nil {
				t.Fatal(err)
			}
			checked := 0
			for _, p := range res.Policies {
				for _, a := range p.Assertions {
					checked++
					if !a.Passed {
						t.Errorf("%s: %s (line %d)", p.Summary.Policy, a.Message, a.Line)
					}
				}
			}
			if checked == 0 {
				t.Error("no assertion applied to any policy")
			}
			docs.check(t, sc, res)
		})
	}
}
