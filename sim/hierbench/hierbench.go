package hierbench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/tiers"
)

// Config describes one comparison.
type Config struct {
	Shards, Hosts, Regions int
	Seed                   uint64
	// GlobalPolicy, RegionPolicy and FlatPolicy name tier policies of the tiers
	// registry ("greedy", "local", ...); each is built with its *Config.
	GlobalPolicy, RegionPolicy, FlatPolicy string
	GlobalConfig, RegionConfig, FlatConfig interfaces.PolicyConfig
	// Change is the fraction of shards whose load changes before the rebalance
	// round, in [0, 1]; 0 means 0.05. Use a negative value for no change.
	Change float64
	// Steady, when > 0, adds a third round: the steady state, after another
	// seeded load change of that fraction of the shards (each resource
	// ×0.9–1.1), from the rebalanced placement. Its figures are reported
	// apart (Run.Steady*); the main figures stay those after the rebalance.
	Steady float64
	// Workers is the size of the region worker pool; 0 means GOMAXPROCS.
	Workers int
	// SkipFlat leaves the flat run out (Result.Flat is zero).
	SkipFlat bool
	// MatchQuality sets the flat policy's target_max_over_lb to the max_over_lb
	// the hierarchy reached, so the flat local search stops as soon as it is as
	// good (a target in FlatConfig is then overridden).
	MatchQuality bool
	// Now times the runs (the wall clock); nil reports 0 seconds. CPU, when
	// set, is a second clock read at the same points — the process's CPU time
	// over all cores — for the CPU-seconds figures; nil reports 0.
	Now, CPU func() time.Time
	// Phase, when set, is told each round as it starts (PhaseHierPlace,
	// PhaseHierRebalance, PhaseFlatPlace, PhaseFlatRebalance): for progress,
	// and for a caller that starts the flat run's time budget with the flat
	// run (PhaseFlatPlace).
	Phase func(name string)
}

// Run is what one side (hierarchy or flat) did.
type Run struct {
	// Seconds is the time of both rounds (views, plans, applying the plans).
	Seconds          float64 `json:"seconds"`
	PlaceSeconds     float64 `json:"place_seconds"`
	RebalanceSeconds float64 `json:"rebalance_seconds"`
	// CPUSeconds is the CPU time of both rounds (Config.CPU: every core and
	// the garbage collector's work included); CPU work, where Seconds is
	// elapsed time.
	CPUSeconds          float64 `json:"cpu_seconds"`
	PlaceCPUSeconds     float64 `json:"place_cpu_seconds"`
	RebalanceCPUSeconds float64 `json:"rebalance_cpu_seconds"`
	// MaxOverLB is the worse of cpu and mem; ByResource has both.
	MaxOverLB  float64            `json:"max_over_lb"`
	ByResource map[string]float64 `json:"max_over_lb_by_resource"`
	// Moves counts the shards whose host changed in the rebalance round.
	Moves int `json:"moves"`
	// Placed counts the shards on a host after the place round.
	Placed int `json:"placed"`
	// Unplaced counts the shards without a host at the end; Overloaded the hosts
	// above their capacity in some resource at the end.
	Unplaced   int `json:"unplaced"`
	Overloaded int `json:"overloaded_hosts"`
	// Status is the worst status of the plans (ok < partial < infeasible).
	Status string `json:"status"`
	// The steady round (Config.Steady): its seconds, CPU seconds, the
	// shards whose host changed in it and max_over_lb after it (with the
	// loads after the steady change, over their lower bound).
	SteadySeconds    float64 `json:"steady_seconds,omitempty"`
	SteadyCPUSeconds float64 `json:"steady_cpu_seconds,omitempty"`
	SteadyMoves      int     `json:"steady_moves,omitempty"`
	SteadyMaxOverLB  float64 `json:"steady_max_over_lb,omitempty"`
}

// HierRun adds the hierarchy's own figures.
type HierRun struct {
	Run
	// GlobalSeconds and RegionSeconds split Seconds by tier (the rest is
	// applying plans and grouping shards by region).
	GlobalSeconds float64 `json:"global_seconds"`
	RegionSeconds float64 `json:"region_seconds"`
	// RegionMoves counts the shards whose region changed in the rebalance round.
	RegionMoves int `json:"region_moves"`
	// Workers is the size of the region worker pool.
	Workers int `json:"workers"`
	// SlowestRegionSeconds sums, over the rounds, the time of the slowest
	// region's plan; CriticalPathSeconds = GlobalSeconds + SlowestRegionSeconds
	// is how long the rounds would take with every region on its own machine,
	// as deployed (both are meaningful with a wall clock only: a CPU clock
	// counts the other workers too).
	SlowestRegionSeconds float64 `json:"slowest_region_seconds,omitempty"`
	CriticalPathSeconds  float64 `json:"critical_path_seconds,omitempty"`
	// GlobalCPUSeconds is the CPU time of the global tier's share (one
	// goroutine, so about its wall time unless the collector runs).
	GlobalCPUSeconds float64 `json:"global_cpu_seconds"`
	// Rounds splits the tiers' seconds by round: place, then rebalance.
	Rounds []HierRound `json:"rounds"`
}

// HierRound is one round of the hierarchy, in seconds of the wall clock.
type HierRound struct {
	Name string `json:"name"`
	// Global is the global tier's plan and its application; Regions the
	// region phase on the pool; SlowestRegion the slowest region's plan;
	// CriticalPath = Global + SlowestRegion.
	Global        float64 `json:"global_seconds"`
	Regions       float64 `json:"region_seconds"`
	SlowestRegion float64 `json:"slowest_region_seconds"`
	CriticalPath  float64 `json:"critical_path_seconds"`
}

// Result is the comparison.
type Result struct {
	Shards  int    `json:"shards"`
	Hosts   int    `json:"hosts"`
	Regions int    `json:"regions"`
	Seed    uint64 `json:"seed"`
	Changed int    `json:"changed_shards"`
	// SteadyChanged counts the shards whose load changed before the steady
	// round (Config.Steady).
	SteadyChanged int     `json:"steady_changed_shards,omitempty"`
	Hier          HierRun `json:"hierarchy"`
	Flat          Run     `json:"flat"`
	// FlatTarget is the target_max_over_lb the flat policy ran with when
	// MatchQuality is set (the hierarchy's max_over_lb), else 0.
	FlatTarget float64 `json:"flat_target_max_over_lb,omitempty"`
	// FlatReached says whether the flat run placed every shard and reached
	// FlatTarget (it may run out of its time budget first).
	FlatReached bool `json:"flat_reached_target"`
	// Speedup is Flat.Seconds / Hier.Seconds (0 without a flat run): wall
	// time on this machine, the regions sharing its cores.
	Speedup float64 `json:"speedup"`
	// CriticalPathSpeedup is Flat.Seconds / Hier.CriticalPathSeconds: as if
	// every region ran on its own machine, as deployed. CPURatio is
	// Flat.CPUSeconds / Hier.CPUSeconds: the CPU work saved. 0 when a side
	// has no figure.
	CriticalPathSpeedup float64 `json:"critical_path_speedup"`
	CPURatio            float64 `json:"cpu_ratio"`
	// LB is the lower bound per resource of the instance after the change.
	LB map[string]float64 `json:"lb"`
	// HierHost and FlatHost are the final host of every shard (-1 = none), for
	// checks; RegionOf the hierarchy's final region of every shard.
	HierHost, FlatHost, RegionOf []int32 `json:"-"`
}

func (c *Config) check() error {
	switch {
	case c.Shards < 1:
		return fmt.Errorf("shards: must be ≥ 1 (got %d): %w", c.Shards, interfaces.ErrInvalid)
	case c.Hosts < 1:
		return fmt.Errorf("hosts: must be ≥ 1 (got %d): %w", c.Hosts, interfaces.ErrInvalid)
	case c.Regions < 1:
		return fmt.Errorf("regions: must be ≥ 1 (got %d): %w", c.Regions, interfaces.ErrInvalid)
	case c.Regions > c.Hosts:
		return fmt.Errorf("regions: must be ≤ hosts (%d), every region needs a host (got %d): %w", c.Hosts, c.Regions, interfaces.ErrInvalid)
	case c.Shards > math.MaxInt32 || c.Hosts > math.MaxInt32:
		return fmt.Errorf("shards: too many for 32-bit indices (got %d): %w", c.Shards, interfaces.ErrInvalid)
	case math.IsNaN(c.Change) || c.Change > 1:
		return fmt.Errorf("change: must be in [0, 1] (got %g): %w", c.Change, interfaces.ErrInvalid)
	case math.IsNaN(c.Steady) || c.Steady < 0 || c.Steady > 1:
		return fmt.Errorf("steady: must be in [0, 1] (got %g): %w", c.Steady, interfaces.ErrInvalid)
	case c.Workers < 0:
		return fmt.Errorf("workers: must be ≥ 0 (got %d): %w", c.Workers, interfaces.ErrInvalid)
	}
	return nil
}

// Instance is the generated instance: the flat problem (shards, hosts, loads
// before the change), the region of every host and the loads after the change.
type Instance struct {
	P *balancer.Problem
	// HostOff[r]..HostOff[r+1] are the hosts of region r.
	HostOff []int
	// After is the N×R load after the change; Changed the number of shards whose
	// load changed, ChangedIdx their indices.
	After      []float64
	Changed    int
	ChangedIdx []int32
	// Steady is the N×R load after the steady round's change (nil without
	// one), SteadyIdx the shards it changed.
	Steady    []float64
	SteadyIdx []int32
}

// NewInstance generates the instance of cfg.
func NewInstance(cfg Config) (*Instance, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	p, err := balancer.Generate(balancer.InstanceSpec{Shards: cfg.Shards, Hosts: cfg.Hosts, Seed: cfg.Seed})
	if err != nil {
		return nil, err
	}
	// IDs that sort like their indices, so plans listed by shard ID come out in
	// index order.
	width := len(strconv.Itoa(cfg.Shards - 1))
	for s := range p.Current {
		p.Current[s] = -1
		p.ShardIDs[s] = interfaces.ShardID(fmt.Sprintf("shard-%0*d", width, s))
	}
	in := &Instance{P: p, HostOff: make([]int, cfg.Regions+1)}
	for r := 0; r <= cfg.Regions; r++ {
		in.HostOff[r] = r * cfg.Hosts / cfg.Regions
	}
	in.After = append([]float64(nil), p.Load...)
	frac := cfg.Change
	if frac == 0 {
		frac = 0.05
	}
	if frac > 0 {
		R := p.NumResources()
		rng := rand.New(rand.NewPCG(cfg.Seed, 0xc4a96e))
		for s := 0; s < cfg.Shards; s++ {
			if rng.Float64() >= frac {
				continue
			}
			in.Changed++
			in.ChangedIdx = append(in.ChangedIdx, int32(s))
			for r := 0; r < R; r++ {
				in.After[s*R+r] *= 0.5 + 1.5*rng.Float64()
			}
		}
	}
	if cfg.Steady > 0 {
		R := p.NumResources()
		in.Steady = append([]float64(nil), in.After...)
		rng := rand.New(rand.NewPCG(cfg.Seed, 0x57eadd))
		for s := 0; s < cfg.Shards; s++ {
			if rng.Float64() >= cfg.Steady {
				continue
			}
			in.SteadyIdx = append(in.SteadyIdx, int32(s))
			for r := 0; r < R; r++ {
				in.Steady[s*R+r] *= 0.9 + 0.2*rng.Float64()
			}
		}
	}
	return in, nil
}

// Compare runs the hierarchy and then (unless cfg.SkipFlat) the flat balancer on
// the instance of cfg. ctx bounds the flat run only: when it ends, the flat
// policy returns its best plan so far (Status partial) and the remaining rounds
// are still applied. The hierarchy runs without a deadline.
func Compare(ctx context.Context, cfg Config) (Result, error) {
	in, err := NewInstance(cfg)
	if err != nil {
		return Result{}, err
	}
	return CompareInstance(ctx, cfg, in)
}

// CompareInstance is Compare on a generated instance.
func CompareInstance(ctx context.Context, cfg Config, in *Instance) (Result, error) {
	if err := cfg.check(); err != nil {
		return Result{}, err
	}
	names := [3]string{cfg.GlobalPolicy, cfg.RegionPolicy, cfg.FlatPolicy}
	fields := [3]string{"global_policy", "region_policy", "flat_policy"}
	cfgs := [3]interfaces.PolicyConfig{cfg.GlobalConfig, cfg.RegionConfig, cfg.FlatConfig}
	var pols [3]interfaces.Policy
	for i := range pols {
		if names[i] == "" {
			names[i] = tiers.DefaultPolicy
		}
		p, err := tiers.New(names[i], cfgs[i])
		if err != nil {
			return Result{}, fmt.Errorf("%s: %w", fields[i], err)
		}
		pols[i] = p
	}
	workers := cfg.Workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	lb, err := in.lowerBound()
	if err != nil {
		return Result{}, err
	}
	res := Result{Shards: cfg.Shards, Hosts: cfg.Hosts, Regions: cfg.Regions, Seed: cfg.Seed, Changed: in.Changed, SteadyChanged: len(in.SteadyIdx), LB: lb}
	clk := clocks{wall: cfg.Now, cpu: cfg.CPU}
	h := newHier(in, cfg.Seed, pols[0], pols[1], workers)
	if _, ok := pols[1].(tiers.IncrementalPolicy); ok {
		// Each region daemon keeps its own state: one policy per region.
		h.rInc = make([]tiers.IncrementalPolicy, cfg.Regions)
		for r := range h.rInc {
			p, err := tiers.New(names[1], cfgs[1])
			if err != nil {
				return Result{}, fmt.Errorf("region_policy: %w", err)
			}
			h.rInc[r] = p.(tiers.IncrementalPolicy)
		}
	}
	if res.Hier, err = h.run(clk, phaseOf(cfg.Phase, sideHier)); err != nil {
		return Result{}, fmt.Errorf("hierarchy: %w", err)
	}
	if in.Steady == nil { // else twoRounds scored the rebalance
		res.Hier.Run.score(in, h.host, lb)
	}
	res.HierHost, res.RegionOf = h.host, h.regionOf
	if !cfg.SkipFlat {
		fp := pols[2]
		if cfg.MatchQuality {
			fc := interfaces.PolicyConfig{}
			for k, v := range cfg.FlatConfig {
				fc[k] = v
			}
			res.FlatTarget = math.Max(1, res.Hier.MaxOverLB)
			fc["target_max_over_lb"] = strconv.FormatFloat(res.FlatTarget, 'g', -1, 64)
			if fp, err = tiers.New(names[2], fc); err != nil {
				return Result{}, fmt.Errorf("flat_policy: %w", err)
			}
		}
		shards := h.gshards
		h = nil // the hierarchy's views are garbage now
		f := newFlat(in, cfg.Seed, fp, shards)
		if res.Flat, err = f.run(ctx, clk, phaseOf(cfg.Phase, sideFlat)); err != nil {
			return Result{}, fmt.Errorf("flat: %w", err)
		}
		if in.Steady == nil {
			res.Flat.score(in, f.host, lb)
		}
		res.FlatHost = f.host
		res.FlatReached = res.FlatTarget > 0 && res.Flat.Unplaced == 0 && res.Flat.MaxOverLB <= res.FlatTarget*(1+1e-9)
		res.Speedup = ratio(res.Flat.Seconds, res.Hier.Seconds)
		res.CriticalPathSpeedup = ratio(res.Flat.Seconds, res.Hier.CriticalPathSeconds)
		res.CPURatio = ratio(res.Flat.CPUSeconds, res.Hier.CPUSeconds)
	}
	return res, nil
}

// lowerBound is balancer.LowerBound of the flat problem with the loads after
// the change.
func (in *Instance) lowerBound() (map[string]float64, error) {
	return in.lowerBoundOf(in.After)
}

// lowerBoundOf is balancer.LowerBound of the flat problem with loads.
func (in *Instance) lowerBoundOf(loads []float64) (map[string]float64, error) {
	q := *in.P
	q.Load = loads
	lb := balancer.LowerBound(&q)
	if lb == nil {
		return nil, fmt.Errorf("instance: invalid problem: %w", q.Validate())
	}
	return lb, nil
}

// MaxOverLB returns, per resource, the busiest host's utilization under host
// (shard → host index, -1 unplaced) with the loads after the change, divided by
// lb; and the number of hosts above capacity.
func (in *Instance) MaxOverLB(host []int32, lb map[string]float64) (map[string]float64, int) {
	return in.maxOverLB(host, lb, in.After)
}

func (in *Instance) maxOverLB(host []int32, lb map[string]float64, after []float64) (map[string]float64, int) {
	p := in.P
	R, M := p.NumResources(), p.NumChildren()
	load := make([]float64, M*R)
	for s, h := range host {
		if h >= 0 {
			for r := 0; r < R; r++ {
				load[int(h)*R+r] += after[s*R+r]
			}
		}
	}
	out := make(map[string]float64, R)
	over := 0
	for c := 0; c < M; c++ {
		hot := false
		for r := 0; r < R; r++ {
			if load[c*R+r] > p.Capacity[c*R+r]*(1+1e-9) {
				hot = true
			}
		}
		if hot {
			over++
		}
	}
	for r, name := range p.Resources {
		mx := 0.0
		for c := 0; c < M; c++ {
			if cp := p.Capacity[c*R+r]; cp > 0 {
				mx = math.Max(mx, load[c*R+r]/cp)
			}
		}
		out[name] = mx / lb[name]
	}
	return out, over
}

func (run *Run) score(in *Instance, host []int32, lb map[string]float64) {
	run.ByResource, run.Overloaded = in.MaxOverLB(host, lb)
	run.MaxOverLB = 0
	for _, v := range run.ByResource {
		run.MaxOverLB = math.Max(run.MaxOverLB, v)
	}
	run.Unplaced = 0
	for _, h := range host {
		if h < 0 {
			run.Unplaced++
		}
	}
}

// statusRank orders plan statuses from best to worst.
func statusRank(s interfaces.Status) int {
	switch s {
	case interfaces.StatusOK:
		return 0
	case interfaces.StatusPartial:
		return 1
	}
	return 2
}

func worse(a, b interfaces.Status) interfaces.Status {
	if statusRank(b) > statusRank(a) {
		return b
	}
	return a
}

// index parses the number at the end of an ID built as prefix+decimal (the IDs
// of balancer.Generate and of the regions here) and checks it against n.
func index(id, prefix string, n int) (int, error) {
	s, ok := strings.CutPrefix(id, prefix)
	if !ok {
		return -1, fmt.Errorf("plan names %q, not a %s ID", id, strings.TrimSuffix(prefix, "-"))
	}
	i, err := strconv.Atoi(s)
	if err != nil || i < 0 || i >= n {
		return -1, fmt.Errorf("plan names %q, which does not exist", id)
	}
	return i, nil
}

// setLoads sets the cpu and mem load of every shard view from loads (N rows of
// R, cpu then mem).
func setLoads(shards []interfaces.Shard, loads []float64, R int) {
	for s := range shards {
		shards[s].Load.CPU = loads[s*R]
		shards[s].Load.Mem = loads[s*R+1]
	}
}

// appendAssignments appends to dst the assignment of every shard s with
// owner[s] ≥ 0: to children[owner[s]] at epoch[s].
func appendAssignments(dst []interfaces.Assignment, shards []interfaces.Shard, owner []int32, children []interfaces.Child, epoch []interfaces.Epoch) []interfaces.Assignment {
	for s, c := range owner {
		if c >= 0 {
			dst = append(dst, interfaces.Assignment{Shard: shards[s].ID, Child: children[c].ID, Epoch: epoch[s]})
		}
	}
	return dst
}

// shardViews builds the contract values of the shards once: ID and load.
func shardViews(in *Instance) []interfaces.Shard {
	p := in.P
	R := p.NumResources()
	out := make([]interfaces.Shard, p.NumShards())
	for s := range out {
		out[s] = interfaces.Shard{ID: p.ShardIDs[s], Job: "bench", Load: interfaces.Load{CPU: p.Load[s*R], Mem: p.Load[s*R+1]}, StateBytes: p.StateBytes[s]}
	}
	return out
}

// hostViews builds the contract values of the hosts once.
func hostViews(in *Instance) []interfaces.Child {
	p := in.P
	R := p.NumResources()
	out := make([]interfaces.Child, p.NumChildren())
	for c := range out {
		out[c] = interfaces.Child{ID: p.ChildIDs[c], Tier: interfaces.TierHost, Capacity: interfaces.Load{CPU: p.Capacity[c*R], Mem: p.Capacity[c*R+1]}}
	}
	return out
}

// ratio is a/b, 0 when b is not positive.
func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

// since returns the seconds from t0 by now (0 without a clock).
func since(now func() time.Time, t0 time.Time) float64 {
	if now == nil {
		return 0
	}
	return now().Sub(t0).Seconds()
}

func stamp(now func() time.Time) time.Time {
	if now == nil {
		return time.Time{}
	}
	return now()
}

// clocks are the two clocks a run is timed with: wall (Config.Now) and cpu
// (Config.CPU); either may be nil.
type clocks struct{ wall, cpu func() time.Time }

// stamps is a reading of both clocks.
type stamps struct{ wall, cpu time.Time }

func (c clocks) stamp() stamps { return stamps{stamp(c.wall), stamp(c.cpu)} }

// since returns the wall and CPU seconds from t0.
func (c clocks) since(t0 stamps) (wall, cpu float64) {
	return since(c.wall, t0.wall), since(c.cpu, t0.cpu)
}

// hier is the hierarchy's state: every shard's region and host, and the views.
type hier struct {
	in             *Instance
	seed           int64
	global, region interfaces.Policy
	workers        int
	regionOf       []int32 // shard → region (-1 none)
	host           []int32 // shard → host (-1 none)
	regionEpoch    []interfaces.Epoch
	hostEpoch      []interfaces.Epoch
	regions        []interfaces.Child
	hosts          []interfaces.Child
	hostRegion     []int32
	gshards        []interfaces.Shard   // by shard index: the global view
	rviews         [][]interfaces.Shard // region r's view of its shards, kept from round to round
	idx            []int32              // shard indices grouped by region (group)
	off            []int                // region r's shards are idx[off[r]:off[r+1]]
	asg            []interfaces.Assignment
	globalCPU      float64
	rounds         []HierRound // one per round so far
	clk            clocks
	// The incremental path (tiers.IncrementalPolicy): gInc is the global
	// tier's policy when it is one; rInc, one per region, the regions'
	// (each region daemon keeps its own state). arrive and leave are, per
	// region, the shards the last global round moved in and out.
	gInc          tiers.IncrementalPolicy
	rInc          []tiers.IncrementalPolicy
	arrive, leave [][]int32
	roundNo       int
}

func newHier(in *Instance, seed uint64, global, region interfaces.Policy, workers int) *hier {
	p := in.P
	N, M := p.NumShards(), p.NumChildren()
	Rg := len(in.HostOff) - 1
	h := &hier{in: in, seed: int64(seed), global: global, region: region, workers: workers,
		regionOf: make([]int32, N), host: make([]int32, N),
		regionEpoch: make([]interfaces.Epoch, N), hostEpoch: make([]interfaces.Epoch, N),
		hosts: hostViews(in), hostRegion: make([]int32, M), gshards: shardViews(in), rviews: make([][]interfaces.Shard, Rg),
		idx: make([]int32, N), off: make([]int, Rg+1), asg: make([]interfaces.Assignment, N)}
	h.regions = make([]interfaces.Child, Rg)
	for r := 0; r < Rg; r++ {
		var capa interfaces.Load
		for c := in.HostOff[r]; c < in.HostOff[r+1]; c++ {
			h.hostRegion[c] = int32(r)
			capa.CPU += h.hosts[c].Capacity.CPU
			capa.Mem += h.hosts[c].Capacity.Mem
		}
		h.regions[r] = interfaces.Child{ID: interfaces.ChildID(regionID(r)), Tier: interfaces.TierRegion, Capacity: capa}
	}
	for s := range h.idx {
		h.idx[s] = int32(s)
		h.regionOf[s] = -1
		h.host[s] = -1
	}
	if g, ok := global.(tiers.IncrementalPolicy); ok {
		h.gInc = g
	}
	h.arrive, h.leave = make([][]int32, Rg), make([][]int32, Rg)
	return h
}

func regionID(r int) string { return "region-" + strconv.Itoa(r) }

// The rounds Config.Phase is told of, in order.
const (
	PhaseHierPlace     = sideHier + " " + roundPlace
	PhaseHierRebalance = sideHier + " " + roundRebalance
	PhaseFlatPlace     = sideFlat + " " + roundPlace
	PhaseFlatRebalance = sideFlat + " " + roundRebalance
	PhaseHierSteady    = sideHier + " " + roundSteady
	PhaseFlatSteady    = sideFlat + " " + roundSteady
)

const (
	sideHier, sideFlat                      = "hierarchy", "flat"
	roundPlace, roundRebalance, roundSteady = "place", "rebalance", "steady"
)

// phaseOf tells report (when set) each round of side as "side round".
func phaseOf(report func(string), side string) func(string) {
	return func(round string) {
		if report != nil {
			report(side + " " + round)
		}
	}
}

func (h *hier) run(clk clocks, phase func(string)) (HierRun, error) {
	h.clk = clk
	out := HierRun{Workers: h.workers}
	calls := 0
	var beforeRegion, afterRegion []int32 // each shard's region after the place and the rebalance round
	round := func() (interfaces.Status, error) {
		switch calls++; calls {
		case 2:
			beforeRegion = append([]int32(nil), h.regionOf...)
		case 3:
			afterRegion = append([]int32(nil), h.regionOf...)
		}
		h.roundNo = calls
		return h.round()
	}
	run, err := twoRounds(clk, phase, h.in, h.host, h.gshards, round)
	out.Run = run
	if err != nil {
		return out, err
	}
	if afterRegion == nil {
		afterRegion = h.regionOf
	}
	for s, r := range afterRegion {
		if r != beforeRegion[s] {
			out.RegionMoves++
		}
	}
	names := []string{roundPlace, roundRebalance, roundSteady}
	for i := range h.rounds {
		rd := &h.rounds[i]
		rd.Name = names[i]
		rd.CriticalPath = rd.Global + rd.SlowestRegion
		if i >= 2 {
			continue // the steady round is reported apart
		}
		out.GlobalSeconds += rd.Global
		out.RegionSeconds += rd.Regions
		out.SlowestRegionSeconds += rd.SlowestRegion
	}
	out.CriticalPathSeconds = out.GlobalSeconds + out.SlowestRegionSeconds
	out.GlobalCPUSeconds = h.globalCPU
	out.Rounds = h.rounds
	return out, nil
}

// twoRounds is one side's run: round places every shard, the load change (the
// instance's After loads, which the daemons would learn from the hosts'
// reports) is applied to shards, and round rebalances; host is where each
// shard is after a round. phase is told each round as it starts.
func twoRounds(clk clocks, phase func(string), in *Instance, host []int32, shards []interfaces.Shard, round func() (interfaces.Status, error)) (Run, error) {
	var out Run
	phase(roundPlace)
	t0 := clk.stamp()
	status, err := round()
	if err != nil {
		return out, fmt.Errorf("place: %w", err)
	}
	out.PlaceSeconds, out.PlaceCPUSeconds = clk.since(t0)
	for _, c := range host {
		if c >= 0 {
			out.Placed++
		}
	}
	before := append([]int32(nil), host...)
	phase(roundRebalance)
	t1 := clk.stamp()
	setLoads(shards, in.After, in.P.NumResources())
	st, err := round()
	if err != nil {
		return out, fmt.Errorf("rebalance: %w", err)
	}
	status = worse(status, st)
	out.RebalanceSeconds, out.RebalanceCPUSeconds = clk.since(t1)
	out.Seconds = out.PlaceSeconds + out.RebalanceSeconds
	out.CPUSeconds = out.PlaceCPUSeconds + out.RebalanceCPUSeconds
	for s, c := range host {
		if c != before[s] {
			out.Moves++
		}
	}
	if in.Steady != nil {
		// The main figures are those after the rebalance: score them now.
		lb, err := in.lowerBound()
		if err != nil {
			return out, err
		}
		out.score(in, host, lb)
		before = append(before[:0], host...)
		phase(roundSteady)
		t2 := clk.stamp()
		setLoads(shards, in.Steady, in.P.NumResources())
		st, err := round()
		if err != nil {
			return out, fmt.Errorf("steady: %w", err)
		}
		status = worse(status, st)
		out.SteadySeconds, out.SteadyCPUSeconds = clk.since(t2)
		for s, c := range host {
			if c != before[s] {
				out.SteadyMoves++
			}
		}
		slb, err := in.lowerBoundOf(in.Steady)
		if err != nil {
			return out, err
		}
		by, _ := in.maxOverLB(host, slb, in.Steady)
		for _, v := range by {
			out.SteadyMaxOverLB = math.Max(out.SteadyMaxOverLB, v)
		}
	}
	out.Status = status.String()
	return out, nil
}

// round runs the global tier, applies its plan, groups the shards by region and
// runs every region tier.
func (h *hier) round() (interfaces.Status, error) {
	var rd HierRound
	t0 := h.clk.stamp()
	globalRound := h.globalRound
	if h.gInc != nil {
		globalRound = h.globalIncRound
	}
	st, err := globalRound()
	if err != nil {
		return st, err
	}
	var cpu float64
	rd.Global, cpu = h.clk.since(t0)
	h.globalCPU += cpu
	if h.rInc == nil {
		h.group()
	}
	t1 := stamp(h.clk.wall)
	st2, slowest, err := h.regionRound()
	rd.Regions, rd.SlowestRegion = since(h.clk.wall, t1), slowest
	h.rounds = append(h.rounds, rd)
	return worse(st, st2), err
}

func (h *hier) globalRound() (interfaces.Status, error) {
	v := &interfaces.View{Tier: interfaces.TierGlobal, Instance: "global", Seed: h.seed,
		Children: h.regions, Shards: h.gshards, Assignments: appendAssignments(h.asg[:0], h.gshards, h.regionOf, h.regions, h.regionEpoch)}
	return planAndApply(context.Background(), h.global, v, len(h.regionOf), "region-", len(h.regions), func(s, r int) error {
		h.regionOf[s] = int32(r)
		h.regionEpoch[s]++
		// The old region revokes the shard from its host.
		if c := h.host[s]; c >= 0 && h.hostRegion[c] != int32(r) {
			h.host[s] = -1
		}
		return nil
	})
}

// planAndApply runs policy on v and hands every move of its plan to apply as
// indices: the shard's (IDs "shard-<i>", i < N) and its destination's (IDs
// childPrefix+"<j>", j < M).
func planAndApply(ctx context.Context, policy interfaces.Policy, v *interfaces.View, N int, childPrefix string, M int, apply func(s, c int) error) (interfaces.Status, error) {
	plan, err := policy.Plan(ctx, v)
	if err != nil {
		return interfaces.StatusOK, err
	}
	return plan.Status, applyPlan(plan, N, childPrefix, M, apply)
}

// applyPlan hands every move of plan to apply as indices (see planAndApply).
func applyPlan(plan interfaces.Plan, N int, childPrefix string, M int, apply func(s, c int) error) error {
	for _, m := range plan.Moves {
		s, err := index(string(m.Shard), "shard-", N)
		if err != nil {
			return err
		}
		c, err := index(string(m.To), childPrefix, M)
		if err != nil {
			return err
		}
		if err := apply(s, c); err != nil {
			return fmt.Errorf("plan moves %s to %s: %w", m.Shard, m.To, err)
		}
	}
	return nil
}

// group orders the shards by region (counting sort, by shard index within a
// region; unplaced shards last) into idx and sets off; each region's plan
// brings its own view of its shards up to date (regionPlan), on the workers.
func (h *hier) group() {
	Rg := len(h.regions)
	next := make([]int, Rg+2)
	for _, r := range h.regionOf {
		next[r+2]++
	}
	for i := 1; i < len(next); i++ {
		next[i] += next[i-1]
	}
	// next[r+1] is the first position of region r (r = -1 .. Rg-1) with the
	// unplaced first; shift so that the unplaced come last.
	unplaced := next[1]
	for r := 0; r <= Rg; r++ {
		h.off[r] = next[r+1] - unplaced
	}
	pos := append([]int(nil), h.off...)
	for s, r := range h.regionOf {
		var p int
		if r < 0 {
			p = pos[Rg]
			pos[Rg]++
		} else {
			p = pos[r]
			pos[r]++
		}
		h.idx[p] = int32(s)
	}
}

// regionRound plans every region on a pool of workers; slowest is the wall
// seconds of the slowest region's plan.
func (h *hier) regionRound() (status interfaces.Status, slowest float64, err error) {
	Rg := len(h.regions)
	jobs := make(chan int)
	type out struct {
		st      interfaces.Status
		err     error
		seconds float64
	}
	outs := make([]out, Rg)
	var wg sync.WaitGroup
	for w := 0; w < h.workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range jobs {
				t0 := stamp(h.clk.wall)
				plan := h.regionPlan
				if h.rInc != nil {
					plan = h.regionIncPlan
				}
				st, err := plan(r)
				outs[r] = out{st, err, since(h.clk.wall, t0)}
			}
		}()
	}
	for r := 0; r < Rg; r++ {
		jobs <- r
	}
	close(jobs)
	wg.Wait()
	status = interfaces.StatusOK
	for r, o := range outs {
		if o.err != nil {
			return status, 0, fmt.Errorf("region %s: %w", h.regions[r].ID, o.err)
		}
		status = worse(status, o.st)
		slowest = math.Max(slowest, o.seconds)
	}
	return status, slowest, nil
}

// regionView brings region r's view of its shards (members, in shard index
// order) up to date and returns it, as a region daemon keeps its shards from
// round to round: a shard is copied from the global view when the region did
// not hold it at that place last round or its load changed (the only field of
// a shard this benchmark changes).
func (h *hier) regionView(r int, members []int32) []interfaces.Shard {
	old := h.rviews[r]
	view := old
	if cap(view) < len(members) {
		view = make([]interfaces.Shard, len(members))
		copy(view, old)
	}
	view = view[:len(members)]
	for i, s := range members {
		g := &h.gshards[s]
		if i < len(old) && view[i].ID == g.ID && sameLoad(&view[i].Load, &g.Load) {
			continue
		}
		view[i] = *g
	}
	h.rviews[r] = view
	return view
}

// sameLoad reports whether a and b are the same load.
func sameLoad(a, b *interfaces.Load) bool {
	return a.CPU == b.CPU && a.Mem == b.Mem && a.Net == b.Net && a.Tasks == b.Tasks && len(a.Extra) == 0 && len(b.Extra) == 0
}

// regionPlan plans region r's shards onto its hosts and applies the plan. It
// touches only region r's shards, so regions run concurrently.
func (h *hier) regionPlan(r int) (interfaces.Status, error) {
	lo, hi := h.off[r], h.off[r+1]
	hlo, hhi := h.in.HostOff[r], h.in.HostOff[r+1]
	asg := h.asg[lo:lo]
	view := h.regionView(r, h.idx[lo:hi])
	for i, s := range h.idx[lo:hi] {
		if c := h.host[s]; c >= 0 {
			asg = append(asg, interfaces.Assignment{Shard: view[i].ID, Child: h.hosts[c].ID, Epoch: h.hostEpoch[s]})
		}
	}
	v := &interfaces.View{Tier: interfaces.TierRegion, Instance: string(h.regions[r].ID), Seed: h.seed,
		Children: h.hosts[hlo:hhi], Shards: view, Assignments: asg}
	return planAndApply(context.Background(), h.region, v, len(h.host), "host-", len(h.hosts), func(s, c int) error {
		if c < hlo || c >= hhi || h.regionOf[s] != int32(r) {
			return errors.New("outside the region")
		}
		h.host[s] = int32(c)
		h.hostEpoch[s]++
		return nil
	})
}

// changedThisRound lists the shards whose load changed before the current
// round (none before the place round).
func (h *hier) changedThisRound() []int32 {
	switch h.roundNo {
	case 2:
		return h.in.ChangedIdx
	case 3:
		return h.in.SteadyIdx
	}
	return nil
}

// regionShapes are the capacity shapes the regions report: from each
// region's kept loads when its policy reports shapes, else from its hosts'
// capacities alone.
func (h *hier) regionShapes() map[interfaces.ChildID]tiers.CapacityShape {
	out := make(map[interfaces.ChildID]tiers.CapacityShape, len(h.regions))
	for r, rc := range h.regions {
		if h.rInc != nil && h.roundNo > 1 {
			if sr, ok := h.rInc[r].(tiers.ShapeReporter); ok {
				out[rc.ID] = sr.Shape()
				continue
			}
		}
		out[rc.ID] = tiers.ShapeOf(h.hosts[h.in.HostOff[r]:h.in.HostOff[r+1]], nil)
	}
	return out
}

// globalIncRound feeds the global tier's incremental policy what changed
// (every shard before the place round; then the shards whose load changed
// and the regions' shapes) and applies its round's plan. Only the moved
// shards are looked at after the plan.
func (h *hier) globalIncRound() (interfaces.Status, error) {
	ch := tiers.Changes{Children: h.regions, Shapes: h.regionShapes()}
	if h.roundNo == 1 {
		ch.Added = h.gshards
	}
	for _, s := range h.changedThisRound() {
		ch.Loads = append(ch.Loads, tiers.ShardLoad{Shard: h.gshards[s].ID, Load: h.gshards[s].Load})
	}
	if err := h.gInc.Observe(ch); err != nil {
		return interfaces.StatusOK, err
	}
	plan, err := h.gInc.Round(context.Background(), h.seed)
	if err != nil {
		return interfaces.StatusOK, err
	}
	for r := range h.arrive {
		h.arrive[r], h.leave[r] = h.arrive[r][:0], h.leave[r][:0]
	}
	err = applyPlan(plan, len(h.regionOf), "region-", len(h.regions), func(s, r int) error {
		if old := h.regionOf[s]; old >= 0 {
			h.leave[old] = append(h.leave[old], int32(s))
		}
		h.arrive[r] = append(h.arrive[r], int32(s))
		h.regionOf[s] = int32(r)
		h.regionEpoch[s]++
		if c := h.host[s]; c >= 0 && h.hostRegion[c] != int32(r) {
			h.host[s] = -1
		}
		return nil
	})
	return plan.Status, err
}

// regionIncPlan feeds region r's incremental policy what changed at it (the
// shards that arrived and left, its members whose load changed) and applies
// its round's plan.
func (h *hier) regionIncPlan(r int) (interfaces.Status, error) {
	pol := h.rInc[r]
	hlo, hhi := h.in.HostOff[r], h.in.HostOff[r+1]
	var ch tiers.Changes
	if h.roundNo == 1 {
		ch.Children = h.hosts[hlo:hhi]
	}
	arrived := make(map[int32]bool, len(h.arrive[r]))
	for _, s := range h.arrive[r] {
		arrived[s] = true
		ch.Added = append(ch.Added, h.gshards[s])
	}
	for _, s := range h.leave[r] {
		ch.Removed = append(ch.Removed, h.gshards[s].ID)
	}
	for _, s := range h.changedThisRound() {
		if h.regionOf[s] == int32(r) && !arrived[s] {
			ch.Loads = append(ch.Loads, tiers.ShardLoad{Shard: h.gshards[s].ID, Load: h.gshards[s].Load})
		}
	}
	if err := pol.Observe(ch); err != nil {
		return interfaces.StatusOK, err
	}
	plan, err := pol.Round(context.Background(), h.seed)
	if err != nil {
		return interfaces.StatusOK, err
	}
	err = applyPlan(plan, len(h.host), "host-", len(h.hosts), func(s, c int) error {
		if c < hlo || c >= hhi || h.regionOf[s] != int32(r) {
			return errors.New("outside the region")
		}
		h.host[s] = int32(c)
		h.hostEpoch[s]++
		return nil
	})
	return plan.Status, err
}
