package sim

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// updateDocs rewrites the generated parts of docs/simulation.md (the table
// block of each library scenario) and the plots in scenarios/plots from the
// runs of TestScenarioLibrary:
//
//	go test ./sim -run TestScenarioLibrary -update-docs
//
// Without it the test fails when a block or a plot differs from its run.
var updateDocs = flag.Bool("update-docs", false, "rewrite docs/simulation.md's scenario tables and scenarios/plots/*.svg from the runs")

const simDocPath = "../docs/simulation.md"

// docBlock renders the generated block of scenario sc's section of
// docs/simulation.md (between "<!-- table:NAME -->" and "<!-- /table -->"):
// one row per policy, then the run's settings and every assertion check.
func docBlock(sc *Scenario, res *Result) string {
	var b strings.Builder
	chains := map[string]bool{}
	for _, p := range res.Policies {
		chains[p.Summary.Chain] = true
	}
	showChain := len(chains) > 1
	racks := res.Racks > 0
	// With racks: rack_loss_impact's peak up to the first event (the sample
	// at its time included, as TestRackChainScenario counts it) and after it,
	// and at the end; without events its peak and its end.
	events := len(sc.Events) > 0
	split := math.Inf(1)
	if events {
		split = time.Duration(sc.Events[0].At).Seconds()
	}
	head := "| policy |"
	if showChain {
		head += " chain |"
	}
	head += " cpu p50/p99/max | max/LB cpu | max/mean cpu | p50 / p99 ms | peak lag | moves | bytes moved |"
	switch {
	case racks && events:
		head += " rack loss before / after / end |"
	case racks:
		head += " rack loss peak / end |"
	}
	b.WriteString(head)
	b.WriteString("\n|" + strings.Repeat("---|", strings.Count(head, "|")-1) + "\n")
	for _, p := range res.Policies {
		s := p.Summary
		fmt.Fprintf(&b, "| %s |", s.Policy)
		if showChain {
			fmt.Fprintf(&b, " %s |", s.Chain)
		}
		fmt.Fprintf(&b, " %.3f/%.3f/%.3f | %.3f | %.3f | %s / %s | %s | %d | %s |",
			s.UtilP50["cpu"], s.UtilP99["cpu"], s.UtilMax["cpu"], s.MaxOverLB["cpu"], s.MaxOverMean["cpu"],
			g4(s.LatencyP50MS), g4(s.LatencyP99MS), thousands(int64(s.Lag)), s.Moves, bytesIn(s.BytesMoved, " "))
		if racks {
			var before, after float64
			for _, x := range p.Series {
				if x.T <= split {
					before = max(before, x.RackLossImpact)
				} else {
					after = max(after, x.RackLossImpact)
				}
			}
			if events {
				fmt.Fprintf(&b, " %s / %s / %s |", g4(before), g4(after), g4(s.RackLossImpact))
			} else {
				fmt.Fprintf(&b, " %s / %s |", g4(before), g4(s.RackLossImpact))
			}
		}
		b.WriteString("\n")
	}
	asserts := res.Report(sc).Assertions
	held := 0
	for _, a := range asserts {
		if a.Passed {
			held++
		}
	}
	fmt.Fprintf(&b, "\nSeed %d, %d shards, %d hosts", res.Seed, res.Shards, res.Hosts)
	if racks {
		fmt.Fprintf(&b, ", %d racks", res.Racks)
	}
	fmt.Fprintf(&b, ", tick %s (`strata sim compare sim/scenarios/%s.yaml --deterministic`): %d of %d assertion checks hold.\n",
		time.Duration(sc.Tick), sc.Name, held, len(asserts))
	if racks && events {
		fmt.Fprintf(&b, "Rack loss is the series' `rack_loss_impact` (the largest share of a job's shards on one rack): its peak up to the first event (at %s) and after it, and the value at the end.\n",
			time.Duration(sc.Events[0].At))
	}
	b.WriteString("\n")
	for _, a := range asserts {
		fmt.Fprintf(&b, "- %s, line %d: %s\n", a.Policy, a.Line, a.Message)
	}
	return b.String()
}

// g4 is %.4g: four significant digits.
func g4(x float64) string { return strconv.FormatFloat(x, 'g', 4, 64) }

// thousands writes n with commas between groups of three digits.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// replaceBlock returns doc with the block of name replaced by body, or an
// error when its markers are missing, doubled or out of order (the end
// marker must come before the next block's start).
func replaceBlock(doc, name, body string) (string, error) {
	open := "<!-- table:" + name + " -->\n"
	switch n := strings.Count(doc, open); {
	case n == 0:
		return "", fmt.Errorf("docs/simulation.md has no %q marker (on a line of its own)", strings.TrimSpace(open))
	case n > 1:
		return "", fmt.Errorf("docs/simulation.md has %d %q markers, want one", n, strings.TrimSpace(open))
	}
	start := strings.Index(doc, open) + len(open)
	j := strings.Index(doc[start:], "<!-- /table -->")
	if k := strings.Index(doc[start:], "<!-- table:"); j < 0 || k >= 0 && k < j {
		return "", fmt.Errorf("docs/simulation.md: the block of %s has no end marker before the next block", name)
	}
	return doc[:start] + body + doc[start+j:], nil
}

// docsChecker compares (or, with -update-docs, rewrites) the generated parts
// of the docs against the library's runs.
type docsChecker struct {
	doc     string
	changed bool
}

func newDocsChecker(t *testing.T) *docsChecker {
	t.Helper()
	doc, err := os.ReadFile(simDocPath)
	if err != nil {
		t.Fatalf("docs/simulation.md: %v", err)
	}
	return &docsChecker{doc: string(doc)}
}

const updateHint = "run `go test ./sim -run TestScenarioLibrary -update-docs` and review the diff"

func (d *docsChecker) check(t *testing.T, sc *Scenario, res *Result) {
	t.Helper()
	next, err := replaceBlock(d.doc, sc.Name, docBlock(sc, res))
	if err != nil {
		t.Error(err)
		return
	}
	if next != d.doc {
		if *updateDocs {
			d.doc, d.changed = next, true
		} else {
			t.Errorf("docs/simulation.md: the table block of %s differs from its run; %s", sc.Name, updateHint)
		}
	}
	plot := filepath.Join("scenarios", "plots", sc.Name+".svg")
	want := []byte(OverviewSVG(res))
	got, err := os.ReadFile(plot)
	if err == nil && bytes.Equal(got, want) {
		return
	}
	if !*updateDocs {
		if err != nil {
			t.Errorf("%s: %v; %s", plot, err, updateHint)
		} else {
			t.Errorf("%s differs from the run; %s", plot, updateHint)
		}
		return
	}
	if err := os.WriteFile(plot, want, 0o644); err != nil {
		t.Error(err)
	}
}

func (d *docsChecker) finish(t *testing.T) {
	t.Helper()
	if d.changed {
		if err := os.WriteFile(simDocPath, []byte(d.doc), 0o644); err != nil {
			t.Error(err)
		}
	}
}

func TestDocHelpers(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{{0, "0"}, {999, "999"}, {1000, "1,000"}, {24960, "24,960"}, {14768863, "14,768,863"}, {-1234, "-1,234"}} {
		if got := thousands(c.n); got != c.want {
			t.Errorf("thousands(%d) = %q, want %q", c.n, got, c.want)
		}
	}
	for _, c := range []struct {
		n    int64
		want string
	}{{0, "0 B"}, {512, "512 B"}, {1536, "1.5 KiB"}, {4831838208, "4.5 GiB"}} {
		if got := bytesIn(c.n, " "); got != c.want {
			t.Errorf("bytesIn(%d, \" \") = %q, want %q", c.n, got, c.want)
		}
	}
	doc := "a\n<!-- table:x -->\nold\n<!-- /table -->\nb\n"
	got, err := replaceBlock(doc, "x", "new\n")
	if err != nil || got != "a\n<!-- table:x -->\nnew\n<!-- /table -->\nb\n" {
		t.Errorf("replaceBlock = %q, %v", got, err)
	}
	for name, bad := range map[string]string{
		"missing":            doc,
		"doubled":            doc + "<!-- table:y -->\n<!-- /table -->\n<!-- table:y -->\n<!-- /table -->\n",
		"no end marker":      "<!-- table:y -->\nold\n",
		"end after the next": "<!-- table:y -->\nold\n<!-- table:x -->\n<!-- /table -->\n",
	} {
		if _, err := replaceBlock(bad, "y", ""); err == nil {
			t.Errorf("replaceBlock, %s: no error", name)
		}
	}
}
