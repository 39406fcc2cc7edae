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
	"github.com/strata-sched/strata/coordinator/tierd"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/sim/hierbench"
	"github.com/strata-sched/strata/tiers"
)

// benchHierarchyJSON is the output of "strata bench hierarchy": the comparison
// and the settings it ran with.
type benchHierarchyJSON struct {
	hierbench.Result
	// Settings says what the tiers ran with: "daemons" (the tier daemons'
	// own policy and policy configuration at both tiers, tierd defaults),
	// "full-scan" (--full-scan: every host scored per shard, the comparison
	// of what a hierarchy saves a full-scan scheduler) or "custom".
	Settings string `json:"settings"`
	// Policy is the region tier's policy, GlobalPolicy the global tier's,
	// FlatPolicy the flat run's.
	Policy       string `json:"policy"`
	GlobalPolicy string `json:"global_policy"`
	FlatPolicy   string `json:"flat_policy"`
	// GlobalConfig, RegionConfig and FlatConfig are the policy
	// configurations the tiers and the flat run were built with (the flat
	// run's target_max_over_lb is set apart, to the hierarchy's quality).
	GlobalConfig interfaces.PolicyConfig `json:"global_config"`
	RegionConfig interfaces.PolicyConfig `json:"region_config"`
	FlatConfig   interfaces.PolicyConfig `json:"flat_config"`
	// Candidates is the region tier's policy key candidates (--hosts for
	// "all"), FlatCandidates the flat run's, GlobalCandidates the global
	// tier's (0 = the policy's default, 8).
	Candidates       int     `json:"candidates"`
	FlatCandidates   int     `json:"flat_candidates"`
	GlobalCandidates int     `json:"global_candidates"`
	GlobalTarget     float64 `json:"global_target"`
	RegionTarget     float64 `json:"region_target"`
	// Clock names the clocks: seconds are wall-clock, cpu_seconds this
	// process's CPU time over all cores.
	Clock string `json:"clock"`
}

// The settings of "bench hierarchy" (benchHierarchyJSON.Settings).
const (
	benchSettingsDaemons  = "daemons"
	benchSettingsFullScan = "full-scan"
	benchSettingsCustom   = "custom"
)

// fullScanSettings are the solver flags --full-scan stands for (each unless
// given): every host scored for every shard in the regions and the flat run,
// the four coldest regions at the global tier, and the targets the
// full-scan comparison of docs/benchmarks.md was tuned with.
var fullScanSettings = map[string]string{
	"candidates":        "all",
	"flat-candidates":   "all",
	"global-candidates": "1",
	"global-target":     "1.002",
	"region-target":     "1.03",
}

// daemonPolicy returns the tier daemon's own policy name and configuration
// for tier (tierd.Config.Defaults: what a daemon runs when its configuration
// names no policy).
func daemonPolicy(tier string) (string, interfaces.PolicyConfig) {
	c := tierd.Config{Tier: tier}.Defaults()
	pc := interfaces.PolicyConfig{}
	for k, v := range c.PolicyConfig {
		pc[k] = v
	}
	return c.Policy, pc
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
		flatCands    string
		globalCands  string
		globalTarget float64
		regionTarget float64
		change       float64
		workers      int
		flatBudget   time.Duration
		noFlat       bool
		noProgress   bool
		fullScan     bool
		globalPol    string
		regionPol    string
		flatPol      string
		steady       float64
	)
	cmd := &cobra.Command{
		Use:   "hierarchy",
		Short: "Place and rebalance one instance through the global → region hierarchy and through one flat balancer, with the daemons' own solver settings; print both, the critical path and the speed-ups",
		Long: `Generate one reproducible instance — the shards and hosts of "strata bench balance"
(cpu and mem; Zipf-skewed shard loads, largest/smallest = 20×; host capacities ±20%;
mean utilization 0.6), the hosts split into --regions contiguous regions — and run two
rounds on it: place every shard from nothing, then change the load of 5% of the shards
(--change; each resource ×0.5–2, seeded) and rebalance from the placement.

hierarchy: in each round the global tier plans the shards onto the regions (a region's
capacity is the sum of its hosts') through Policy.Plan on a View as the global daemon
does; then every region plans its shards onto its hosts, on --workers goroutines
(default GOMAXPROCS).

flat: the same instance, load change and rounds through one policy over all hosts,
configured as a region tier, except its target: with the local policy it stops as
soon as the busiest host is within the max_over_lb the hierarchy reached
(target_max_over_lb), or when --flat-budget (wall clock, from the start of the
flat run) ends; a flat run cut short leaves shards it had not reached unplaced,
its status is partial and the speed-ups lower bounds.

Settings. By default every tier runs what its daemon runs: the policy and policy
configuration of a tier daemon whose configuration names none (tierd defaults: the
local policy, candidates 8 — the 8 coldest children scored per shard, 32 when
placing — no target). --policy, --candidates, --flat-candidates,
--global-candidates, --global-target and --region-target override them; the output
then says "custom".

--full-scan is the other comparison: the regions and the flat run score every host
for every shard (candidates all), the global tier the four coldest regions
(global-candidates 1), targets 1.002 (global) and 1.03 (regions). It measures how
much a hierarchy saves a full-scan scheduler, not how much it saves Strata: the flat
full scan is tens of times slower than the flat run with the daemons' settings at the
same quality, and takes minutes at a million shards (docs/benchmarks.md). The output
labels it FULL SCAN.

Per run it prints seconds (both rounds: views, plans, applying plans; wall clock),
cpu_s (this process's CPU time over both cores, the garbage collector included: the
CPU work), max_over_lb (the busiest host's utilization over the lower bound of the
whole instance after the change, the worse of cpu and mem), moves (shards whose host
changed in the rebalance round) and the status; for the hierarchy the critical path:
per round, the global tier's time plus the slowest region's — how long the rounds
would take with every region on its own machine, as deployed — next to the flat
run's time. Then the ratios flat / hierarchy of the wall time (speedup), of the
critical path and of the CPU time. Everything but the seconds is the same for the
same flags (unless --flat-budget cuts the flat run short).

Example:
  strata bench hierarchy --shards 1000000 --hosts 10000 --regions 100 --seed 1 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			flags := cmd.Flags()
			if fullScan {
				for name, v := range fullScanSettings {
					if !flags.Changed(name) {
						if err := flags.Set(name, v); err != nil {
							return fmt.Errorf("--full-scan: %w", err)
						}
					}
				}
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
			if !flags.Changed("flat-candidates") {
				flatCands = candidates
			}
			flatK, err := benchCandidates("--flat-candidates", flatCands, hosts)
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
			globalPolicy, globalConfig := daemonPolicy(interfaces.TierGlobal)
			regionPolicy, regionConfig := daemonPolicy(interfaces.TierRegion)
			if flags.Changed("policy") {
				globalPolicy, regionPolicy = policy, policy
			}
			if flags.Changed("global-policy") {
				globalPolicy = globalPol
			}
			if flags.Changed("region-policy") {
				regionPolicy = regionPol
			}
			flatPolicy := regionPolicy
			if flags.Changed("flat-policy") {
				flatPolicy = flatPol
			}
			usable := benchPolicies()
			for _, c := range []struct{ flag, name string }{{"--policy", policy}, {"--global-policy", globalPolicy}, {"--region-policy", regionPolicy}, {"--flat-policy", flatPolicy}} {
				if slices.Contains(usable, c.name) {
					continue
				}
				if tiers.Default.Has(c.name) {
					return fmt.Errorf("%s: policy %q needs keys this benchmark does not set (usable here: %s)", c.flag, c.name, strings.Join(usable, ", "))
				}
				return fmt.Errorf("%s: unknown policy %q (usable here: %s)", c.flag, c.name, strings.Join(usable, ", "))
			}
			if math.IsNaN(steady) || steady < 0 || steady > 1 {
				return fmt.Errorf("--steady: must be in [0, 1] (got %g)", steady)
			}
			// with returns c with the candidates k (0 = keep c's) and target t
			// (0 = keep c's) set.
			with := func(c interfaces.PolicyConfig, k int, t float64) interfaces.PolicyConfig {
				out := interfaces.PolicyConfig{}
				for key, v := range c {
					out[key] = v
				}
				if k > 0 {
					out["candidates"] = strconv.Itoa(k)
				}
				if t > 0 {
					out["target_max_over_lb"] = strconv.FormatFloat(t, 'g', -1, 64)
				}
				return out
			}
			chg := change
			if chg == 0 {
				chg = -1 // hierbench: 0 means the default
			}
			cfg := hierbench.Config{
				Shards: shards, Hosts: hosts, Regions: regions, Seed: seed,
				GlobalPolicy: globalPolicy, RegionPolicy: regionPolicy, FlatPolicy: flatPolicy, Steady: steady,
				GlobalConfig: with(globalConfig, globalK, globalTarget), RegionConfig: with(regionConfig, regionCands, regionTarget),
				FlatConfig: with(regionConfig, flatK, 0),
				Change:     chg, Workers: workers, SkipFlat: noFlat, MatchQuality: true, Now: time.Now, CPU: cpuNow,
			}
			settings := benchSettingsDaemons
			switch {
			case fullScan:
				settings = benchSettingsFullScan
			case slices.ContainsFunc([]string{"policy", "global-policy", "region-policy", "flat-policy", "candidates", "flat-candidates", "global-candidates", "global-target", "region-target"}, flags.Changed):
				settings = benchSettingsCustom
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
			v := benchHierarchyJSON{Result: res, Settings: settings, Policy: regionPolicy, GlobalPolicy: globalPolicy, FlatPolicy: flatPolicy,
				GlobalConfig: cfg.GlobalConfig, RegionConfig: cfg.RegionConfig, FlatConfig: cfg.FlatConfig,
				Candidates: regionCands, FlatCandidates: flatK, GlobalCandidates: globalK, GlobalTarget: globalTarget, RegionTarget: regionTarget,
				Clock: "seconds: wall; cpu_seconds: process CPU time"}
			return out.print(g.stdout, v, func(w io.Writer) error { return printBenchHierarchy(w, v, noFlat) })
		},
	}
	f := cmd.Flags()
	f.IntVar(&shards, "shards", 100000, "number of shards")
	f.IntVar(&hosts, "hosts", 1000, "number of hosts")
	f.IntVar(&regions, "regions", 10, "number of regions (≤ hosts; hosts are split into contiguous blocks)")
	f.Uint64Var(&seed, "seed", 1, "seed of the instance, the load change and the policies")
	f.StringVar(&policy, "policy", tiers.DefaultPolicy, "tier policy of every tier and of the flat run (default: the daemons', "+tiers.DefaultPolicy+"): "+strings.Join(benchPolicies(), "|"))
	f.StringVar(&candidates, "candidates", "0", "policy key candidates of the region tier (and the flat run unless --flat-candidates): all (every host: a full scan) or how many coldest children a local search tries per shard (0 = the daemons' default, 8)")
	f.StringVar(&flatCands, "flat-candidates", "0", "policy key candidates of the flat run (default: --candidates): all or a number (0 = the daemons' default, 8)")
	f.StringVar(&globalCands, "global-candidates", "0", "policy key candidates of the global tier: all (every region) or how many coldest regions a local search tries per shard (0 = the daemons' default, 8)")
	f.Float64Var(&globalTarget, "global-target", 0, "policy key target_max_over_lb of the global tier: its local search stops at this max/LB over regions (0 = the daemons': none)")
	f.Float64Var(&regionTarget, "region-target", 0, "policy key target_max_over_lb of the region tier: each region's local search stops at this max/LB over its hosts (0 = the daemons': none)")
	f.StringVar(&globalPol, "global-policy", "", "tier policy of the global tier (default: --policy)")
	f.StringVar(&regionPol, "region-policy", "", "tier policy of the region tier (default: --policy)")
	f.StringVar(&flatPol, "flat-policy", "", "tier policy of the flat run (default: the region tier's)")
	f.Float64Var(&steady, "steady", 0.01, "fraction of shards whose load changes (×0.9–1.1) before a third, steady-state round, reported apart (0 = no such round)")
	f.BoolVar(&fullScan, "full-scan", false, "the full-scan comparison, NOT the daemons' settings: --candidates all --flat-candidates all --global-candidates 1 --global-target 1.002 --region-target 1.03 (each unless given)")
	f.Float64Var(&change, "change", 0.05, "fraction of shards whose load changes before the rebalance round, in [0, 1]")
	f.IntVar(&workers, "workers", 0, "region worker pool size (0 = GOMAXPROCS)")
	f.DurationVar(&flatBudget, "flat-budget", 10*time.Minute, "wall-clock bound of the flat run (0 = none); when it ends the flat plan in progress is cut short")
	f.BoolVar(&noFlat, "no-flat", false, "run the hierarchy only")
	f.BoolVar(&noProgress, "no-progress", false, "no progress line on stderr (otherwise shown once a run takes more than a second: the round running and for how long)")
	out.register(cmd)
	return cmd
}

func printBenchHierarchy(w io.Writer, v benchHierarchyJSON, noFlat bool) error {
	switch v.Settings {
	case benchSettingsFullScan:
		fmt.Fprintln(w, "FULL SCAN comparison (--full-scan): the regions and the flat run score every host for every shard — NOT the daemons' settings; it measures what a hierarchy saves a full-scan scheduler")
	case benchSettingsDaemons:
		fmt.Fprintln(w, "settings: the daemons' own (tierd defaults) at both tiers and in the flat run")
	default:
		fmt.Fprintln(w, "settings: custom (flags override the daemons' defaults)")
	}
	fmt.Fprintf(w, "%d shards, %d hosts in %d regions, seed %d, policies global %s, region %s, flat %s (candidates: global tier %s, region tier %s, flat %s); %d shards changed load before the rebalance\n",
		v.Shards, v.Hosts, v.Regions, v.Seed, v.GlobalPolicy, v.Policy, v.FlatPolicy, candidatesText(v.GlobalCandidates, v.Hosts), candidatesText(v.Candidates, v.Hosts), candidatesText(v.FlatCandidates, v.Hosts), v.Changed)
	tw := newTable(w)
	fmt.Fprintln(tw, "run\tseconds\tplace\trebalance\tcritical_path\tcpu_s\tmax_over_lb\tcpu\tmem\tmoves\tunplaced\toverloaded\tstatus")
	row := func(name string, r hierbench.Run, critical float64) {
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.4f\t%.4f\t%.4f\t%d\t%d\t%d\t%s\n", name, r.Seconds, r.PlaceSeconds, r.RebalanceSeconds, critical, r.CPUSeconds,
			r.MaxOverLB, r.ByResource["cpu"], r.ByResource["mem"], r.Moves, r.Unplaced, r.Overloaded, r.Status)
	}
	row("hierarchy", v.Hier.Run, v.Hier.CriticalPathSeconds)
	if !noFlat {
		row("flat", v.Flat, v.Flat.Seconds) // one machine: its critical path is its time
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "hierarchy: global tier %.3f s (%.3f CPU-s), region tier %.3f s (%d workers), %d shards changed region in the rebalance\n",
		v.Hier.GlobalSeconds, v.Hier.GlobalCPUSeconds, v.Hier.RegionSeconds, v.Hier.Workers, v.Hier.RegionMoves)
	for _, rd := range v.Hier.Rounds {
		fmt.Fprintf(w, "  %-9s global %.3f s + slowest region %.3f s = critical path %.3f s (region phase on the pool %.3f s)\n", rd.Name, rd.Global, rd.SlowestRegion, rd.CriticalPath, rd.Regions)
	}
	fmt.Fprintln(w, "critical path: per round, the global tier's time plus the slowest region's — one machine per region, as deployed")
	if v.Hier.SteadySeconds > 0 {
		fmt.Fprintf(w, "steady round (%d shards' loads changed ×0.9–1.1): hierarchy %.3f s (%.3f CPU-s, %d moves, max_over_lb %.4f)", v.SteadyChanged, v.Hier.SteadySeconds, v.Hier.SteadyCPUSeconds, v.Hier.SteadyMoves, v.Hier.SteadyMaxOverLB)
		if !noFlat {
			fmt.Fprintf(w, ", flat %.3f s (%.3f CPU-s, %d moves, max_over_lb %.4f)", v.Flat.SteadySeconds, v.Flat.SteadyCPUSeconds, v.Flat.SteadyMoves, v.Flat.SteadyMaxOverLB)
		}
		fmt.Fprintln(w)
	}
	if noFlat {
		return nil
	}
	reached := "reached it"
	if !v.FlatReached {
		reached = "did NOT reach it (budget or local optimum first): the ratios are lower bounds"
	}
	_, err := fmt.Fprintf(w, "flat / hierarchy: wall %.2f× (speedup), critical path %.2f×, CPU %.2f× (flat target max_over_lb %.4f, the hierarchy's; flat %s)\n",
		v.Speedup, v.CriticalPathSpeedup, v.CPURatio, v.FlatTarget, reached)
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
