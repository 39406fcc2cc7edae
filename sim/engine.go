package sim

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/tiers/control"
)

// Options are the knobs of a run that do not belong to the scenario.
type Options struct {
	// Seed overrides the scenario's seed when non-zero.
	Seed uint64
	// Policies, when non-empty, limits the run to these policy names.
	Policies []string
	// WallClock, when set, measures the policies' solve time (reported as
	// solve_seconds). Nil leaves solve_seconds at 0 so that output is
	// byte-identical for the same scenario and seed.
	WallClock func() time.Time
	// Progress, when set, is called now and then with the virtual time done and
	// the total, summed over all policies of the run.
	Progress func(done, total time.Duration)
}

// Result is the outcome of running a scenario: one entry per policy.
type Result struct {
	Scenario string
	Seed     uint64
	// Shards and Hosts count the simulated shards (generated and replayed) and
	// hosts at the start.
	Shards, Hosts int
	// Racks counts the racks (topology.racks_per_region × regions; 0 without).
	Racks    int
	Policies []PolicyResult
}

// Failed lists every failed assertion of every policy.
func (r *Result) Failed() []AssertionResult {
	var out []AssertionResult
	for _, p := range r.Policies {
		for _, a := range p.Assertions {
			if !a.Passed {
				out = append(out, a)
			}
		}
	}
	return out
}

// PolicyResult is one policy's run: its summary, time series and assertions.
type PolicyResult struct {
	Summary    Summary
	Series     []Sample
	Assertions []AssertionResult
}

// Summary is one policy's figures over a run. Per-resource maps hold only the
// resources the topology has capacity for.
type Summary struct {
	Policy      string `json:"policy"`
	Solver      string `json:"solver"`
	Integration string `json:"integration"`
	Seed        uint64 `json:"seed"`
	// UtilP50, UtilP99, UtilMax: host utilization over all (host, tick) samples.
	UtilP50 map[string]float64 `json:"util_p50"`
	UtilP99 map[string]float64 `json:"util_p99"`
	UtilMax map[string]float64 `json:"util_max"`
	// MaxOverLB, MaxOverMean: busiest host's utilization over the lower bound,
	// and over the mean, averaged over the run's ticks.
	MaxOverLB   map[string]float64 `json:"max_over_lb"`
	MaxOverMean map[string]float64 `json:"max_over_mean"`
	// LatencyP50MS, LatencyP99MS: modeled processing latency over all records.
	LatencyP50MS float64 `json:"latency_p50_ms"`
	LatencyP99MS float64 `json:"latency_p99_ms"`
	// Lag is the peak total backlog, in records; LagFinal the backlog at the end.
	Lag      float64 `json:"lag"`
	LagFinal float64 `json:"lag_final"`
	// Moves counts relocations (not first placements) and BytesMoved their state.
	Moves      int   `json:"moves"`
	BytesMoved int64 `json:"bytes_moved"`
	Placements int   `json:"placements"`
	Rejected   int   `json:"rejected"`
	Rounds     int   `json:"rounds"`
	// SolveSeconds is the wall time spent in policies (0 unless measured).
	SolveSeconds float64 `json:"solve_seconds"`
	Unowned      int     `json:"unowned_final"`
	ShardTicks   int64   `json:"shard_ticks"`
	// Chain is the tier chain, e.g. "global>region>rack>host".
	Chain string `json:"chain"`
	// RackLossImpact, with racks in the topology, is what losing one rack would
	// take from a job at the end of the run: the largest fraction of one job's
	// running shards on a single rack (0 without racks).
	RackLossImpact float64 `json:"rack_loss_impact,omitempty"`
	// SolveFailures counts policy calls that returned an error (the round then
	// applies nothing and keeps the last good assignment).
	SolveFailures int `json:"solve_failures"`
	// Alerts are the alerts the tier instances' controllers raised, in the order
	// they first appeared (at most maxAlerts; AlertsDropped counts the rest).
	Alerts        []Alert `json:"alerts"`
	AlertsDropped int     `json:"alerts_dropped,omitempty"`
}

// Alert is one alert of a tier instance's controller (tiers/control: codes
// mass_failure, no_capacity, solve_failed, straggler), from the first round
// that raised it to the first round without it.
type Alert struct {
	// At is when it was first raised and Until when it was first no longer
	// raised (0: still in force at the end), in seconds since the start.
	At       float64 `json:"at"`
	Until    float64 `json:"until,omitempty"`
	Instance string  `json:"instance"`
	Code     string  `json:"code"`
	// Message is the alert's text in the round that raised it.
	Message string `json:"message"`
}

// maxAlerts bounds the alerts kept per policy run.
const maxAlerts = 200

// Sample is one row of the time series.
type Sample struct {
	T float64 `json:"t"` // seconds since the start
	// Per resource (in BuiltinResources order): utilization across live hosts.
	UtilMin  [nres]float64 `json:"util_min"`
	UtilP50  [nres]float64 `json:"util_p50"`
	UtilP99  [nres]float64 `json:"util_p99"`
	UtilMax  [nres]float64 `json:"util_max"`
	UtilMean [nres]float64 `json:"util_mean"`
	LB       [nres]float64 `json:"lb"`
	// LatencyP50MS and LatencyP99MS over the interval since the previous sample.
	LatencyP50MS float64 `json:"latency_p50_ms"`
	LatencyP99MS float64 `json:"latency_p99_ms"`
	Backlog      float64 `json:"backlog"`
	Moves        int     `json:"moves"`
	BytesMoved   int64   `json:"bytes_moved"`
	Unowned      int     `json:"unowned"`
	FailedHosts  int     `json:"failed_hosts"`
	// RackLossImpact is Summary.RackLossImpact at this sample.
	RackLossImpact float64 `json:"rack_loss_impact,omitempty"`
}

// AssertionResult says whether one assertion held for one policy, and if not,
// when and by how much it failed.
type AssertionResult struct {
	Policy  string  `json:"policy"`
	Index   int     `json:"index"`
	Line    int     `json:"line"`
	Kind    string  `json:"kind"`
	Passed  bool    `json:"passed"`
	At      float64 `json:"at,omitempty"` // seconds since the start of the first failure
	Value   float64 `json:"value"`        // the worst observed value
	Limit   float64 `json:"limit"`
	Message string  `json:"message"`
}

// Run runs every policy of the scenario (or those in o.Policies), one after
// another, each from the same initial state and seed.
func Run(ctx context.Context, sc *Scenario, o Options) (*Result, error) {
	seed := sc.Seed
	if o.Seed != 0 {
		seed = o.Seed
	}
	var pols []PolicySpec
	for _, p := range sc.Policies {
		if len(o.Policies) == 0 || slices.Contains(o.Policies, p.Name) {
			pols = append(pols, p)
		}
	}
	if len(pols) == 0 {
		var names []string
		for _, p := range sc.Policies {
			names = append(names, p.Name)
		}
		return nil, fmt.Errorf("no policy named %v in the scenario (has %v): %w", o.Policies, names, interfaces.ErrNotFound)
	}
	var replay *replaySeries
	if r := sc.Workload.Replay; r != nil {
		var err error
		if replay, err = readReplay(resolve(sc.dir, r.File), r.Scale); err != nil {
			return nil, err
		}
	}
	var arr *arrivalSeries
	if a := sc.Workload.Arrivals; a != nil {
		var err error
		if arr, err = readArrivals(resolve(sc.dir, a.File), a); err != nil {
			return nil, err
		}
	}
	res := &Result{Scenario: sc.Name, Seed: seed}
	total := time.Duration(len(pols)) * sc.Duration.D()
	for k, p := range pols {
		e, err := newEngine(sc, p, seed, replay, arr)
		if err != nil {
			return nil, err
		}
		e.wall = o.WallClock
		res.Shards, res.Hosts, res.Racks = len(e.w.shardID), len(e.w.hostName), len(e.w.rackName)
		if o.Progress != nil {
			base := time.Duration(k) * sc.Duration.D()
			e.progress = func(done time.Duration) { o.Progress(base+done, total) }
		}
		pr, err := e.run(ctx)
		if err != nil {
			return nil, err
		}
		res.Policies = append(res.Policies, pr)
	}
	return res, nil
}

// Move kinds of a shard.
const (
	moveNone   = 0
	moveHost   = 1 // between hosts of one region
	moveRegion = 2 // between regions
	moveRack   = 3 // between racks of one region
)

// engine runs one policy over a scenario.
type engine struct {
	sc     *Scenario
	spec   PolicySpec
	seed   uint64
	w      *world
	replay *replaySeries
	arr    *arrivalSeries
	gpol   interfaces.Policy
	rpol   interfaces.Policy
	rack   interfaces.Policy // nil unless the chain has the rack tier
	cfg    control.Config    // every tier instance's controller configuration

	// viewErr is the first error met while building a view (coop.ChildHints,
	// coop.Derive): the round that built the view returns it, ending the run.
	viewErr error

	// Tier instances: the global one, one per region and one per rack (rack
	// chain), each with its own controller.
	global  *tierInstance
	regions []*tierInstance
	racks   []*tierInstance

	// What the tier instances know of failures. A failed host is silent to its
	// instance from failAt + detect_after until the instance declares it
	// failed (hostDeclared); a lost region likewise to the global tier.
	failAt         []time.Duration // per host
	hostDeclared   []bool
	regionLost     []bool
	regionLostAt   []time.Duration
	regionDeclared []bool

	// departures, with no_bounce assertions: per shard, the children it
	// recently left.
	departures [][]departure
	bounceWin  time.Duration
	sched      scheduler
	wall       func() time.Time
	progress   func(time.Duration)
	hotSets    [][]int
	hotF       []float64
	replayAt   int // next replay row
	replay0    int // world index of the first replayed shard

	// Per-shard state.
	host     []int32
	region_  []int32
	rack_    []int32 // rack the region tier gave the shard (rack chain), -1 none
	epochK   []interfaces.Epoch
	kcons    []interfaces.ShardConstraints // as a region over racks sees them
	moveKind []uint8
	moveTo   []int32
	moveTag  []uint32
	epochR   []interfaces.Epoch
	epochH   []interfaces.Epoch
	backlog  []float64
	cur      []float64 // nres per shard
	curRate  []float64
	// procRate is each shard's processed records/s in the last tick; kept only
	// when the policy runs control policies (shardRates), which read it from
	// the hosts' reports.
	procRate   []float64
	shardRates bool
	// coopSt is the collaborative mode's state (integration.go).
	coopSt *coopState

	// Per-host state, per tick.
	hostLoad []float64 // nres per host
	hostRho  []float64
	hostLat  []float64
	hostW    []float64
	// hostSpeed is each host's processing speed (host_slow events; 1 = full):
	// its shards process as if its utilization were ρ/speed, while it reports ρ.
	hostSpeed []float64
	hostLive  []bool  // not failed
	proc      []int32 // host a shard processes on this tick, -1 none
	maxShard  [nres]float64
	nActive   int // active shards at the last load pass

	jf      []float64 // rate factor per job
	pending map[[2]int64]bool
	dirty   bool
	now     time.Duration
	rounds  int

	// Accumulators.
	util     [nres]*utilDist
	latHist  logHist
	ivLat    logHist // since the last sample
	sloHist  []*logHist
	sumMOM   [nres]float64
	sumMOLB  [nres]float64
	nTicks   int
	lagPeak  float64
	lagNow   float64
	sum      Summary
	ivMoves  int
	ivBytes  int64
	series   []Sample
	asserts  []AssertionResult
	track    []assertTrack // per assertion, what converge, no_bounce and guard follow
	scratch  []float64
	lastMaxU [nres]float64
	lastMean [nres]float64
	lastLB   [nres]float64
	hasCap   [nres]bool
	solveNS  int64
	idx      map[interfaces.ShardID]int32

	// rack_loss_impact: per (job, rack) running shards and per job, reused.
	impactCnt  []int32
	impactJob  []int32
	impactLast float64
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func newEngine(sc *Scenario, spec PolicySpec, seed uint64, replay *replaySeries, arr *arrivalSeries) (*engine, error) {
	gp, err := newPolicy(spec.TierPolicy(interfaces.TierGlobal), spec.Params)
	if err != nil {
		return nil, fmt.Errorf("policies %s: global tier: %w", spec.Name, err)
	}
	rp, err := newPolicy(spec.TierPolicy(interfaces.TierRegion), spec.Params)
	if err != nil {
		return nil, fmt.Errorf("policies %s: region tier: %w", spec.Name, err)
	}
	var kp interfaces.Policy
	if spec.HasRack() {
		if kp, err = newPolicy(spec.TierPolicy(TierRack), spec.Params); err != nil {
			return nil, fmt.Errorf("policies %s: rack tier: %w", spec.Name, err)
		}
	}
	rng := rand.New(rand.NewPCG(seed, splitmix(seed)))
	w := &world{}
	buildTopology(w, sc.Topology, rng)
	if n := sc.Topology.RacksPerRegion; n > 0 {
		w.buildRacks(n)
	}
	if sc.live != nil {
		sc.live.buildShards(w) // the live cluster's shards (live.go)
	} else if err := buildWorkload(w, sc, rng, replay); err != nil {
		return nil, err
	}
	if err := sc.checkConstraintShards(spec, w); err != nil {
		return nil, err
	}
	e := &engine{sc: sc, spec: spec, seed: seed, w: w, replay: replay, gpol: gp, rpol: rp, rack: kp, pending: map[[2]int64]bool{}, cfg: sc.ControlConfig(spec)}
	if err := e.newInstances(); err != nil {
		return nil, fmt.Errorf("policies %s: %w", spec.Name, err)
	}
	if arr != nil {
		a := *arr
		if j := sc.Workload.Arrivals.Job; j != "" {
			for k, n := range w.jobName {
				if n == j {
					a.job = int32(k)
				}
			}
		}
		e.arr = &a
	}
	if replay != nil {
		e.replay0 = len(w.shardID) - len(replay.shards)
	}
	n := len(w.shardID)
	e.host = make([]int32, n)
	e.region_ = make([]int32, n)
	e.rack_ = make([]int32, n)
	e.epochK = make([]interfaces.Epoch, n)
	e.moveKind = make([]uint8, n)
	e.moveTo = make([]int32, n)
	e.moveTag = make([]uint32, n)
	e.epochR = make([]interfaces.Epoch, n)
	e.epochH = make([]interfaces.Epoch, n)
	e.backlog = make([]float64, n)
	e.cur = make([]float64, n*nres)
	e.curRate = make([]float64, n)
	e.proc = make([]int32, n)
	if e.shardRates = len(spec.ControlPolicies) > 0; e.shardRates {
		e.procRate = make([]float64, n)
	}
	for i := range e.host {
		e.host[i], e.region_[i], e.rack_[i] = -1, -1, -1
	}
	if sc.live != nil {
		sc.live.place(e) // start from the live cluster's assignment (live.go)
	}
	if kp != nil {
		// A region over racks sees a pinned shard as allowed on its host's rack.
		e.kcons = make([]interfaces.ShardConstraints, n)
		for i, c := range w.rcons {
			if c.Pinned != "" {
				if h := w.hostIndex(string(c.Pinned)); h >= 0 {
					e.kcons[i].Allowed = []interfaces.ChildID{interfaces.ChildID(w.rackName[w.hostRack[h]])}
				}
			}
		}
	}
	if len(w.rackName) > 0 {
		e.impactCnt = make([]int32, len(w.jobName)*len(w.rackName))
		e.impactJob = make([]int32, len(w.jobName))
	}
	e.jf = make([]float64, len(w.jobName))
	e.resizeHosts()
	for r := range e.util {
		e.util[r] = newUtilDist()
	}
	for i, a := range sc.Assertions {
		if len(a.Policies) > 0 && !slices.Contains(a.Policies, spec.Name) {
			continue
		}
		limit := a.Max
		if a.Kind == AssertSLO {
			limit = a.LatencyP99MS
		}
		switch a.Kind {
		case AssertConverge:
			limit = float64(a.Rounds)
		case AssertNoBounce:
			limit = 0
			e.bounceWin = max(e.bounceWin, e.bounceWindow(&a))
		}
		e.asserts = append(e.asserts, AssertionResult{Policy: spec.Name, Index: i, Line: a.line, Kind: a.Kind, Passed: true, Limit: limit})
		e.sloHist = append(e.sloHist, &logHist{})
		e.track = append(e.track, assertTrack{})
	}
	if e.bounceWin > 0 {
		e.departures = make([][]departure, n)
	}
	// Hot shards are drawn after the workload, from the same seeded stream.
	for _, h := range sc.Workload.Hot {
		set, err := pickHot(w, h, rng)
		if err != nil {
			return nil, err
		}
		e.hotSets = append(e.hotSets, set)
		e.hotF = append(e.hotF, h.Factor)
	}
	// Steps on a fraction of the shards are hot sets that never end, drawn
	// after the hot shards.
	for _, s := range sc.Workload.Steps {
		if s.Partial() {
			e.hotSets = append(e.hotSets, pickFraction(w, s, rng))
			e.hotF = append(e.hotF, s.Factor)
		}
	}
	e.sum = Summary{Policy: spec.Name, Solver: spec.Solver, Integration: spec.Integration, Seed: seed, Chain: strings.Join(spec.Chain, ">")}
	return e, nil
}

func (e *engine) resizeHosts() {
	h := len(e.w.hostName)
	grow := func(s []float64, n int) []float64 {
		for len(s) < n {
			s = append(s, 0)
		}
		return s
	}
	e.hostLoad = grow(e.hostLoad, h*nres)
	e.hostRho = grow(e.hostRho, h)
	e.hostLat = grow(e.hostLat, h)
	e.hostW = grow(e.hostW, h)
	for len(e.hostSpeed) < h {
		e.hostSpeed = append(e.hostSpeed, 1)
	}
	for len(e.hostLive) < h {
		e.hostLive = append(e.hostLive, true)
	}
	for len(e.hostDeclared) < h {
		e.hostDeclared = append(e.hostDeclared, false)
		e.failAt = append(e.failAt, 0)
	}
	if cap(e.scratch) < h {
		e.scratch = make([]float64, 0, h)
	}
}

// schedule the initial events: job arrivals and departures, topology events, hot
// shards, and the periodic control rounds (global first, then regions, so that a
// region round at the same time sees the global round's placements).
func (e *engine) start() {
	sc, w := e.sc, e.w
	for j := range w.jobName {
		e.sched.schedule(w.jobArrive[j], evJobArrive, int32(j), 0)
		if w.jobLeave[j] > 0 {
			e.sched.schedule(w.jobLeave[j], evJobLeave, int32(j), 0)
		}
	}
	for i, ev := range sc.Events {
		var kind evKind
		var a int32
		switch ev.Kind {
		case EventHostFail:
			kind, a = evHostFail, w.hostIndex(ev.Host)
		case EventHostRecover:
			kind, a = evHostRecover, w.hostIndex(ev.Host)
		case EventDrain:
			kind, a = evDrain, w.hostIndex(ev.Host)
		case EventRegionLoss:
			kind, a = evRegionLoss, w.region(ev.Region)
		case EventRegionBack:
			kind, a = evRegionBack, w.region(ev.Region)
		case EventAddHosts:
			kind, a = evAddHosts, int32(i)
		case EventAckMassFailure:
			kind, a = evAck, int32(i)
		case EventHostSlow:
			kind, a = evHostSlow, int32(i)
		}
		e.sched.schedule(ev.At.D(), kind, a, 0)
	}
	for i, h := range sc.Workload.Hot {
		e.sched.schedule(h.At.D(), evHotOn, int32(i), 0)
		if h.For > 0 {
			e.sched.schedule(h.At.D()+h.For.D(), evHotOff, int32(i), 0)
		}
	}
	k := len(sc.Workload.Hot)
	for _, s := range sc.Workload.Steps {
		if s.Partial() {
			e.sched.schedule(s.At.D(), evHotOn, int32(k), 0)
			k++
		}
	}
	e.sched.schedule(0, evGlobalRound, 0, 0)
	for r := range w.regionName {
		e.sched.schedule(0, evRegionRound, int32(r), 0)
	}
	if e.rack != nil {
		for k := range w.rackName {
			e.sched.schedule(0, evRackRound, int32(k), 0)
		}
	}
}

func (e *engine) run(ctx context.Context) (PolicyResult, error) {
	sc := e.sc
	tick := sc.Tick.D()
	ticks := int64(sc.Duration) / int64(sc.Tick)
	sampleTicks := int64(sc.SampleEvery) / int64(sc.Tick)
	e.start()
	for r := 0; r < nres; r++ {
		for h := range e.w.hostName {
			if e.w.hostCap[h*nres+r] > 0 {
				e.hasCap[r] = true
			}
		}
	}
	progressEvery := int64(1)
	for progressEvery*int64(len(e.w.shardID)+1) < 1<<20 && progressEvery < ticks {
		progressEvery *= 2
	}
	for k := int64(0); k < ticks; k++ {
		t := time.Duration(k) * tick
		e.now = t
		e.loads(t)
		for {
			ev, ok := e.sched.next(t)
			if !ok {
				break
			}
			if err := e.handle(ctx, ev); err != nil {
				return PolicyResult{}, err
			}
		}
		if e.dirty {
			e.accumulate()
			e.dirty = false
		}
		e.process(t, tick)
		if (k+1)%sampleTicks == 0 || k == ticks-1 {
			e.sample(t + tick)
		}
		if e.progress != nil && k%progressEvery == 0 {
			if err := ctx.Err(); err != nil {
				return PolicyResult{}, err
			}
			e.progress(t)
		}
	}
	if e.progress != nil {
		e.progress(sc.Duration.D())
	}
	return e.finish(), nil
}

// loads computes every active shard's load and rate at time t and adds the
// processing shards' loads to their hosts. O(shards); allocates nothing.
func (e *engine) loads(t time.Duration) {
	w := e.w
	rateFactors(e.sc, w, e.arr, t, e.jf)
	if e.replay != nil {
		rows := e.replay.rows
		for e.replayAt < len(rows) && rows[e.replayAt].t <= t {
			r := rows[e.replayAt]
			i := e.replay0 + r.shard
			copy(w.baseLoad[i*nres:i*nres+nres], r.load[:])
			w.baseRate[i] = r.rate
			e.replayAt++
		}
	}
	clear(e.hostLoad)
	for h, st := range w.hostState {
		e.hostLive[h] = st != interfaces.ChildFailed
	}
	hl, cur, base, proc, live := e.hostLoad, e.cur, w.baseLoad, e.proc, e.hostLive
	var mx [nres]float64
	nact := 0
	for i, act := range w.active {
		if !act {
			continue
		}
		nact++
		f := e.jf[w.shardJob[i]] * w.hot[i]
		o := i * nres
		c0, c1, c2, c3 := base[o]*f, base[o+1], base[o+2]*f, base[o+3]
		cur[o], cur[o+1], cur[o+2], cur[o+3] = c0, c1, c2, c3
		mx[0], mx[1], mx[2], mx[3] = max(mx[0], c0), max(mx[1], c1), max(mx[2], c2), max(mx[3], c3)
		e.curRate[i] = w.baseRate[i] * f
		h := e.host[i]
		if h >= 0 && e.moveKind[i] == moveNone && live[h] {
			ho := int(h) * nres
			hl[ho] += c0
			hl[ho+1] += c1
			hl[ho+2] += c2
			hl[ho+3] += c3
			proc[i] = h
		} else {
			proc[i] = -1
		}
	}
	e.maxShard = mx
	e.nActive = nact
}

// accumulate recomputes the hosts' loads after events changed owners.
func (e *engine) accumulate() {
	w := e.w
	clear(e.hostLoad)
	for h, st := range w.hostState {
		e.hostLive[h] = st != interfaces.ChildFailed
	}
	nact := 0
	for i, act := range w.active {
		if act {
			nact++
		}
		h := e.host[i]
		if !act || h < 0 || e.moveKind[i] != moveNone || !e.hostLive[h] {
			e.proc[i] = -1
			continue
		}
		e.proc[i] = h
		ho, o := int(h)*nres, i*nres
		for r := 0; r < nres; r++ {
			e.hostLoad[ho+r] += e.cur[o+r]
		}
	}
	e.nActive = nact
}

// process advances one tick: each live host's utilization gives its modeled
// latency (M/M/1 mean sojourn at ρ = max(cpu, net) utilization, ρ capped at
// max_util); each shard processes its input at its share of the host (1/ρ when
// ρ > 1), so load above capacity accumulates backlog that drains when capacity
// returns; shards that are moving, unplaced or on a failed host process nothing.
func (e *engine) process(t time.Duration, tick time.Duration) {
	w, m := e.w, e.sc.Model
	dt := tick.Seconds()
	var used, capSum, maxU, maxShard, maxCap [nres]float64
	for h := range w.hostName {
		if w.hostState[h] == interfaces.ChildFailed {
			continue
		}
		ho := h * nres
		rho := 0.0
		for r := 0; r < nres; r++ {
			c := w.hostCap[ho+r]
			if c <= 0 {
				continue
			}
			u := e.hostLoad[ho+r] / c
			used[r] += e.hostLoad[ho+r]
			capSum[r] += c
			if c > maxCap[r] {
				maxCap[r] = c
			}
			if u > maxU[r] {
				maxU[r] = u
			}
			e.util[r].add(u)
			if (r == 0 || r == 2) && u > rho {
				rho = u
			}
		}
		rho /= e.hostSpeed[h]
		e.hostRho[h] = rho
		e.hostLat[h] = m.ServiceMS / (1 - math.Min(rho, m.MaxUtil))
	}
	backlogSum := 0.0
	svc := m.ServiceMS
	maxShard = e.maxShard
	proc, rhos, hw, pr := e.proc, e.hostRho, e.hostW, e.procRate
	for i, act := range w.active {
		if !act {
			continue
		}
		rate := e.curRate[i]
		b := e.backlog[i]
		if h := proc[i]; h >= 0 {
			rho := rhos[h]
			if b == 0 && rho <= 1 { // the common case: all input processed
				hw[h] += rate * dt
				if pr != nil {
					pr[i] = rate
				}
				continue
			}
			in := rate*dt + b
			capRate := rate
			if rho > 1 {
				capRate = rate / rho
			} else if b > 0 {
				capRate = math.Max(rate, w.baseRate[i]) / math.Max(rho, 0.05)
			}
			proc := math.Min(in, capRate*dt)
			if pr != nil {
				pr[i] = proc / dt
			}
			b = in - proc
			if b > 1e-9 {
				e.addLat(e.hostLat[h]+1000*b/math.Max(capRate, 1e-9), rate*dt)
			} else {
				b = 0
				hw[h] += rate * dt
			}
		} else {
			if pr != nil {
				pr[i] = 0
			}
			b += rate * dt
			if rate > 0 {
				e.addLat(svc+1000*b/rate, rate*dt)
			}
		}
		e.backlog[i] = b
		backlogSum += b
	}
	for h, wt := range e.hostW {
		if wt > 0 {
			e.addLat(e.hostLat[h], wt)
			e.hostW[h] = 0
		}
	}
	e.lagNow = backlogSum
	if backlogSum > e.lagPeak {
		e.lagPeak = backlogSum
	}
	e.sum.ShardTicks += int64(e.nActive)
	e.nTicks++
	for r := 0; r < nres; r++ {
		e.lastMaxU[r], e.lastMean[r], e.lastLB[r] = maxU[r], 0, 0
		if capSum[r] <= 0 {
			continue
		}
		mean := used[r] / capSum[r]
		lb := math.Max(mean, maxShard[r]/maxCap[r])
		e.lastMean[r], e.lastLB[r] = mean, lb
		if mean > 0 {
			e.sumMOM[r] += maxU[r] / mean
			e.sumMOLB[r] += maxU[r] / lb
		} else {
			e.sumMOM[r]++
			e.sumMOLB[r]++
		}
	}
	e.checkTick(t)
}

func (e *engine) addLat(ms, w float64) {
	e.latHist.add(ms, w)
	e.ivLat.add(ms, w)
	for k := range e.asserts {
		a := &e.sc.Assertions[e.asserts[k].Index]
		if a.Kind == AssertSLO && e.now >= a.From.D() && e.now < a.To.D() {
			e.sloHist[k].add(ms, w)
		}
	}
}

// assertTrack is what an assertion follows during a run beyond its
// AssertionResult.
type assertTrack struct {
	// converge: rounds per tier instance since From, until balance is back.
	rounds map[*tierInstance]int
	acted  map[*tierInstance]bool // instances that solved in that stretch
	broken bool                   // balance was lost after From
	done   bool                   // ... and is back (or was never lost)
	worst  float64                // worst max/mean after From
	backAt time.Duration          // when it was back
	// guard: whether and when (and where) the guard engaged.
	guarded bool
	guardAt time.Duration
	guardBy string
	// no_bounce: the first return.
	bounce string
}

// departure is a child a shard left, at one level of the hierarchy.
type departure struct {
	kind  uint8 // moveHost, moveRegion or moveRack
	child int32
	at    time.Duration
}

// left records that shard i leaves child from for child to (a relocation of the
// given kind) at t, and checks the no_bounce assertions: a shard must not
// return to a child it left less than their window before.
func (e *engine) left(i int32, kind uint8, from, to int32, t time.Duration) {
	if e.departures == nil || from < 0 {
		return
	}
	ds := e.departures[i][:0]
	for _, d := range e.departures[i] {
		if t-d.at < e.bounceWin {
			ds = append(ds, d)
		}
	}
	for k := range e.asserts {
		ar := &e.asserts[k]
		a := &e.sc.Assertions[ar.Index]
		if a.Kind != AssertNoBounce || t < a.From.D() || t >= a.To.D() {
			continue
		}
		win := e.bounceWindow(a)
		for _, d := range ds {
			if d.kind == kind && d.child == to && t-d.at < win {
				ar.Value++
				if ar.Passed {
					ar.Passed, ar.At = false, t.Seconds()
					e.track[k].bounce = fmt.Sprintf("shard %s went back to %s at t=%v, %v after leaving it (from %s)", e.w.shardID[i], e.childName(kind, to), t, t-d.at, e.childName(kind, from))
				}
				break
			}
		}
	}
	e.departures[i] = append(ds, departure{kind: kind, child: from, at: t})
}

func (e *engine) childName(kind uint8, c int32) string {
	switch kind {
	case moveRegion:
		return e.w.regionName[c]
	case moveRack:
		return e.w.rackName[c]
	}
	return e.w.hostName[c]
}

// checkTick evaluates the per-tick assertions (balance, converge) at time t.
func (e *engine) checkTick(t time.Duration) {
	for k := range e.asserts {
		ar := &e.asserts[k]
		a := &e.sc.Assertions[ar.Index]
		if a.Kind == AssertConverge {
			e.checkConverge(k, t)
			continue
		}
		if a.Kind != AssertBalance || t < a.From.D() || t >= a.To.D() {
			continue
		}
		r, _ := resourceIndex(a.Resource)
		if e.lastMean[r] <= 0 {
			continue
		}
		v := e.lastMaxU[r] / e.lastMean[r]
		if v > ar.Value {
			ar.Value = v
		}
		if v > a.Max && ar.Passed {
			ar.Passed = false
			ar.At = t.Seconds()
		}
	}
}

// checkConverge follows a converge assertion at tick t: once balance is lost
// after From, the first tick it is back ends the count of rounds.
func (e *engine) checkConverge(k int, t time.Duration) {
	ar, tr := &e.asserts[k], &e.track[k]
	a := &e.sc.Assertions[ar.Index]
	if tr.done || t < a.From.D() || t >= a.To.D() {
		return
	}
	r, _ := resourceIndex(a.Resource)
	if e.lastMean[r] <= 0 {
		return
	}
	v := e.lastMaxU[r] / e.lastMean[r]
	tr.worst = max(tr.worst, v)
	if v > a.Max {
		tr.broken = true
		return
	}
	tr.done, tr.backAt = true, t // back (or never lost: converged at once)
}

// sample records one row of the time series at time t.
func (e *engine) sample(t time.Duration) {
	w := e.w
	s := Sample{T: t.Seconds(), LatencyP50MS: e.ivLat.quantile(0.5), LatencyP99MS: e.ivLat.quantile(0.99), Backlog: e.lagNow, Moves: e.ivMoves, BytesMoved: e.ivBytes}
	for r := 0; r < nres; r++ {
		e.scratch = e.scratch[:0]
		for h := range w.hostName {
			if w.hostState[h] == interfaces.ChildFailed || w.hostCap[h*nres+r] <= 0 {
				continue
			}
			e.scratch = append(e.scratch, e.hostLoad[h*nres+r]/w.hostCap[h*nres+r])
		}
		if len(e.scratch) == 0 {
			continue
		}
		slices.Sort(e.scratch)
		n := len(e.scratch)
		s.UtilMin[r] = e.scratch[0]
		s.UtilP50[r] = e.scratch[(n-1)/2]
		s.UtilP99[r] = e.scratch[int(math.Ceil(0.99*float64(n)))-1]
		s.UtilMax[r] = e.scratch[n-1]
		s.UtilMean[r] = e.lastMean[r]
		s.LB[r] = e.lastLB[r]
	}
	for h := range w.hostName {
		if w.hostState[h] == interfaces.ChildFailed {
			s.FailedHosts++
		}
	}
	s.Unowned = e.unowned(nil)
	if e.impactCnt != nil {
		s.RackLossImpact = e.rackLossImpact()
		e.impactLast = s.RackLossImpact
		for k := range e.asserts {
			ar := &e.asserts[k]
			a := &e.sc.Assertions[ar.Index]
			if a.Kind != AssertSpread || t < a.From.D() || t > a.To.D() {
				continue
			}
			if s.RackLossImpact > ar.Value {
				ar.Value = s.RackLossImpact
			}
			if s.RackLossImpact > a.Max && ar.Passed {
				ar.Passed = false
				ar.At = t.Seconds()
			}
		}
	}
	e.series = append(e.series, s)
	e.ivLat.reset()
	e.ivMoves, e.ivBytes = 0, 0
	for k := range e.asserts {
		ar := &e.asserts[k]
		a := &e.sc.Assertions[ar.Index]
		if a.Kind == AssertSLO && ar.Passed && t > a.From.D() && t-e.sc.SampleEvery.D() < a.To.D() && s.LatencyP99MS > a.LatencyP99MS && ar.At == 0 {
			ar.At = t.Seconds() // first sample over the limit; judged in finish
		}
	}
}

// unowned counts active shards not running on a live host; it collects their IDs
// into ids when non-nil (up to 5).
func (e *engine) unowned(ids *[]string) int {
	n := 0
	for i, act := range e.w.active {
		if !act {
			continue
		}
		h := e.host[i]
		if h < 0 || e.moveKind[i] != moveNone || e.w.hostState[h] == interfaces.ChildFailed {
			n++
			if ids != nil && len(*ids) < 5 {
				*ids = append(*ids, string(e.w.shardID[i]))
			}
		}
	}
	return n
}

// rackLossImpact is the largest fraction of one job's running shards (active,
// on a live host, not moving) that sit on a single rack. O(shards + jobs·racks);
// allocates nothing.
func (e *engine) rackLossImpact() float64 {
	w := e.w
	clear(e.impactCnt)
	clear(e.impactJob)
	nr := len(w.rackName)
	for i, act := range w.active {
		h := e.host[i]
		if !act || h < 0 || e.moveKind[i] != moveNone || w.hostState[h] == interfaces.ChildFailed {
			continue
		}
		j := w.shardJob[i]
		e.impactJob[j]++
		e.impactCnt[int(j)*nr+int(w.hostRack[h])]++
	}
	worst := 0.0
	for j, n := range e.impactJob {
		if n == 0 {
			continue
		}
		for _, c := range e.impactCnt[j*nr : (j+1)*nr] {
			worst = max(worst, float64(c)/float64(n))
		}
	}
	return round4(worst)
}

func (e *engine) finish() PolicyResult {
	s := e.sum
	s.UtilP50, s.UtilP99, s.UtilMax = map[string]float64{}, map[string]float64{}, map[string]float64{}
	s.MaxOverLB, s.MaxOverMean = map[string]float64{}, map[string]float64{}
	for r, name := range interfaces.BuiltinResources {
		if !e.hasCap[r] {
			continue
		}
		s.UtilP50[name] = round4(e.util[r].quantile(0.5))
		s.UtilP99[name] = round4(e.util[r].quantile(0.99))
		s.UtilMax[name] = round4(e.util[r].quantile(1))
		if e.nTicks > 0 {
			s.MaxOverLB[name] = round4(e.sumMOLB[r] / float64(e.nTicks))
			s.MaxOverMean[name] = round4(e.sumMOM[r] / float64(e.nTicks))
		}
	}
	s.LatencyP50MS = round4(e.latHist.quantile(0.5))
	s.LatencyP99MS = round4(e.latHist.quantile(0.99))
	s.Lag = math.Round(e.lagPeak)
	s.LagFinal = math.Round(e.lagNow)
	s.SolveSeconds = float64(e.solveNS) / 1e9
	s.RackLossImpact = e.impactLast
	if s.Alerts == nil {
		s.Alerts = []Alert{}
	}
	var ids []string
	s.Unowned = e.unowned(&ids)
	for k := range e.asserts {
		ar := &e.asserts[k]
		a := &e.sc.Assertions[ar.Index]
		switch a.Kind {
		case AssertBalance:
			ar.Value = round4(ar.Value)
			if ar.Passed {
				ar.Message = fmt.Sprintf("balance %s: max/mean ≤ %g over [%v, %v): held (worst %.4g)", a.Resource, a.Max, a.From.D(), a.To.D(), ar.Value)
			} else {
				ar.Message = fmt.Sprintf("balance %s: max/mean ≤ %g over [%v, %v): FAILED first at t=%v (worst %.4g)", a.Resource, a.Max, a.From.D(), a.To.D(), secs(ar.At), ar.Value)
			}
		case AssertSteady:
			if ar.Passed {
				ar.Message = fmt.Sprintf("steady: no moves over [%v, %v): held", a.From.D(), a.To.D())
			} else {
				ar.Message = fmt.Sprintf("steady: no moves over [%v, %v): FAILED, %g moves, the first at t=%v", a.From.D(), a.To.D(), ar.Value, secs(ar.At))
			}
		case AssertSLO:
			ar.Value = round4(e.sloHist[k].quantile(0.99))
			ar.Passed = ar.Value <= a.LatencyP99MS
			if ar.Passed {
				ar.At = 0
				ar.Message = fmt.Sprintf("slo: modeled p99 latency ≤ %gms over [%v, %v): held (%.4gms)", a.LatencyP99MS, a.From.D(), a.To.D(), ar.Value)
			} else {
				when := "over the window"
				if ar.At > 0 {
					when = fmt.Sprintf("first over the limit in the sample ending t=%v", secs(ar.At))
				}
				ar.Message = fmt.Sprintf("slo: modeled p99 latency ≤ %gms over [%v, %v): FAILED, p99 %.4gms, %s", a.LatencyP99MS, a.From.D(), a.To.D(), ar.Value, when)
			}
		case AssertSpread:
			if ar.Passed {
				ar.Message = fmt.Sprintf("spread: rack_loss_impact ≤ %g over [%v, %v]: held (worst %.4g)", a.Max, a.From.D(), a.To.D(), ar.Value)
			} else {
				ar.Message = fmt.Sprintf("spread: rack_loss_impact ≤ %g over [%v, %v]: FAILED first at t=%v (worst %.4g)", a.Max, a.From.D(), a.To.D(), secs(ar.At), ar.Value)
			}
		case AssertConverge:
			e.finishConverge(k)
		case AssertNoBounce:
			if ar.Passed {
				ar.Message = fmt.Sprintf("no_bounce: no shard back to a child it left within %v, over [%v, %v): held", e.bounceWindow(a), a.From.D(), a.To.D())
			} else {
				ar.Message = fmt.Sprintf("no_bounce: no shard back to a child it left within %v, over [%v, %v): FAILED, %g returns; the first: %s", e.bounceWindow(a), a.From.D(), a.To.D(), ar.Value, e.track[k].bounce)
			}
		case AssertGuard:
			tr := &e.track[k]
			ar.Passed = tr.guarded && ar.Value <= a.Max
			switch {
			case !tr.guarded:
				ar.At = (a.From.D() + a.Within.D()).Seconds()
				ar.Message = fmt.Sprintf("guard: FAILED, no tier instance engaged the mass-failure guard (with its mass_failure alert) within %v of %v; %g moves over [%v, %v)", a.Within.D(), a.From.D(), ar.Value, a.From.D(), a.To.D())
			case ar.Value > a.Max:
				ar.Message = fmt.Sprintf("guard: engaged by %s at t=%v, but %g moves over [%v, %v) (at most %g), the first over the limit at t=%v", tr.guardBy, tr.guardAt, ar.Value, a.From.D(), a.To.D(), a.Max, secs(ar.At))
			default:
				ar.Message = fmt.Sprintf("guard: engaged by %s at t=%v with a mass_failure alert; %g moves over [%v, %v) (at most %g): held", tr.guardBy, tr.guardAt, ar.Value, a.From.D(), a.To.D(), a.Max)
			}
		case AssertNoLoss:
			ar.Value = float64(s.Unowned)
			ar.Passed = s.Unowned == 0
			if ar.Passed {
				ar.Message = "no_loss: every shard owned by a live host at the end: held"
			} else {
				ar.At = e.sc.Duration.D().Seconds()
				ar.Message = fmt.Sprintf("no_loss: FAILED at the end (t=%v): %d shards not running on a live host (e.g. %v)", e.sc.Duration.D(), s.Unowned, ids)
			}
		}
	}
	return PolicyResult{Summary: s, Series: e.series, Assertions: e.asserts}
}

func (e *engine) bounceWindow(a *Assertion) time.Duration {
	if a.Within > 0 {
		return a.Within.D()
	}
	return e.cfg.BounceWindow
}

// finishConverge judges a converge assertion: Value is the most control rounds
// one tier instance ran from From until balance was back (among the instances
// that solved in that stretch, when any did: an instance that only held, like a
// global tier over one region, does not count).
func (e *engine) finishConverge(k int) {
	ar, tr := &e.asserts[k], &e.track[k]
	a := &e.sc.Assertions[ar.Index]
	n, by := 0, ""
	for in, c := range tr.rounds {
		if len(tr.acted) > 0 && !tr.acted[in] {
			continue // count the instances that acted on the change
		}
		if c > n || (c == n && in.name < by) {
			n, by = c, in.name
		}
	}
	ar.Value = float64(n)
	head := fmt.Sprintf("converge %s: max/mean back ≤ %g within %d control rounds after %v", a.Resource, a.Max, a.Rounds, a.From.D())
	switch {
	case tr.done && !tr.broken:
		ar.Value = 0
		ar.Message = fmt.Sprintf("%s: held (balance was never lost; worst %.4g)", head, tr.worst)
	case !tr.done:
		ar.Passed = false
		ar.At = a.To.D().Seconds()
		ar.Message = fmt.Sprintf("%s: FAILED, not back by t=%v (worst %.4g; %d rounds of %s)", head, a.To.D(), tr.worst, n, by)
	case n > a.Rounds:
		ar.Passed = false
		ar.At = tr.backAt.Seconds()
		ar.Message = fmt.Sprintf("%s: FAILED, back at t=%v after %d rounds of %s (worst %.4g)", head, tr.backAt, n, by, tr.worst)
	default:
		ar.Message = fmt.Sprintf("%s: held, back at t=%v after %d rounds of %s (worst %.4g)", head, tr.backAt, n, by, tr.worst)
	}
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func round4(x float64) float64 {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return x
	}
	return math.Round(x*1e4) / 1e4
}

// checkConstraintShards checks that every shard an operator constraint of spec
// names is in the world (the workload, replay or live state, known only once
// built): a constraint on a missing shard would fail every solve of its tier.
func (sc *Scenario) checkConstraintShards(spec PolicySpec, w *world) error {
	var known map[string]bool
	pi := slices.IndexFunc(sc.Policies, func(p PolicySpec) bool { return p.Name == spec.Name })
	for k, c := range spec.Constraints {
		for m, id := range c.Shards {
			if known == nil {
				known = make(map[string]bool, len(w.shardID))
				for _, s := range w.shardID {
					known[string(s)] = true
				}
			}
			if !known[id] {
				return sc.fail(p("policies", pi, "constraints", k, "shards", m), "shard %q is not in the workload", id)
			}
		}
	}
	return nil
}
