package hierbench

import (
	"context"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/tiers"
)

func smallConfig() Config {
	return Config{
		Shards: 3000, Hosts: 60, Regions: 4, Seed: 5,
		GlobalPolicy: "local", RegionPolicy: "local", FlatPolicy: "local",
		GlobalConfig: interfaces.PolicyConfig{"candidates": "1", "target_max_over_lb": "1.002"},
		RegionConfig: interfaces.PolicyConfig{"candidates": "1", "target_max_over_lb": "1.02"},
		FlatConfig:   interfaces.PolicyConfig{"candidates": "1"},
		MatchQuality: true,
	}
}

// direct computes max load/capacity over hosts per resource under host, and
// the LB from its definition (max(Σload/Σcap, max shard load/largest
// capacity)), from the instance's raw arrays: a reference for MaxOverLB.
func direct(t *testing.T, in *Instance, host []int32) (maxOverLB float64, overloaded int) {
	t.Helper()
	p := in.P
	R, M, N := p.NumResources(), p.NumChildren(), p.NumShards()
	worst := 0.0
	used := make([]float64, M*R)
	for s := 0; s < N; s++ {
		for r := 0; r < R; r++ {
			used[int(host[s])*R+r] += in.After[s*R+r]
		}
	}
	for c := 0; c < M; c++ {
		for r := 0; r < R; r++ {
			if used[c*R+r] > p.Capacity[c*R+r] {
				overloaded++
				break
			}
		}
	}
	for r := 0; r < R; r++ {
		var load, capa, maxShard, maxCap, mx float64
		for s := 0; s < N; s++ {
			load += in.After[s*R+r]
			maxShard = math.Max(maxShard, in.After[s*R+r])
		}
		for c := 0; c < M; c++ {
			capa += p.Capacity[c*R+r]
			maxCap = math.Max(maxCap, p.Capacity[c*R+r])
			mx = math.Max(mx, used[c*R+r]/p.Capacity[c*R+r])
		}
		lb := math.Max(load/capa, maxShard/maxCap)
		worst = math.Max(worst, mx/lb)
	}
	return worst, overloaded
}

func TestHierarchyPlacementIsValidAndScoredRight(t *testing.T) {
	cfg := smallConfig()
	in, err := NewInstance(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if in.Changed == 0 {
		t.Fatal("no shard changed load: the rebalance round tests nothing")
	}
	res, err := CompareInstance(context.Background(), cfg, in)
	if err != nil {
		t.Fatal(err)
	}
	for name, host := range map[string][]int32{"hierarchy": res.HierHost, "flat": res.FlatHost} {
		if len(host) != cfg.Shards {
			t.Fatalf("%s: %d hosts for %d shards", name, len(host), cfg.Shards)
		}
		for s, c := range host {
			if c < 0 || int(c) >= cfg.Hosts {
				t.Fatalf("%s: shard %d on host %d: every shard must be on exactly one host", name, s, c)
			}
		}
		want, over := direct(t, in, host)
		run := res.Flat
		if name == "hierarchy" {
			run = res.Hier.Run
		}
		if math.Abs(run.MaxOverLB-want) > 1e-9 {
			t.Errorf("%s: max_over_lb %.12f, direct computation %.12f", name, run.MaxOverLB, want)
		}
		if over != 0 || run.Overloaded != 0 || run.Unplaced != 0 {
			t.Errorf("%s: %d hosts over capacity (reported %d), %d unplaced", name, over, run.Overloaded, run.Unplaced)
		}
		if run.Placed != cfg.Shards || run.Status != "ok" {
			t.Errorf("%s: placed %d of %d, status %s", name, run.Placed, cfg.Shards, run.Status)
		}
	}
	// A shard's host is in its region.
	for s, c := range res.HierHost {
		if r := res.RegionOf[s]; int(c) < in.HostOff[r] || int(c) >= in.HostOff[r+1] {
			t.Fatalf("shard %d on host %d, outside its region %d", s, c, r)
		}
	}
	if res.Hier.MaxOverLB > 1.05 {
		t.Errorf("hierarchy max_over_lb %.4f: the tier targets (1.002 × 1.02) should keep it near 1.02", res.Hier.MaxOverLB)
	}
	if !res.FlatReached || res.Flat.MaxOverLB > res.FlatTarget*(1+1e-9) || res.FlatTarget != res.Hier.MaxOverLB {
		t.Errorf("flat: target %.6f (hierarchy %.6f), reached %v with %.6f", res.FlatTarget, res.Hier.MaxOverLB, res.FlatReached, res.Flat.MaxOverLB)
	}
	if res.Hier.Moves == 0 || res.Flat.Moves == 0 {
		t.Errorf("the load change moved nothing: hierarchy %d, flat %d moves", res.Hier.Moves, res.Flat.Moves)
	}
}

// TestDeterministic: everything but the seconds repeats for a seed; another
// seed gives another instance.
func TestDeterministic(t *testing.T) {
	run := func(seed uint64) Result {
		cfg := smallConfig()
		cfg.Shards, cfg.Hosts, cfg.Regions, cfg.Seed = 1500, 30, 3, seed
		res, err := Compare(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	a, b, c := run(2), run(2), run(3)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("same seed, different results:\n%+v\n%+v", a, b)
	}
	if reflect.DeepEqual(a.HierHost, c.HierHost) {
		t.Fatal("seeds 2 and 3 gave the same placement")
	}
}

// TestOneRegionPerHost: with as many regions as hosts the region tier has one
// child each and the global tier does all the balancing; still valid.
func TestOneRegionPerHost(t *testing.T) {
	cfg := smallConfig()
	cfg.Shards, cfg.Hosts, cfg.Regions = 400, 8, 8
	cfg.SkipFlat = true
	in, err := NewInstance(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := CompareInstance(context.Background(), cfg, in)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := direct(t, in, res.HierHost)
	if math.Abs(res.Hier.MaxOverLB-want) > 1e-9 || res.Hier.Unplaced != 0 || res.Flat.Seconds != 0 || res.FlatHost != nil {
		t.Fatalf("%+v (direct max_over_lb %.6f)", res.Hier, want)
	}
}

func TestBadConfig(t *testing.T) {
	for _, tc := range []struct {
		mut  func(*Config)
		want string
	}{
		{func(c *Config) { c.Shards = 0 }, "shards: must be ≥ 1"},
		{func(c *Config) { c.Hosts = -1 }, "hosts: must be ≥ 1"},
		{func(c *Config) { c.Regions = 0 }, "regions: must be ≥ 1"},
		{func(c *Config) { c.Regions = 61 }, "regions: must be ≤ hosts (60)"},
		{func(c *Config) { c.Change = 2 }, "change: must be in [0, 1]"},
		{func(c *Config) { c.Workers = -1 }, "workers: must be ≥ 0"},
		{func(c *Config) { c.RegionPolicy = "annealing" }, `region_policy: unknown policy "annealing"`},
		{func(c *Config) { c.GlobalConfig = interfaces.PolicyConfig{"target_max_over_lb": "0.5"} }, `global_policy: policy "local": policy local: key "target_max_over_lb"`},
	} {
		cfg := smallConfig()
		tc.mut(&cfg)
		_, err := Compare(context.Background(), cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want an error containing %q", err, tc.want)
		}
		if err != nil && !errors.Is(err, interfaces.ErrInvalid) && !errors.Is(err, interfaces.ErrNotFound) {
			t.Errorf("%v: wraps neither ErrInvalid nor ErrNotFound", err)
		}
	}
}

// TestFlatBudget: a flat run whose context is already done, or ends when the
// flat run starts (as the CLI's --flat-budget does through Config.Phase),
// still applies every round and reports a valid, partial result; the
// hierarchy is not cut.
func TestFlatBudget(t *testing.T) {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for name, atFlat := range map[string]bool{"context done": false, "ends with the flat run": true} {
		cfg := smallConfig()
		ctx := done
		if atFlat {
			var end context.CancelFunc
			ctx, end = context.WithCancel(context.Background())
			defer end()
			cfg.Phase = func(p string) {
				if p == PhaseFlatPlace {
					end()
				}
			}
		}
		res, err := Compare(ctx, cfg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.Flat.Status != "partial" {
			t.Errorf("%s: flat status %s, want partial (cut short)", name, res.Flat.Status)
		}
		if res.Hier.Status != "ok" {
			t.Errorf("%s: the hierarchy has no deadline, status %s", name, res.Hier.Status)
		}
		if res.Flat.Unplaced > 0 && res.FlatReached {
			t.Errorf("%s: %d shards unplaced, yet the flat run reached the target", name, res.Flat.Unplaced)
		}
	}
}

// TestCriticalPath: with a clock, every region's plan is timed; the slowest
// of each round lies inside that round's region phase, and the critical path
// is the global tier's time plus those. The clock ticks 1 ms per reading
// (atomically: the region workers read it concurrently).
func TestCriticalPath(t *testing.T) {
	cfg := smallConfig()
	cfg.SkipFlat, cfg.Workers = true, 2
	var ticks atomic.Int64
	cfg.Now = func() time.Time { return time.Unix(0, ticks.Add(1)*int64(time.Millisecond)) }
	res, err := Compare(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := res.Hier
	if h.SlowestRegionSeconds <= 0 || h.SlowestRegionSeconds > h.RegionSeconds {
		t.Errorf("slowest regions %g s, want in (0, region phase %g s]", h.SlowestRegionSeconds, h.RegionSeconds)
	}
	if h.CriticalPathSeconds != h.GlobalSeconds+h.SlowestRegionSeconds {
		t.Errorf("critical path %g s, want global %g + slowest %g", h.CriticalPathSeconds, h.GlobalSeconds, h.SlowestRegionSeconds)
	}
	// One machine per region can only be faster than the pool: the slowest
	// region of a round takes no longer than the round's whole region phase,
	// and with several regions per worker (4 regions, 2 workers) it is shorter.
	if h.CriticalPathSeconds > h.Seconds || h.SlowestRegionSeconds >= h.RegionSeconds {
		t.Errorf("critical path %g s (slowest regions %g s) against the run's %g s (region phases %g s)", h.CriticalPathSeconds, h.SlowestRegionSeconds, h.Seconds, h.RegionSeconds)
	}
	// The rounds split the tiers' figures and add up to them.
	if len(h.Rounds) != 2 || h.Rounds[0].Name != "place" || h.Rounds[1].Name != "rebalance" {
		t.Fatalf("rounds %+v", h.Rounds)
	}
	var g, sl float64
	for _, rd := range h.Rounds {
		if rd.CriticalPath != rd.Global+rd.SlowestRegion || rd.SlowestRegion > rd.Regions {
			t.Errorf("round %+v", rd)
		}
		g, sl = g+rd.Global, sl+rd.SlowestRegion
	}
	if g != h.GlobalSeconds || sl != h.SlowestRegionSeconds {
		t.Errorf("rounds sum to global %g, slowest %g; run says %g, %g", g, sl, h.GlobalSeconds, h.SlowestRegionSeconds)
	}
	// The CPU clock is read at the same points: a clock that ticks 1 ms per
	// reading as well gives each side CPU seconds, and the ratios come out.
	var cpuTicks atomic.Int64
	cfg.CPU = func() time.Time { return time.Unix(0, cpuTicks.Add(1)*int64(time.Millisecond)) }
	cfg.SkipFlat = false
	if res, err = Compare(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if res.Hier.CPUSeconds <= 0 || res.Flat.CPUSeconds <= 0 || res.Hier.GlobalCPUSeconds <= 0 || res.CPURatio != res.Flat.CPUSeconds/res.Hier.CPUSeconds ||
		res.CriticalPathSpeedup != res.Flat.Seconds/res.Hier.CriticalPathSeconds {
		t.Errorf("cpu %g / %g s (global %g), ratios cpu %g critical path %g", res.Hier.CPUSeconds, res.Flat.CPUSeconds, res.Hier.GlobalCPUSeconds, res.CPURatio, res.CriticalPathSpeedup)
	}
	// Without a clock there is nothing to report.
	cfg.Now, cfg.CPU = nil, nil
	if res, err = Compare(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if res.Hier.CriticalPathSeconds != 0 {
		t.Errorf("critical path %g s without a clock", res.Hier.CriticalPathSeconds)
	}
}

// TestPhases: Config.Phase hears every round as it starts, in order.
func TestPhases(t *testing.T) {
	cfg := smallConfig()
	var got []string
	cfg.Phase = func(name string) { got = append(got, name) }
	if _, err := Compare(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	want := []string{PhaseHierPlace, PhaseHierRebalance, PhaseFlatPlace, PhaseFlatRebalance}
	if !slices.Equal(got, want) {
		t.Errorf("phases %q, want %q", got, want)
	}
}

// TestRegionViewsFollowTheGlobalView: each region plans from a view it keeps
// from round to round, patched rather than rebuilt. After both rounds — the
// load change in between, shards moving between regions — every region's view
// must list exactly its shards, in index order, with the loads after the
// change; and a region whose membership shrinks and grows again must not show
// entries left from before.
func TestRegionViewsFollowTheGlobalView(t *testing.T) {
	cfg := smallConfig()
	cfg.Change = 0.3 // many changed loads
	in, err := NewInstance(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pol := func(c interfaces.PolicyConfig) interfaces.Policy {
		p, err := tiers.New("local", c)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	h := newHier(in, cfg.Seed, pol(cfg.GlobalConfig), pol(cfg.RegionConfig), 2)
	if _, err := h.run(clocks{}, func(string) {}); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		for r := range h.regions {
			members := h.idx[h.off[r]:h.off[r+1]]
			view := h.rviews[r]
			if len(view) != len(members) {
				t.Fatalf("%s: region %d: view of %d shards, %d members", when, r, len(view), len(members))
			}
			for i, s := range members {
				g := h.gshards[s]
				if view[i].ID != g.ID || view[i].Load.CPU != g.Load.CPU || view[i].Load.Mem != g.Load.Mem {
					t.Fatalf("%s: region %d, position %d: view has %s %+v, global view %s %+v", when, r, i, view[i].ID, view[i].Load, g.ID, g.Load)
				}
			}
		}
	}
	check("after both rounds")
	// Shrink region 0 to half its shards (the others go unplaced), plan, then
	// give them back with new loads: the view must not keep the old entries.
	lo, hi := h.off[0], h.off[1]
	back := slices.Clone(h.idx[lo+(hi-lo)/2 : hi])
	for _, s := range back {
		h.regionOf[s] = -1
	}
	h.group()
	if _, err := h.regionPlan(0); err != nil {
		t.Fatal(err)
	}
	check("region 0 shrunk")
	for _, s := range back {
		h.regionOf[s] = 0
		h.gshards[s].Load.CPU *= 0.5
	}
	h.group()
	if _, err := h.regionPlan(0); err != nil {
		t.Fatal(err)
	}
	check("region 0 grown back")
}

// TestIncrementalTiers: with the incremental policy at both tiers (one
// instance per region, fed what changed), every shard ends on a host of its
// region within capacity, the quality is within 8% of the LB after the
// rebalance and after a steady round (1.064 / 1.042 here: 50 shards a host,
// single moves only), the global tier moves only the shards
// that change region, and the run is deterministic.
func TestIncrementalTiers(t *testing.T) {
	cfg := smallConfig()
	cfg.GlobalPolicy, cfg.RegionPolicy, cfg.FlatPolicy = "incremental", "incremental", "incremental"
	cfg.GlobalConfig, cfg.RegionConfig, cfg.FlatConfig = nil, nil, nil
	cfg.Steady = 0.01
	cfg.MatchQuality = false
	res, err := Compare(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	in, _ := NewInstance(cfg)
	for s, h := range res.HierHost {
		if h < 0 {
			t.Fatalf("shard %d unplaced", s)
		}
		if r := res.RegionOf[s]; int(h) < in.HostOff[r] || int(h) >= in.HostOff[r+1] {
			t.Fatalf("shard %d on host %d outside its region %d", s, h, r)
		}
	}
	for name, r := range map[string]Run{"hierarchy": res.Hier.Run, "flat": res.Flat} {
		if r.Unplaced != 0 || r.Overloaded != 0 || r.MaxOverLB > 1.08 || r.SteadyMaxOverLB > 1.08 || r.Status != "ok" {
			t.Errorf("%s: %+v", name, r)
		}
	}
	if res.Hier.RegionMoves > res.Changed {
		t.Errorf("%d shards changed region for %d changed loads", res.Hier.RegionMoves, res.Changed)
	}
	again, err := Compare(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(again.HierHost, res.HierHost) || !slices.Equal(again.FlatHost, res.FlatHost) {
		t.Error("same config, different placements")
	}
}
