package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/balancer/instance"
)

// placedCount counts the placed and unplaced shards of an assignment.
func placedCount(assign []int32) (placed, unplaced int) {
	for _, c := range assign {
		if c < 0 {
			unplaced++
		} else {
			placed++
		}
	}
	return placed, unplaced
}

func init() { commands = append(commands, newBenchCmd) }

// newBenchCmd is the "bench" group; "bench balance" is its first member.
func newBenchCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Run reproducible benchmarks",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newBenchBalanceCmd(g))
	cmd.AddCommand(newBenchHierarchyCmd(g))
	return cmd
}

// benchBalanceJSON is the output of "strata bench balance"; the keys are part of
// the command's contract.
type benchBalanceJSON struct {
	Solver      string             `json:"solver"`
	Shards      int                `json:"shards"`
	Hosts       int                `json:"hosts"`
	Seconds     float64            `json:"seconds"`
	Moves       int                `json:"moves"`
	MaxOverLB   map[string]float64 `json:"max_over_lb"`
	MaxOverMean map[string]float64 `json:"max_over_mean"`
	Objective   float64            `json:"objective"`
	// Status, Placed and Unplaced: the solve's status and how many shards it
	// left placed and unplaced; FFDPlaced is what first-fit decreasing places
	// on the same instance (with --instance or --fleet); Proof says why an
	// infeasible status is proven.
	Status    string             `json:"status"`
	Placed    int                `json:"placed"`
	Unplaced  int                `json:"unplaced"`
	FFDPlaced *int               `json:"ffd_placed,omitempty"`
	LB        map[string]float64 `json:"lb"`
	Proof     string             `json:"proof,omitempty"`
}

func newBenchBalanceCmd(g *globalOptions) *cobra.Command {
	var (
		out      outputFlag
		shards   int
		hosts    int
		seed     uint64
		solver   string
		skew     string
		budget   time.Duration
		maxMoves int
		clock    string
		inst     string
		fleet    bool
		cands    int
	)
	cmd := &cobra.Command{
		Use:   "balance",
		Short: "Generate a reproducible placement instance, solve it, print quality and time",
		Long: `Generate a reproducible instance — shard loads Zipf-skewed (largest/smallest = 20×)
or uniform, host capacities varying ±20%, mean utilization 0.6, every shard on a
random host — solve it with the chosen solver and print: solver, shards, hosts,
seconds (solve time; wall clock, or CPU time with --clock cpu), moves, max_over_lb and max_over_mean per resource, and the
objective (the sum of the priority levels of the default goals).

Example:
  strata bench balance --shards 100000 --hosts 1000 --seed 1 --solver local -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			if shards < 1 {
				return fmt.Errorf("--shards: must be ≥ 1 (got %d)", shards)
			}
			if hosts < 1 {
				return fmt.Errorf("--hosts: must be ≥ 1 (got %d)", hosts)
			}
			if skew != balancer.SkewZipf && skew != balancer.SkewUniform {
				return fmt.Errorf("--skew: must be one of zipf, uniform (got %q)", skew)
			}
			if budget < 0 {
				return fmt.Errorf("--time-budget: must be ≥ 0 (got %s)", budget)
			}
			if maxMoves < 0 {
				return fmt.Errorf("--max-moves: must be ≥ 0 (got %d)", maxMoves)
			}
			now, err := benchClock(clock)
			if err != nil {
				return err
			}
			s, err := balancer.SolverByName(solver)
			if err != nil {
				return fmt.Errorf("--solver: %w", err)
			}
			if cands < 0 {
				return fmt.Errorf("--candidates: must be ≥ 0 (got %d)", cands)
			}
			if inst != "" && fleet {
				return fmt.Errorf("--instance and --fleet: give one of them")
			}
			var p *balancer.Problem
			var withFFD bool
			switch {
			case inst != "" || fleet:
				var in *instance.Instance
				if inst != "" {
					in, err = instance.Load(inst)
				} else {
					in, err = instance.Fleet(instance.FleetSpec{Hosts: hosts, Shards: shards, Seed: seed})
				}
				if err != nil {
					return err
				}
				if p, err = balancer.FromView(in.View(), balancer.ViewOptions{}); err != nil {
					return fmt.Errorf("instance: %w", err)
				}
				withFFD = true
			default:
				if p, err = balancer.Generate(balancer.InstanceSpec{Shards: shards, Hosts: hosts, Seed: seed, Skew: skew}); err != nil {
					return err
				}
			}
			p.MaxMoves = maxMoves
			opts := balancer.Options{Seed: seed, TimeBudget: budget, Now: now, Candidates: cands}
			t0 := now()
			res, err := s.Solve(p, opts)
			if err != nil {
				return err
			}
			secs := now().Sub(t0).Seconds()
			v := benchBalanceJSON{
				Solver: s.Name(), Shards: p.NumShards(), Hosts: p.NumChildren(), Seconds: secs,
				Moves: res.Summary.Moves, MaxOverLB: res.Summary.MaxOverLB, MaxOverMean: res.Summary.MaxOverMean,
				Objective: res.Objective.Total(), Status: res.Status.String(), LB: res.Summary.LB, Proof: res.Proof,
			}
			v.Placed, v.Unplaced = placedCount(res.Assignment)
			if withFFD {
				ffd, err := balancer.Solve(balancer.SolverFFD, p, balancer.Options{})
				if err != nil {
					return err
				}
				n, _ := placedCount(ffd.Assignment)
				v.FFDPlaced = &n
			}
			return out.print(g.stdout, v, func(w io.Writer) error { return printBenchBalance(w, v) })
		},
	}
	f := cmd.Flags()
	f.IntVar(&shards, "shards", 10000, "number of shards")
	f.IntVar(&hosts, "hosts", 100, "number of hosts")
	f.Uint64Var(&seed, "seed", 1, "seed of the instance and the solver")
	f.StringVar(&solver, "solver", "local", "solver: "+strings.Join(balancer.SolverNames(), "|"))
	f.StringVar(&skew, "skew", balancer.SkewZipf, "shard load distribution: zipf|uniform")
	f.DurationVar(&budget, "time-budget", 10*time.Second, "time budget of the solve (0 = none; local search stops at a local optimum)")
	f.IntVar(&maxMoves, "max-moves", 0, "move budget of the round (0 = unlimited)")
	f.StringVar(&inst, "instance", "", "solve the instance in PATH (a .json file, or a directory with hosts.csv and shards.csv; docs/benchmarks.md) instead of a generated one")
	f.BoolVar(&fleet, "fleet", false, "solve a generated instance shaped like a real GPU fleet (--hosts hosts of 6 sizes, --shards shards of skewed sizes; cpu 70%, mem 50%, gpu 97%)")
	f.IntVar(&cands, "candidates", 0, "candidate children per shard of local search (0 = the default, 8, as the daemons use)")
	f.StringVar(&clock, "clock", "wall", "clock for seconds and the time budget: wall, or cpu (this process's CPU time, for a shared machine)")
	out.register(cmd)
	return cmd
}

// benchClock is the clock of --clock: wall (time.Now) or cpu (cpuNow).
func benchClock(name string) (func() time.Time, error) {
	switch name {
	case "wall":
		return time.Now, nil
	case "cpu":
		return cpuNow, nil
	}
	return nil, fmt.Errorf("--clock: must be one of wall, cpu (got %q)", name)
}

// cpuNow returns the process's CPU time (user + system) as a time, so that a
// time budget and the reported seconds measure CPU rather than wall time.
func cpuNow() time.Time {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return time.Now()
	}
	d := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return time.Unix(0, 0).Add(d)
}

func printBenchBalance(w io.Writer, v benchBalanceJSON) error {
	tw := newTable(w)
	res := make([]string, 0, len(v.MaxOverLB))
	for r := range v.MaxOverLB {
		res = append(res, r)
	}
	sort.Strings(res)
	fmt.Fprintln(tw, "solver\tshards\thosts\tseconds\tmoves\tresource\tmax_over_lb\tmax_over_mean\tobjective")
	for i, r := range res {
		if i == 0 {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%.3f\t%d\t%s\t%.4f\t%.4f\t%.6g\n", v.Solver, v.Shards, v.Hosts, v.Seconds, v.Moves, r, v.MaxOverLB[r], v.MaxOverMean[r], v.Objective)
		} else {
			fmt.Fprintf(tw, "\t\t\t\t\t%s\t%.4f\t%.4f\t\n", r, v.MaxOverLB[r], v.MaxOverMean[r])
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	line := fmt.Sprintf("status %s: %d placed, %d unplaced", v.Status, v.Placed, v.Unplaced)
	if v.FFDPlaced != nil {
		line += fmt.Sprintf(" (first-fit decreasing places %d)", *v.FFDPlaced)
	}
	if v.Proof != "" {
		line += "; proven: " + v.Proof
	}
	_, err := fmt.Fprintln(w, line)
	return err
}
