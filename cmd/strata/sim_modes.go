package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/strata-sched/strata/sim"
)

// modesRow is one scenario of strata sim compare --modes.
type modesRow struct {
	scenario string
	vs       sim.Versus
	moves    [2]int
	noLoss   bool
	failed   []string
}

// runSimModes runs each scenario file as the pair decoupled / collaborative
// with one solver (sim.IntegrationPair) and prints one table: per scenario
// the cpu spread and modeled p99 of each mode, collaborative's gains, the
// moves and whether no_loss held; then the median gains. It fails (exit 1)
// when no_loss fails anywhere or collaborative is worse than decoupled on
// spread or p99 in some scenario, naming them.
func runSimModes(ctx context.Context, g *globalOptions, f *simFlags, solver string, files []string) error {
	var rows []modesRow
	for _, file := range files {
		sc, err := sim.LoadScenario(file)
		if err != nil {
			return err
		}
		if err := sim.IntegrationPair(sc, solver); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		o := sim.Options{Seed: f.seed}
		if !f.deterministic {
			o.WallClock = time.Now
		}
		res, err := sim.Run(ctx, sc, o)
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		vs, _ := res.Compare(sim.Collaborative, sim.Decoupled, "cpu")
		row := modesRow{scenario: sc.Name, vs: vs, noLoss: true}
		for _, p := range res.Policies {
			k := 0
			if p.Summary.Policy == sim.Collaborative {
				k = 1
			}
			row.moves[k] = p.Summary.Moves
		}
		for _, a := range res.Report(sc).Failed() {
			row.noLoss = false
			row.failed = append(row.failed, a.Policy+": "+a.Message)
		}
		rows = append(rows, row)
	}
	return writeModes(g.stdout, solver, rows)
}

func writeModes(w io.Writer, solver string, rows []modesRow) error {
	fmt.Fprintf(w, "decoupled (capacity shapes, no hints) vs collaborative, solver %s, cpu spread = max/mean − 1, p99 = modeled over all records\n\n", solver)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tSPREAD DEC\tSPREAD COL\tSPREAD GAIN\tP99 DEC MS\tP99 COL MS\tP99 GAIN\tMOVES DEC/COL\tNO_LOSS")
	var sg, pg []float64
	var worse, lost []string
	for _, r := range rows {
		nl := "held"
		if !r.noLoss {
			nl = "FAILED"
			lost = append(lost, r.scenario+" ("+strings.Join(r.failed, "; ")+")")
		}
		fmt.Fprintf(tw, "%s\t%.4f\t%.4f\t%s\t%.3f\t%.3f\t%s\t%d/%d\t%s\n", r.scenario, r.vs.SpreadBaseline, r.vs.SpreadPolicy, pct(r.vs.SpreadBetter),
			r.vs.P99Baseline, r.vs.P99Policy, pct(r.vs.P99Lower), r.moves[0], r.moves[1], nl)
		sg, pg = append(sg, r.vs.SpreadBetter), append(pg, r.vs.P99Lower)
		// Worse beyond rounding: the spreads are rounded to 4 digits.
		if r.vs.SpreadPolicy > r.vs.SpreadBaseline+1e-4 || r.vs.P99Policy > r.vs.P99Baseline*(1+1e-6) {
			worse = append(worse, r.scenario)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nmedian gain of collaborative: spread %s, p99 %s (%d scenarios)\n", pct(median(sg)), pct(median(pg)), len(rows))
	var errs []string
	if len(worse) > 0 {
		errs = append(errs, "collaborative is worse than decoupled in: "+strings.Join(worse, ", "))
	}
	if len(lost) > 0 {
		errs = append(errs, "no_loss failed in: "+strings.Join(lost, ", "))
	}
	if len(errs) > 0 {
		return &exitError{code: 1, err: fmt.Errorf("%s", strings.Join(errs, "; "))}
	}
	return nil
}

func pct(x float64) string { return fmt.Sprintf("%+.1f%%", 100*x) }

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
