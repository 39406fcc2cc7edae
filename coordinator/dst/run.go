package dst

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/interfaces"
)

// FaultKind is one kind of injected fault.
type FaultKind uint8

const (
	// Crash kills the process; it restarts after For (a host agent from its
	// store, a tier replica from its Raft log).
	Crash FaultKind = iota + 1
	// Pause freezes the process for For (SIGSTOP); what is sent to it waits.
	Pause
	// Partition cuts Scope off from every other process for For.
	Partition
	// Depose ends the leader's term of the target's group (an election).
	Depose
	// LinkReset resets the target's session with its parent at both ends,
	// and cuts it off for For (a flapping link).
	LinkReset
)

var faultNames = [...]string{"?", "crash", "pause", "partition", "depose", "link-reset"}

func (k FaultKind) String() string { return faultNames[k] }

// Scope is what a partition cuts off.
type Scope uint8

const (
	// One process.
	ScopeProc Scope = iota
	// A region group's replicas (from the global tier and their hosts).
	ScopeReplicas
	// A whole region, replicas and hosts, from the global tier.
	ScopeRegion
)

// Fault is one entry of a run's fault plan.
type Fault struct {
	At, For time.Duration
	Kind    FaultKind
	// Target is a process index; with Leader set, the leader at the fault's
	// time of the group Group (-1: global) instead.
	Target int
	Leader bool
	Group  int
	Scope  Scope
}

func (f Fault) String() string {
	who := fmt.Sprintf("proc %d", f.Target)
	if f.Leader {
		who = fmt.Sprintf("leader of group %d", f.Group)
	}
	s := fmt.Sprintf("%s of %s at %.3fs for %.3fs", f.Kind, who, f.At.Seconds(), f.For.Seconds())
	if f.Kind == Partition {
		s += fmt.Sprintf(" (scope %d)", f.Scope)
	}
	return s
}

// Stats counts what a run did.
type Stats struct {
	Steps, Messages, Starts, Moves, Elections, Faults, Lost int
}

// Result is one run's outcome.
type Result struct {
	Seed      uint64
	Digest    uint64 // hash of every step: equal digests, equal runs
	Violation *Violation
	Trace     []string // the last steps (Config.Trace)
	Plan      []Fault
	Stats     Stats
}

// Run simulates one seed. It is deterministic: the same seed and config give
// the same Result.
func Run(seed uint64, cfg Config) Result {
	cfg = cfg.withDefaults()
	w := newWorld(seed, cfg)
	end := int64(cfg.FaultFor + cfg.QuietFor)
	for w.q.Len() > 0 && w.viol == nil {
		e := heap.Pop(&w.q).(*event)
		if e.at > end {
			break
		}
		w.clock = e.at
		w.steps++
		w.mix(uint64(e.at), uint64(e.kind), uint64(e.proc))
		w.step(e)
	}
	if w.viol == nil {
		w.clock = end
		w.finalCheck()
	}
	w.stats.Steps = w.steps
	return Result{Seed: seed, Digest: w.digest, Violation: w.viol, Trace: w.trace, Plan: w.plan, Stats: w.stats}
}

// Plan draws the fault plan of seed (what Run injects unless Config.Plan is set).
func Plan(seed uint64, cfg Config) []Fault {
	cfg = cfg.withDefaults()
	r := rand.New(rand.NewPCG(seed, 0xfa17))
	nprocs := cfg.GlobalReplicas + cfg.Regions*(cfg.RegionReplicas+cfg.HostsPerRegion)
	plan := make([]Fault, cfg.Faults)
	for i := range plan {
		f := Fault{
			At:  time.Duration(r.Int64N(int64(cfg.FaultFor - time.Second))),
			For: 200*time.Millisecond + time.Duration(r.Int64N(int64(6*time.Second))),
		}
		switch k := r.IntN(9); {
		case k < 2:
			f.Kind = Crash
		case k < 4:
			f.Kind = Pause
		case k < 6:
			f.Kind = Partition
			f.Scope = Scope(r.IntN(3))
		case k < 7:
			f.Kind = Depose
		default:
			f.Kind = LinkReset
		}
		f.Target = r.IntN(nprocs)
		f.Group = r.IntN(cfg.Regions+1) - 1
		f.Leader = f.Kind != LinkReset && r.IntN(2) == 0
		plan[i] = f
	}
	slices.SortStableFunc(plan, func(a, b Fault) int { return int(a.At - b.At) })
	return plan
}

func newWorld(seed uint64, cfg Config) *World {
	w := &World{cfg: cfg, rng: rand.New(rand.NewPCG(seed, 0x5eed)), digest: 14695981039346656037,
		chk: checker{maxEpoch: map[interfaces.ShardID]interfaces.Epoch{}, lastHost: map[interfaces.ShardID]int{}}}
	pr := rand.New(rand.NewPCG(seed, 0x0e7))
	w.net = netConfig{drop: pr.Float64() * 0.05, dup: pr.Float64() * 0.05, slow: pr.Float64() * 0.1}
	w.plan = cfg.Plan
	if w.plan == nil {
		w.plan = Plan(seed, cfg)
	}
	add := func(name string, k pkind, g *group, region int) *proc {
		p := &proc{id: len(w.procs), name: name, kind: k, g: g, region: region, up: true, ppm: pr.Int64N(2*maxDriftPPM+1) - maxDriftPPM}
		w.procs = append(w.procs, p)
		return p
	}
	w.global = &group{name: "global", kind: kGlobal, region: -1, leader: -1}
	for i := 0; i < cfg.GlobalReplicas; i++ {
		p := add(fmt.Sprintf("g%d", i), kGlobal, w.global, -1)
		w.global.replicas = append(w.global.replicas, p)
	}
	w.hosts = make([][]*proc, cfg.Regions)
	for r := 0; r < cfg.Regions; r++ {
		g := &group{name: fmt.Sprintf("r%d", r), kind: kRegion, region: r, leader: -1}
		w.regions = append(w.regions, g)
		for i := 0; i < cfg.RegionReplicas; i++ {
			g.replicas = append(g.replicas, add(fmt.Sprintf("r%d.%d", r, i), kRegion, g, r))
		}
		for i := 0; i < cfg.HostsPerRegion; i++ {
			w.hosts[r] = append(w.hosts[r], add(fmt.Sprintf("r%d-h%d", r, i), kHost, nil, r))
		}
	}
	for _, p := range w.procs {
		if p.kind == kHost {
			p.h = newHost()
			w.bootHost(p)
		} else {
			w.bootTier(p, false)
		}
		w.tickLater(p, w.dur(0, tickInterval))
	}
	for _, g := range append([]*group{w.global}, w.regions...) {
		w.elect(g)
	}
	gl := w.global.replicas[w.global.leader]
	var shards []interfaces.Shard
	for i := 0; i < cfg.Shards; i++ {
		shards = append(shards, interfaces.Shard{ID: shardID(i), Job: "j", Load: interfaces.Load{Tasks: 1}})
	}
	w.nextShard = cfg.Shards
	if _, err := w.commit(gl, &fsm.PutShards{Shards: shards}); err != nil {
		w.violate(ruleHarnessError, "initial shards: %v", err)
	}
	for i, f := range w.plan {
		w.schedule(int64(f.At), &event{kind: evFault, arg: i})
	}
	w.schedule(int64(cfg.FaultFor), &event{kind: evQuiet})
	return w
}

func (w *World) tickLater(p *proc, d time.Duration) {
	p.inc++ // a new tick chain: any older one stops
	w.after(d, &event{kind: evTick, proc: p.id, inc: p.inc})
}

func (w *World) step(e *event) {
	switch e.kind {
	case evMsg, evStepDown, evFence:
		p := w.procs[e.proc]
		if !p.up || (e.kind != evMsg && e.inc != p.inc && e.kind != evStepDown) {
			return
		}
		if p.paused {
			p.held = append(p.held, e)
			return
		}
		switch e.kind {
		case evMsg:
			m := e.m
			w.mix(uint64(m.kind), m.sid, m.epoch, hashString(string(m.shard)))
			w.tracef("%s ← %s %s sid=%d %s@%d seq=%d ok=%v", p.name, w.procs[m.from].name, m.kind, m.sid, m.shard+m.spec.ID, m.epoch, m.seq, m.ok)
			if p.kind == kHost {
				w.hostMsg(p, m)
			} else {
				w.tierMsg(p, m)
			}
		case evStepDown:
			w.stepDown(p, e.term)
		case evFence:
			w.exec(p, p.h.core.Tick(w.now(p)))
		}
	case evTick:
		p := w.procs[e.proc]
		if !p.up || p.paused || e.inc != p.inc {
			return
		}
		if p.kind == kHost {
			w.hostTick(p)
		} else {
			w.tierTick(p)
		}
		w.after(tickInterval, &event{kind: evTick, proc: p.id, inc: p.inc})
	case evFault:
		w.fault(e.arg)
	case evEnd:
		w.endFault(e)
	case evSuspect:
		p := w.procs[e.proc]
		if g := p.g; p.paused && g.leader >= 0 && g.replicas[g.leader] == p {
			w.depose(g, 50*time.Millisecond)
		}
	case evElect:
		w.elect(w.groupAt(e.arg))
	case evQuiet:
		w.quiet = true
		w.parts = nil
		w.net = netConfig{} // the network heals too
		for _, p := range w.procs {
			if p.paused {
				w.resume(p)
			}
			if !p.up {
				w.restart(p)
			}
		}
		w.tracef("faults stop")
	}
}

func (w *World) faultTarget(f Fault) *proc {
	if !f.Leader {
		return w.procs[f.Target%len(w.procs)]
	}
	g := w.groupAt(f.Group)
	if g.leader < 0 {
		return nil
	}
	return g.replicas[g.leader]
}

func (w *World) fault(i int) {
	if w.quiet {
		return
	}
	f := w.plan[i]
	p := w.faultTarget(f)
	if p == nil {
		return
	}
	w.stats.Faults++
	w.tracef("FAULT %s → %s", f, p.name)
	endAt := &event{kind: evEnd, arg: i, proc: p.id}
	switch f.Kind {
	case Crash:
		if !p.up {
			return
		}
		w.crash(p)
	case Pause:
		if !p.up || p.paused {
			return
		}
		p.paused = true
		if g := p.g; g != nil && g.leader >= 0 && g.replicas[g.leader] == p {
			w.after(w.dur(500*time.Millisecond, time.Second), &event{kind: evSuspect, proc: p.id})
		}
	case Partition:
		side := map[int]bool{p.id: true}
		if f.Scope != ScopeProc && p.kind != kGlobal {
			for _, q := range w.regions[p.region].replicas {
				side[q.id] = true
			}
			if f.Scope == ScopeRegion {
				for _, q := range w.hosts[p.region] {
					side[q.id] = true
				}
			}
		}
		w.parts = append(w.parts, partition{side: side, end: w.clock + int64(f.For)})
		if g := p.g; g != nil && len(side) < len(g.replicas) && g.leader >= 0 && side[g.replicas[g.leader].id] {
			w.depose(g, 500*time.Millisecond) // a leader cut off from its followers
		}
		endAt.term = uint64(len(w.parts))
	case Depose:
		g := p.g
		if g == nil {
			g = w.regions[p.region]
		}
		w.depose(g, 500*time.Millisecond)
		return
	case LinkReset:
		var cs *csess
		if p.kind == kHost {
			cs = p.h.cs
		} else if p.kind == kRegion {
			cs = p.t.cs
		}
		if cs != nil {
			// Both ends learn at once (a middlebox reset the connection).
			w.deliver(&msg{kind: mReset, from: cs.parent, to: p.id, sid: cs.sid})
			w.deliver(&msg{kind: mReset, from: p.id, to: cs.parent, sid: cs.sid})
		}
		w.parts = append(w.parts, partition{side: map[int]bool{p.id: true}, end: w.clock + int64(f.For)})
	}
	w.after(f.For, endAt)
}

func (w *World) endFault(e *event) {
	if w.quiet {
		return
	}
	f := w.plan[e.arg]
	p := w.procs[e.proc]
	switch f.Kind {
	case Crash:
		if !p.up {
			w.restart(p)
		}
	case Pause:
		if p.paused {
			w.resume(p)
		}
	case Partition, LinkReset:
		kept := w.parts[:0]
		for _, pt := range w.parts {
			if pt.end > w.clock {
				kept = append(kept, pt)
			}
		}
		w.parts = kept
	}
}

func (w *World) crash(p *proc) {
	p.up = false
	p.inc++
	if p.kind == kHost {
		w.crashHost(p)
		return
	}
	t := p.t
	for _, id := range sortedKeys(t.kids) {
		w.reset(p.id, t.kids[id].proc, t.kids[id].sid)
	}
	if t.cs != nil {
		w.reset(p.id, t.cs.parent, t.cs.sid)
	}
	t.leading = false
	if g := p.g; g.leader >= 0 && g.replicas[g.leader] == p {
		w.depose(g, 0)
	}
}

func (w *World) restart(p *proc) {
	p.up = true
	p.paused = false
	p.held = nil
	if p.kind == kHost {
		w.bootHost(p)
	} else {
		w.bootTier(p, true)
		if p.g.leader < 0 {
			w.electLater(p.g)
		}
	}
	w.tickLater(p, w.dur(0, tickInterval))
	w.tracef("%s restarts", p.name)
}

func (w *World) resume(p *proc) {
	p.paused = false
	held := p.held
	p.held = nil
	for _, e := range held {
		w.schedule(w.clock, e) // in the order they came
	}
	w.tickLater(p, time.Millisecond)
	if g := p.g; g != nil && g.leader < 0 {
		w.electLater(g)
	}
	w.tracef("%s resumes", p.name)
}

// Shrink looks for a smaller fault plan under which seed still fails: it
// drops each fault in turn and keeps the drop when the run still breaks an
// invariant (any rule). res is the failing run; the result is the smallest
// failing run found (res itself when no fault can go).
func Shrink(seed uint64, cfg Config, res Result) Result {
	if res.Violation == nil {
		return res
	}
	plan := slices.Clone(res.Plan)
	for i := 0; i < len(plan); {
		try := slices.Delete(slices.Clone(plan), i, i+1)
		c := cfg
		c.Plan = try
		if len(try) == 0 {
			c.Plan = []Fault{} // no faults (nil would draw the seed's plan)
		}
		if r := Run(seed, c); r.Violation != nil {
			plan, res = try, r
			continue
		}
		i++
	}
	return res
}

// Report is a failing run written for a person: the violation, the fault
// plan that still breaks it, and the last steps of the replay.
func Report(seed uint64, cfg Config) string {
	res := Run(seed, cfg)
	if res.Violation == nil {
		return fmt.Sprintf("seed %d: no violation", seed)
	}
	small := Shrink(seed, cfg, res)
	c := cfg
	c.Plan = small.Plan
	if c.Plan == nil {
		c.Plan = []Fault{}
	}
	c.Trace = true
	replay := Run(seed, c)
	out := fmt.Sprintf("seed %d: %v\nfaults (%d of %d kept by shrinking):\n", seed, small.Violation, len(small.Plan), len(res.Plan))
	for _, f := range small.Plan {
		out += "  " + f.String() + "\n"
	}
	out += "last steps of the replay:\n"
	for _, l := range replay.Trace {
		out += "  " + l + "\n"
	}
	return out
}
