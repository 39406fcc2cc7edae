package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/strata-sched/strata/sim"
	"github.com/strata-sched/strata/tiers"
)

func init() { commands = append(commands, newSimCmd) }

func newSimCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "What-if simulator: run scenario files on a virtual clock with the real tier policies",
		Long: `The simulator runs the same tier policies, balancer and control-loop step as the
daemons on a virtual clock, with Raft and gRPC replaced by direct calls. A scenario
file (YAML) gives the topology, workload, events, the policies to compare, the run
length and assertions; see docs/simulation.md.

The same file and seed give byte-identical output, except solve_seconds (wall
time spent in policies); --deterministic leaves it at 0.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newSimRunCmd(g, false), newSimRunCmd(g, true))
	return cmd
}

type simFlags struct {
	out           outputFlag
	seed          uint64
	dir           string
	policy        string
	deterministic bool
	noProgress    bool
	modes         bool
	solver        string
}

func newSimRunCmd(g *globalOptions, compare bool) *cobra.Command {
	var f simFlags
	use, short := "run FILE", "Run a scenario with one policy (the first, or --policy) and check its assertions"
	if compare {
		use, short = "compare FILE", "Run every policy of a scenario side by side and check the assertions"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long: short + `.

Output (-o): table (default), json, or html (a self-contained report with SVG plots).
With --out DIR the command also writes DIR/summary.json, DIR/timeseries.csv,
DIR/report.html and DIR/overview.svg. A failed assertion exits with status 1 and
says which assertion, of which policy, failed when.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if compare && f.modes && len(args) >= 1 {
				return nil
			}
			if len(args) != 1 {
				return fmt.Errorf("%s: needs exactly one scenario FILE (got %d arguments)", cmd.CommandPath(), len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if compare && f.modes {
				ctx := cmd.Context()
				if ctx == nil {
					ctx = context.Background()
				}
				return runSimModes(ctx, g, &f, f.solver, args)
			}
			return runSim(cmd.Context(), g, &f, args[0], compare)
		},
	}
	f.out.register(cmd, "table", "json", "html")
	cmd.Flags().Uint64Var(&f.seed, "seed", 0, "seed for all randomness (default: the scenario's seed)")
	cmd.Flags().StringVar(&f.dir, "out", "", "directory to write summary.json, timeseries.csv, report.html and overview.svg into")
	cmd.Flags().BoolVar(&f.deterministic, "deterministic", false, "do not measure solver wall time (solve_seconds = 0), for byte-identical output")
	cmd.Flags().BoolVar(&f.noProgress, "no-progress", false, "no progress bar on stderr")
	if !compare {
		cmd.Flags().StringVar(&f.policy, "policy", "", "name of the policy to run (default: the first in the file)")
	} else {
		cmd.Flags().BoolVar(&f.modes, "modes", false, "compare decoupled and collaborative integration on each scenario FILE... (their first policy's setup, one solver), in one table")
		cmd.Flags().StringVar(&f.solver, "solver", tiers.DefaultPolicy, "with --modes: the solver of both modes (default: the daemons')")
	}
	return cmd
}

func runSim(ctx context.Context, g *globalOptions, f *simFlags, file string, compare bool) error {
	if err := f.out.check(); err != nil {
		return err
	}
	if f.dir != "" {
		// Before the run, not after it: a directory that cannot be made
		// should not cost the whole simulation.
		if err := os.MkdirAll(f.dir, 0o755); err != nil {
			return usageErr(fmt.Errorf("--out: %w", err))
		}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	sc, err := sim.LoadScenario(file)
	if err != nil {
		return err
	}
	o := sim.Options{Seed: f.seed}
	if !compare {
		name := f.policy
		if name == "" {
			name = sc.Policies[0].Name
		}
		o.Policies = []string{name}
	}
	if !f.deterministic {
		o.WallClock = time.Now
	}
	bar := &progressBar{w: g.stderr, start: time.Now()}
	if !f.noProgress {
		o.Progress = bar.update
	}
	res, err := sim.Run(ctx, sc, o)
	bar.done()
	if err != nil {
		return err
	}
	rep := res.Report(sc)
	switch f.out.format {
	case "json":
		err = sim.WriteJSON(g.stdout, rep)
	case "html":
		err = sim.WriteHTML(g.stdout, rep, res)
	default:
		err = sim.WriteTable(g.stdout, rep)
	}
	if err != nil {
		return err
	}
	if f.dir != "" {
		if err := writeSimDir(f.dir, rep, res); err != nil {
			return err
		}
	}
	return failedAssertions(rep, fmt.Sprintf("(seed %d)", res.Seed))
}

// failedAssertions is nil when every assertion of rep passed, else an exit-1
// error listing the failed ones; where says where they were judged.
func failedAssertions(rep sim.Report, where string) error {
	failed := rep.Failed()
	if len(failed) == 0 {
		return nil
	}
	msgs := make([]string, len(failed))
	for i, a := range failed {
		msgs[i] = fmt.Sprintf("%s: assertion %d (%s, line %d): %s", a.Policy, a.Index, a.Kind, a.Line, a.Message)
	}
	return &exitError{code: 1, err: fmt.Errorf("%d assertion(s) failed %s:\n  %s", len(failed), where, strings.Join(msgs, "\n  "))}
}

// writeSimDir writes the report's files into dir, which runSim made.
func writeSimDir(dir string, rep sim.Report, res *sim.Result) error {
	// Render every file first: one that fails to render leaves no file
	// written or half-written.
	files := []struct {
		name   string
		render func(io.Writer) error
	}{
		{"summary.json", func(w io.Writer) error { return sim.WriteJSON(w, rep) }},
		{"timeseries.csv", func(w io.Writer) error { return sim.WriteCSV(w, res) }},
		{"report.html", func(w io.Writer) error { return sim.WriteHTML(w, rep, res) }},
		{"overview.svg", func(w io.Writer) error { _, err := io.WriteString(w, sim.OverviewSVG(res)); return err }},
	}
	bufs := make([]bytes.Buffer, len(files))
	for i, f := range files {
		if err := f.render(&bufs[i]); err != nil {
			return fmt.Errorf("--out: %s: %w", f.name, err)
		}
	}
	for i, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), bufs[i].Bytes(), 0o644); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	}
	return nil
}

// progressBar draws a bar on stderr once a run has taken more than a second.
type progressBar struct {
	w     io.Writer
	start time.Time
	drawn bool
	last  int
}

func (p *progressBar) update(done, total time.Duration) {
	if time.Since(p.start) < time.Second || total <= 0 {
		return
	}
	pct := int(100 * done / total)
	if p.drawn && pct == p.last {
		return
	}
	const width = 40
	n := width * pct / 100
	fmt.Fprintf(p.w, "\r[%s%s] %3d%%  virtual %v / %v", strings.Repeat("#", n), strings.Repeat(" ", width-n), pct, done.Round(time.Second), total)
	p.drawn, p.last = true, pct
}

func (p *progressBar) done() {
	if p.drawn {
		fmt.Fprintln(p.w)
	}
}
