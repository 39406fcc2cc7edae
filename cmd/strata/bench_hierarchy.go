package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/sim/hierbench"
	"github.com/strata-sched/strata/tiers"
)

// benchHierarchyJSON is the output of "strata bench hierarchy": the comparison
// and the settings it ran with.
type benchHierarchyJSON struct {
	hierbench.Result
	Policy string `json:"policy"`
	// Candidates is the region tier's and the flat run's policy key
	// candidates (--hosts for "all"), GlobalCandidates the global tier's
	// (0 = the policy's default).
	Candidates       int     `json:"candidates"`
	GlobalCandidates int     `json:"global_candidates"`
	GlobalTarget     float64 `json:"global_target"`
	RegionTarget     float64 `json:"region_target"`
	Clock            string  `json:"clock"`
}

func newBenchHierarchyCmd(g *globalOptions) *cobra.Command {
	var (
		out          outputFlag
		shards       int
		hosts        int
		regions      int
		seed         uint64
		policy       string
		candidates   string
		globalCands  string
		globalTarget float64
		regionTarget float64
		change       float64
		workers      int
		flatBudget   time.Duration
		noFlat       bool
		noProgress   bool
		clock        string
	)
	cmd := &cobra.Command{
		Use:   "hierarchy",
		Short: "Place and rebalance one instance through the global → region hierarchy and through one flat balancer; print both and the speed-up",
		Long: `Generate one reproducible instance — the shards and hosts of "strata bench balance"
(cpu and mem; Zipf-skewed shard loads, largest/smallest = 20×; host capacities ±20%;
mean utilization 0.6), the hosts split into --regions contiguous regions — and run two
rounds on it: place every shard from nothing, then change the load of 5% of the shards
(--change; each resource ×0.5–2, seeded) and rebalance from the placement.

hierarchy: in each round the global tier plans the shards onto the regions (a region's
capacity is the sum of its hosts') with the tier policy --policy from the tiers
registry, through Policy.Plan on a View as the global daemon does; then every region
plans its shards onto its hosts, on --workers goroutines (default GOMAXPROCS).

flat: the same instance, load change and rounds through one policy of the same kind
and configuration over all hosts, except its target: with the local policy it stops
as soon as the busiest host is within the max_over_lb the hierarchy reached
(target_max_over_lb), or when --flat-budget (wall clock, from the start of the
flat run) ends; a flat run cut short leaves shards it had not reached unplaced,
its status is partial and the speed-up a lower bound.

Which hosts a shard is scored on: --candidates is the policy key candidates
(how many of the coldest children a local search scores per shard; placing
scores four times as many) of the region tier and of the flat run. Its default,
all, scores every host for every shard (a full scan): the flat run then scores
all --hosts hosts per shard and a region its own hosts, which is where a
hierarchy's speed-up comes from — and the flat run takes minutes at a million
shards (see docs/benchmarks.md). --global-candidates is the global tier's
(default 1: the four coldest regions, each region a large pool whose fine
placement is the region tier's work; all scores every region too). A number
instead of all is a sample of that many coldest children: with --candidates 1
every run is fast and the speed-up small (the daemons' policy default is 8).

Per run it prints seconds (both rounds: views, plans, applying plans; wall clock, or
this process's CPU time with --clock cpu — summed over all cores), max_over_lb (the
busiest host's utilization over the lower bound of the whole instance after the
change, the worse of cpu and mem), moves (shards whose host changed in the
rebalance round) and the status; then speedup = flat seconds / hierarchy seconds.
With the wall clock it also prints the hierarchy's critical path: per round, the
global tier's time plus the slowest region's — how long the rounds would take with
every region on its own machine, as deployed.
Everything but the seconds is the same for the same flags (unless --flat-budget cuts
the flat run short).

Example:
  strata bench hierarchy --shards 1000000 --hosts 10000 --regions 100 --seed 1 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			switch {
			case shards < 1:
				return fmt.Errorf("--shards: must be ≥ 1 (got %d)", shards)
			case hosts < 1:
				return fmt.Errorf("--hosts: must be ≥ 1 (got %d)", hosts)
			case regions < 1:
				return fmt.Errorf("--regions: must be ≥ 1 (got %d)", regions)
			case regions > hosts:
				return fmt.Errorf("--regions: must be ≤ --hosts (%d): every region needs a host (got %d)", hosts, regions)
			case shards > math.MaxInt32 || hosts > math.MaxInt32:
				return fmt.Errorf("--shards, --hosts: must fit 32-bit indices")
			}
			regionCands, err := benchCandidates("--candidates", candidates, hosts)
			if err != nil {
				return err
			}
			globalK, err := benchCandidates("--global-candidates", globalCands, hosts)
			if err != nil {
				return err
			}
			switch {
			case math.IsNaN(globalTarget) || (globalTarget != 0 && globalTarget < 1) || math.IsInf(globalTarget, 0):
				return fmt.Errorf("--global-target: must be 0 (none) or a number ≥ 1 (got %g)", globalTarget)
			case math.IsNaN(regionTarget) || (regionTarget != 0 && regionTarget < 1) || math.IsInf(regionTarget, 0):
				return fmt.Errorf("--region-target: must be 0 (none) or a number ≥ 1 (got %g)", regionTarget)
			case math.IsNaN(change) || change < 0 || change > 1:
				return fmt.Errorf("--change: must be in [0, 1] (got %g)", change)
			case workers < 0:
				return fmt.Errorf("--workers: must be ≥ 0 (got %d)", workers)
			case flatBudget < 0:
				return fmt.Errorf("--flat-budget: must be ≥ 0 (got %s)", flatBudget)
			}
			if usable := benchPolicies(); !slices.Contains(usable, policy) {
				if tiers.Default.Has(policy) {
					return fmt.Errorf("--policy: policy %q needs keys this benchmark does not set (usable here: %s)", policy, strings.Join(usable, ", "))
				}
				return fmt.Errorf("--policy: unknown policy %q (usable here: %s)", policy, strings.Join(usable, ", "))
			}
			now, err := benchClock(clock)
			if err != nil {
				return err
			}
			// tierConfig is the policy configuration of candidates k (0 = the
			// policy's default) and target t (0 = none).
			tierConfig := func(k int, t float64) interfaces.PolicyConfig {
				c := interfaces.PolicyConfig{}
				if k > 0 {
					c["candidates"] = strconv.Itoa(k)
				}
				if t > 0 {
					c["target_max_over_lb"] = strconv.FormatFloat(t, 'g', -1, 64)
				}
				return c
			}
			chg := change
			if chg == 0 {
				chg = -1 // hierbench: 0 means the default
			}
			cfg := hierbench.Config{
				Shards: shards, Hosts: hosts, Regions: regions, Seed: seed,
				GlobalPolicy: policy, RegionPolicy: policy, FlatPolicy: policy,
				GlobalConfig: tierConfig(globalK, globalTarget), RegionConfig: tierConfig(regionCands, regionTarget), FlatConfig: tierConfig(regionCands, 0),
				Change: chg, Workers: workers, SkipFlat: noFlat, MatchQuality: true, Now: now,
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			// The flat run's budget starts with it: the context ends
			// --flat-budget after the flat place round begins.
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			var ticker *phaseTicker
			if !noProgress {
				ticker = startPhaseTicker(g.stderr, time.Second, time.Second)
			}
			budget := &flatBudgetTimer{d: flatBudget, cancel: cancel}
			cfg.Phase = func(name string) {
				if ticker != nil {
					ticker.set(name)
				}
				budget.phase(name)
			}
			res, err := hierbench.Compare(ctx, cfg)
			budget.stop()
			if ticker != nil {
				ticker.close() // its line ends before the results
			}
			if err != nil {
				return err
			}
			if clock == "cpu" {
				// Per-region spans of process CPU time include the other workers.
				res.Hier.SlowestRegionSeconds, res.Hier.CriticalPathSeconds = 0, 0
			}
			v := benchHierarchyJSON{Result: res, Policy: policy, Candidates: regionCands, GlobalCandidates: globalK, GlobalTarget: globalTarget, RegionTarget: regionTarget, Clock: clock}
			return out.print(g.stdout, v, func(w io.Writer) error { return printBenchHierarchy(w, v, noFlat) })
		},
	}
	f := cmd.Flags()
	f.IntVar(&shards, "shards", 100000, "number of shards")
	f.IntVar(&hosts, "hosts", 1000, "number of hosts")
	f.IntVar(&regions, "regions", 10, "number of regions (≤ hosts; hosts are split into contiguous blocks)")
	f.Uint64Var(&seed, "seed", 1, "seed of the instance, the load change and the policies")
	f.StringVar(&policy, "policy", tiers.DefaultPolicy, "tier policy of every tier and of the flat run: "+strings.Join(benchPolicies(), "|"))
	f.StringVar(&candidates, "candidates", "all", "policy key candidates of the region tier and the flat run: all (every host: a full scan) or how many coldest children a local search tries per shard (0 = the policy's default, 8)")
	f.StringVar(&globalCands, "global-candidates", "1", "policy key candidates of the global tier: all (every region) or how many coldest regions a local search tries per shard (0 = the policy's default, 8)")
	f.Float64Var(&globalTarget, "global-target", 1.002, "policy key target_max_over_lb of the global tier: its local search stops at this max/LB over regions (0 = none)")
	f.Float64Var(&regionTarget, "region-target", 1.03, "policy key target_max_over_lb of the region tier: each region's local search stops at this max/LB over its hosts (0 = none; 1.02 costs ~1 s more at a million shards, docs/benchmarks.md)")
	f.Float64Var(&change, "change", 0.05, "fraction of shards whose load changes before the rebalance round, in [0, 1]")
	f.IntVar(&workers, "workers", 0, "region worker pool size (0 = GOMAXPROCS)")
	f.DurationVar(&flatBudget, "flat-budget", 10*time.Minute, "wall-clock bound of the flat run (0 = none); when it ends the flat plan in progress is cut short")
	f.BoolVar(&noFlat, "no-flat", false, "run the hierarchy only")
	f.BoolVar(&noProgress, "no-progress", false, "no progress line on stderr (otherwise shown once a run takes more than a second: the round running and for how long)")
	f.StringVar(&clock, "clock", "wall", "clock for seconds: wall, or cpu (this process's CPU time over all cores, for a shared machine)")
	out.register(cmd)
	return cmd
}

func printBenchHierarchy(w io.Writer, v benchHierarchyJSON, noFlat bool) error {
	fmt.Fprintf(w, "%d shards, %d hosts in %d regions, seed %d, policy %s (candidates: global tier %s, region tier and flat %s); %d shards changed load before the rebalance; seconds: %s clock\n",
		v.Shards, v.Hosts, v.Regions, v.Seed, v.Policy, candidatesText(v.GlobalCandidates, v.Hosts), candidatesText(v.Candidates, v.Hosts), v.Changed, v.Clock)
	tw := newTable(w)
	fmt.Fprintln(tw, "run\tseconds\tplace\trebalance\tmax_over_lb\tcpu\tmem\tmoves\tunplaced\toverloaded\tstatus")
	row := func(name string, r hierbench.Run) {
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%.3f\t%.4f\t%.4f\t%.4f\t%d\t%d\t%d\t%s\n", name, r.Seconds, r.PlaceSeconds, r.RebalanceSeconds,
			r.MaxOverLB, r.ByResource["cpu"], r.ByResource["mem"], r.Moves, r.Unplaced, r.Overloaded, r.Status)
	}
	row("hierarchy", v.Hier.Run)
	if !noFlat {
		row("flat", v.Flat)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "hierarchy: global tier %.3f s, region tier %.3f s (%d workers), %d shards changed region in the rebalance\n",
		v.Hier.GlobalSeconds, v.Hier.RegionSeconds, v.Hier.Workers, v.Hier.RegionMoves)
	if v.Hier.CriticalPathSeconds > 0 {
		fmt.Fprintf(w, "critical path with one machine per region: %.3f s (global tier + the slowest region, per round)\n", v.Hier.CriticalPathSeconds)
	}
	if noFlat {
		return nil
	}
	reached := "reached it"
	if !v.FlatReached {
		reached = "did NOT reach it (budget or local optimum first): the speed-up is a lower bound"
	}
	_, err := fmt.Fprintf(w, "speedup %.2f× (flat target max_over_lb %.4f, the hierarchy's; flat %s)\n", v.Speedup, v.FlatTarget, reached)
	return err
}

// flatBudgetTimer calls cancel d after the flat run's first round starts
// (never when d ≤ 0): --flat-budget bounds the flat run, not the hierarchy
// before it.
type flatBudgetTimer struct {
	d      time.Duration
	cancel func()
	timer  *time.Timer
}

// phase is told each round as it starts (hierbench.Config.Phase).
func (b *flatBudgetTimer) phase(name string) {
	if name == hierbench.PhaseFlatPlace && b.d > 0 && b.timer == nil {
		b.timer = time.AfterFunc(b.d, b.cancel)
	}
}

// stop stops the timer if it runs.
func (b *flatBudgetTimer) stop() {
	if b.timer != nil {
		b.timer.Stop()
	}
}

// phaseTicker shows on w which round of the benchmark is running and for how
// long: once the run has taken longer than after, redrawn every period, on
// one line.
type phaseTicker struct {
	w     io.Writer
	mu    sync.Mutex
	phase string
	since time.Time
	start time.Time
	after time.Duration
	drawn bool
	stop  chan struct{}
	done  chan struct{}
}

func startPhaseTicker(w io.Writer, period, after time.Duration) *phaseTicker {
	now := time.Now()
	p := &phaseTicker{w: w, start: now, since: now, after: after, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-tick.C:
				p.draw()
			}
		}
	}()
	return p
}

// set starts phase name (Config.Phase).
func (p *phaseTicker) set(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.phase, p.since = name, time.Now()
}

func (p *phaseTicker) draw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if p.phase == "" || now.Sub(p.start) < p.after {
		return
	}
	fmt.Fprintf(p.w, "\r%-20s %7s  (run %s)   ", p.phase+" round", now.Sub(p.since).Round(time.Second), now.Sub(p.start).Round(time.Second))
	p.drawn = true
}

// close stops the ticker and ends its line.
func (p *phaseTicker) close() {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprintln(p.w)
	}
}

// candidatesText shows a candidates setting: "all" when it is every host.
func candidatesText(k, hosts int) string {
	switch {
	case k >= hosts:
		return "all"
	case k == 0:
		return "default"
	}
	return strconv.Itoa(k)
}

// benchCandidates reads a candidates flag: "all" is hosts (every child of
// any tier, a full scan), else a number ≥ 0.
func benchCandidates(flag, v string, hosts int) (int, error) {
	if v == "all" {
		return hosts, nil
	}
	k, err := strconv.Atoi(v)
	if err != nil || k < 0 {
		return 0, fmt.Errorf("%s: must be all or a whole number ≥ 0 (got %q)", flag, v)
	}
	return k, nil
}

// benchPolicies lists the registered tier policies that build without keys:
// the ones the benchmark can run, as it sets only candidates and
// target_max_over_lb (the plugin policy, for one, needs a plugin's address).
func benchPolicies() []string {
	var out []string
	for _, name := range tiers.Default.Names() {
		if _, err := tiers.New(name, nil); err == nil {
			out = append(out, name)
		}
	}
	return out
}
