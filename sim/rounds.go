package sim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/strata-sched/strata/coordinator/tiercore"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/tiers/control"
)

// handle applies one discrete event.
func (e *engine) handle(ctx context.Context, ev event) error {
	w := e.w
	t := ev.at
	detect := e.sc.Model.DetectAfter.D()
	switch ev.kind {
	case evGlobalRound:
		e.sched.schedule(t+e.sc.ControlInterval.D(), evGlobalRound, 0, 0)
		return e.globalRound(ctx, t)
	case evGlobalNow:
		delete(e.pending, [2]int64{-1, int64(t)})
		return e.globalRound(ctx, t)
	case evRegionRound:
		e.sched.schedule(t+e.sc.ControlInterval.D(), evRegionRound, ev.a, 0)
		return e.regionRound(ctx, t, ev.a)
	case evRegionNow:
		delete(e.pending, [2]int64{int64(ev.a), int64(t)})
		return e.regionRound(ctx, t, ev.a)
	case evRackRound:
		e.sched.schedule(t+e.sc.ControlInterval.D(), evRackRound, ev.a, 0)
		return e.rackRound(ctx, t, ev.a)
	case evRackNow:
		delete(e.pending, [2]int64{rackKey(ev.a), int64(t)})
		return e.rackRound(ctx, t, ev.a)
	case evLand:
		i := ev.a
		if e.moveTag[i] != uint32(ev.b) || !w.active[i] {
			return nil // cancelled
		}
		switch e.moveKind[i] {
		case moveHost:
			e.host[i] = e.moveTo[i]
		case moveRegion:
			e.region_[i] = e.moveTo[i]
			e.rack_[i] = -1
			e.host[i] = -1
			e.trigger(e.moveTo[i], t)
		case moveRack:
			e.rack_[i] = e.moveTo[i]
			e.host[i] = -1
			e.triggerRack(e.moveTo[i], t)
		}
		e.moveKind[i] = moveNone
		e.dirty = true
	case evHostFail:
		// The host stops at once; its tier instance hears nothing from it, its
		// lease expires detect_after later (silent from then on), and the
		// controller declares it failed after its grace, unless the
		// mass-failure guard holds.
		if w.hostState[ev.a] != interfaces.ChildFailed {
			w.hostState[ev.a] = interfaces.ChildFailed
			e.failAt[ev.a] = t
		}
		e.dirty = true
		for _, at := range []time.Duration{t + detect, t + detect + e.cfg.Grace} {
			e.trigger(w.hostRegion[ev.a], at)
			e.triggerHostRack(ev.a, at)
			e.trigger(-1, at)
		}
	case evHostRecover:
		w.hostState[ev.a] = interfaces.ChildActive
		e.hostDeclared[ev.a] = false
		e.dirty = true
		e.trigger(w.hostRegion[ev.a], t)
		e.trigger(-1, t)
		e.triggerHostRack(ev.a, t)
	case evDrain:
		if w.hostState[ev.a] == interfaces.ChildActive {
			w.hostState[ev.a] = interfaces.ChildDraining
		}
		e.trigger(w.hostRegion[ev.a], t)
		e.trigger(-1, t)
		e.triggerHostRack(ev.a, t)
	case evRegionLoss:
		// The region's hosts and its tier instances (and racks') are gone: the
		// global tier hears nothing from it, silent from detect_after on.
		for _, h := range w.regionHosts[ev.a] {
			if w.hostState[h] != interfaces.ChildFailed {
				w.hostState[h] = interfaces.ChildFailed
				e.failAt[h] = t
			}
		}
		if !e.regionLost[ev.a] {
			e.regionLost[ev.a] = true
			e.regionLostAt[ev.a] = t
		}
		e.dirty = true
		e.trigger(-1, t+detect)
		e.trigger(-1, t+detect+e.cfg.Grace)
	case evRegionBack:
		for _, h := range w.regionHosts[ev.a] {
			w.hostState[h] = interfaces.ChildActive
			e.hostDeclared[h] = false
		}
		if e.regionLost[ev.a] {
			// New leaders: fresh controllers for the region and its racks
			// (the old ones' alerts end here).
			e.regionLost[ev.a], e.regionDeclared[ev.a] = false, false
			e.closeAlerts(e.regions[ev.a], t)
			var err error
			if e.regions[ev.a], err = e.newInstance(w.regionName[ev.a], e.rpol); err != nil {
				return err
			}
			if e.rack != nil {
				for _, k := range w.regionRacks[ev.a] {
					e.closeAlerts(e.racks[k], t)
					if e.racks[k], err = e.newInstance(w.rackName[k], e.rack); err != nil {
						return err
					}
				}
			}
		}
		e.dirty = true
		e.trigger(-1, t)
		e.trigger(ev.a, t)
		e.triggerRegionRacks(ev.a, t)
	case evAddHosts:
		spec := e.sc.Events[ev.a]
		r := w.region(spec.Region)
		for k := 0; k < spec.Count; k++ {
			h := w.addHost(fmt.Sprintf("%s-x%02d-%02d", spec.Region, ev.a, k), r, spec.Capacity.Load(), nil)
			e.triggerHostRack(h, t)
			for q := 0; q < nres; q++ {
				if w.hostCap[int(h)*nres+q] > 0 {
					e.hasCap[q] = true
				}
			}
		}
		e.resizeHosts()
		e.dirty = true
		e.trigger(r, t)
		e.trigger(-1, t)
	case evHostSlow:
		se := e.sc.Events[ev.a]
		e.hostSpeed[e.w.hostIndex(se.Host)] = se.Factor
	case evAck:
		if in := e.instance(e.sc.Events[ev.a].Instance); in != nil {
			in.ack = true
			switch {
			case in == e.global:
				e.trigger(-1, t)
			case e.regionIndex(in.name) >= 0:
				e.trigger(e.regionIndex(in.name), t)
			default:
				e.triggerRack(e.w.rackIndex(in.name), t)
			}
		}
	case evJobArrive:
		for i, j := range w.shardJob {
			if j == ev.a {
				w.active[i] = true
			}
		}
		// Loads of the newly active shards are computed from the next tick; give
		// the first placement their load now.
		e.loads(t)
		e.trigger(-1, t)
	case evJobLeave:
		for i, j := range w.shardJob {
			if j == ev.a {
				w.active[i] = false
				e.host[i], e.region_[i], e.rack_[i] = -1, -1, -1
				e.moveKind[i] = moveNone
				e.moveTag[i]++
				e.backlog[i] = 0
			}
		}
		e.dirty = true
		e.trigger(-1, t)
	case evHotOn, evHotOff:
		f := e.hotF[ev.a]
		for _, i := range e.hotSets[ev.a] {
			if ev.kind == evHotOn {
				w.hot[i] *= f
			} else if f != 0 {
				w.hot[i] /= f
			} else {
				w.hot[i] = 1
			}
		}
		e.loads(t)
	}
	return nil
}

// trigger schedules an event-driven round of region r (-1: the global tier) at t
// unless one is already pending then.
//
// t is rounded up to a tick boundary: the events of a tick are applied together,
// so all the triggers of one tick (several shards landing, say) share one round.
func (e *engine) trigger(r int32, t time.Duration) {
	if tick := e.sc.Tick.D(); t%tick != 0 {
		t += tick - t%tick
	}
	key := [2]int64{int64(r), int64(t)}
	if e.pending[key] {
		return
	}
	e.pending[key] = true
	if r < 0 {
		e.sched.schedule(t, evGlobalNow, 0, 0)
	} else {
		e.sched.schedule(t, evRegionNow, r, 0)
	}
}

// rackKey is rack k's key in e.pending (regions use r ≥ 0, the global tier -1).
func rackKey(k int32) int64 { return -2 - int64(k) }

// triggerRack schedules an event-driven round of rack k at t (rounded up to a
// tick) unless one is pending then; nothing without the rack tier.
func (e *engine) triggerRack(k int32, t time.Duration) {
	if e.rack == nil || k < 0 {
		return
	}
	if tick := e.sc.Tick.D(); t%tick != 0 {
		t += tick - t%tick
	}
	key := [2]int64{rackKey(k), int64(t)}
	if e.pending[key] {
		return
	}
	e.pending[key] = true
	e.sched.schedule(t, evRackNow, k, 0)
}

func (e *engine) triggerHostRack(h int32, t time.Duration) {
	if e.rack != nil {
		e.triggerRack(e.w.hostRack[h], t)
	}
}

func (e *engine) triggerRegionRacks(r int32, t time.Duration) {
	if e.rack != nil {
		for _, k := range e.w.regionRacks[r] {
			e.triggerRack(k, t)
		}
	}
}

// timed wraps a policy to measure its wall time when a wall clock is given.
type timed struct {
	interfaces.Policy
	e *engine
}

func (p timed) Plan(ctx context.Context, v *interfaces.View) (interfaces.Plan, error) {
	if p.e.wall == nil {
		return p.Policy.Plan(ctx, v)
	}
	t0 := p.e.wall()
	plan, err := p.Policy.Plan(ctx, v)
	p.e.solveNS += int64(p.e.wall().Sub(t0))
	return plan, err
}

func (e *engine) roundSeed(instance int32) int64 {
	e.rounds++
	return int64(splitmix(e.seed^splitmix(uint64(instance)+1)^uint64(e.rounds)) >> 1)
}

func (e *engine) shard(i int, c interfaces.ShardConstraints) interfaces.Shard {
	o := i * nres
	return interfaces.Shard{
		ID:          e.w.shardID[i],
		Job:         e.w.jobName[e.w.shardJob[i]],
		Load:        interfaces.Load{CPU: e.cur[o], Mem: e.cur[o+1], Net: e.cur[o+2], Tasks: e.cur[o+3]},
		InputRate:   e.curRate[i],
		StateBytes:  e.w.stateBytes[i],
		LatencySLO:  e.w.jobSLO[e.w.shardJob[i]],
		Constraints: c,
	}
}

// regionCapacity sums the capacity of a region's active hosts, as the region
// reports it.
func (e *engine) regionCapacity(r int32) (interfaces.Load, int) {
	return e.hostsCapacity(e.w.regionHosts[r])
}

// seenState is a host's state as its tier instance knows it: a failed host its
// instance has not declared failed yet (silent, within its grace, or held by the
// mass-failure guard) is still active there.
func (e *engine) seenState(h int32) interfaces.ChildState {
	if st := e.w.hostState[h]; st != interfaces.ChildFailed || e.hostDeclared[h] {
		return st
	}
	return interfaces.ChildActive
}

// hostsCapacity sums the capacity of the hosts among hosts that their tier
// instance knows as active, and counts the live ones (active or draining), as
// that instance reports them to its parent.
func (e *engine) hostsCapacity(hosts []int32) (interfaces.Load, int) {
	var c [nres]float64
	live := 0
	for _, h := range hosts {
		if st := e.seenState(h); st != interfaces.ChildActive {
			if st == interfaces.ChildDraining {
				live++
			}
			continue
		}
		live++
		for q := 0; q < nres; q++ {
			c[q] += e.w.hostCap[int(h)*nres+q]
		}
	}
	return interfaces.Load{CPU: c[0], Mem: c[1], Net: c[2], Tasks: c[3]}, live
}

// globalView is the global tier's picture: regions as children (capacity = sum
// of their active hosts), every active shard, its region, and region reports.
func (e *engine) globalView(t time.Duration) (*interfaces.View, map[interfaces.ChildID]time.Time) {
	w := e.w
	var silent map[interfaces.ChildID]time.Time
	v := &interfaces.View{Tier: interfaces.TierGlobal, Instance: interfaces.TierGlobal, Now: Epoch.Add(t), Seed: e.roundSeed(-1), Reports: map[interfaces.ChildID]interfaces.Report{}}
	used := e.groupShards(v, func(int) bool { return true }, w.gcons, e.region_, w.regionName, e.epochR, moveRegion, 0, len(w.regionName))
	hintShards := e.regionShards()
	for r, name := range w.regionName {
		capacity, live := e.regionCapacity(int32(r))
		st := interfaces.ChildActive
		if live == 0 {
			st = interfaces.ChildFailed
		} else if capacity.IsZero() {
			st = interfaces.ChildDraining
		}
		if capacity.IsZero() {
			// A lost or fully drained region keeps its nominal capacity in the
			// view (a child's capacity is never zero); its state says it takes
			// nothing.
			capacity = e.nominalCapacity(int32(r))
		}
		id := interfaces.ChildID(name)
		if e.regionLost[r] {
			if e.regionDeclared[r] {
				st = interfaces.ChildFailed
			} else {
				// Active until declared failed; silent once its lease expired.
				st = interfaces.ChildActive
				if exp := e.regionLostAt[r] + e.sc.Model.DetectAfter.D(); t >= exp {
					if silent == nil {
						silent = map[interfaces.ChildID]time.Time{}
					}
					silent[id] = Epoch.Add(exp)
				}
			}
		}
		v.Children = append(v.Children, interfaces.Child{ID: id, Tier: interfaces.TierRegion, Capacity: capacity, Labels: map[string]string{"region": name}, State: st})
		if e.regionLost[r] {
			continue // a lost region sends no report
		}
		rep := e.groupReport(t, id, capacity, used[r], w.regionHosts[r])
		var mine []int32
		if hintShards != nil {
			mine = hintShards[r]
		}
		rep.Hints = e.regionHints(int32(r), rep, mine)
		v.Reports[id] = rep
	}
	v.Constraints = e.constraints(interfaces.TierGlobal, v)
	return v, silent
}

// groupShards fills v's shards, assignments and in-flight moves: the active
// shards for which member is true, with constraints cons, on child child[i] (an
// index into names; -1 unplaced) at epoch epoch[i], in flight to moveTo[i] when
// their move kind is kind. For a tier whose children are groups of hosts
// (regions or racks; names[first] its first child) it returns each of its
// children's used load, counting a moving shard at its destination; with
// children 0 (hosts, which report their own) nothing.
func (e *engine) groupShards(v *interfaces.View, member func(i int) bool, cons []interfaces.ShardConstraints, child []int32, names []string, epoch []interfaces.Epoch, kind uint8, first int32, children int) [][nres]float64 {
	w := e.w
	var used [][nres]float64
	if children > 0 {
		used = make([][nres]float64, children)
	}
	n := 0
	for i, act := range w.active {
		if act && member(i) {
			n++
		}
	}
	v.Shards = make([]interfaces.Shard, 0, n)
	v.Assignments = make([]interfaces.Assignment, 0, n)
	for i, act := range w.active {
		if !act || !member(i) {
			continue
		}
		v.Shards = append(v.Shards, e.shard(i, cons[i]))
		k := child[i]
		if k < 0 {
			continue
		}
		v.Assignments = append(v.Assignments, interfaces.Assignment{Shard: w.shardID[i], Child: interfaces.ChildID(names[k]), Epoch: epoch[i]})
		if e.moveKind[i] == kind {
			v.InFlight = append(v.InFlight, interfaces.Move{Shard: w.shardID[i], From: interfaces.ChildID(names[k]), To: interfaces.ChildID(names[e.moveTo[i]]), Epoch: epoch[i], Goal: "in_flight"})
			k = e.moveTo[i]
		}
		if used != nil {
			for q := 0; q < nres; q++ {
				used[k-first][q] += e.cur[i*nres+q]
			}
		}
	}
	return used
}

// groupReport is the report of a child that is a group of hosts: its capacity,
// the load used on it, its headroom and the worst p99 latency of its live hosts.
func (e *engine) groupReport(t time.Duration, id interfaces.ChildID, capacity interfaces.Load, used [nres]float64, hosts []int32) interfaces.Report {
	u := interfaces.Load{CPU: used[0], Mem: used[1], Net: used[2], Tasks: used[3]}
	var lat float64
	for _, h := range hosts {
		if e.w.hostState[h] != interfaces.ChildFailed && e.hostLat[h] > lat {
			lat = e.hostLat[h]
		}
	}
	hs := make([]interfaces.Child, 0, len(hosts))
	for _, h := range hosts {
		o := int(h) * nres
		hs = append(hs, interfaces.Child{Capacity: interfaces.Load{CPU: e.w.hostCap[o], Mem: e.w.hostCap[o+1], Net: e.w.hostCap[o+2], Tasks: e.w.hostCap[o+3]}, State: e.seenState(h)})
	}
	shape := interfaces.ShapeOf(hs)
	return interfaces.Report{Child: id, Capacity: capacity, Used: u, Headroom: capacity.Sub(u).Max(interfaces.Load{}),
		LatencyP99: time.Duration(lat * float64(time.Millisecond)), Epoch: e.reportSeq(t), Shape: &shape}
}

// reportSeq is the sequence number of a report measured at t: one per tick, so
// the controller smooths one sample per tick however many rounds run in it.
func (e *engine) reportSeq(t time.Duration) uint64 {
	return uint64(t/e.sc.Tick.D()) + 1
}

// regionView is region r's picture: its hosts (or, in a rack chain, its racks)
// as children and the shards the global tier has given it (not those leaving it).
func (e *engine) regionView(t time.Duration, r int32) (*interfaces.View, map[interfaces.ChildID]time.Time) {
	if e.rack != nil {
		return e.racksView(t, r), nil
	}
	return e.hostsView(t, interfaces.TierRegion, e.w.regionName[r], e.roundSeed(r), e.w.regionHosts[r], func(i int) bool {
		return e.region_[i] == r && e.moveKind[i] != moveRegion
	})
}

// rackView is rack k's picture: its hosts as children and the shards its region
// has given it (not those leaving it or its region).
func (e *engine) rackView(t time.Duration, k int32) (*interfaces.View, map[interfaces.ChildID]time.Time) {
	return e.hostsView(t, TierRack, e.w.rackName[k], e.roundSeed(int32(len(e.w.regionName))+k), e.w.rackHosts[k], func(i int) bool {
		return e.rack_[i] == k && e.moveKind[i] != moveRegion && e.moveKind[i] != moveRack
	})
}

// racksView is region r's picture in a rack chain: its racks as children
// (capacity = their active hosts, reports aggregated from their hosts and the
// shards the region has given them) and the shards the global tier gave it.
func (e *engine) racksView(t time.Duration, r int32) *interfaces.View {
	w := e.w
	v := &interfaces.View{Tier: interfaces.TierRegion, Instance: w.regionName[r], Now: Epoch.Add(t), Seed: e.roundSeed(r), Reports: map[interfaces.ChildID]interfaces.Report{}}
	racks := w.regionRacks[r]
	member := func(i int) bool { return e.region_[i] == r && e.moveKind[i] != moveRegion }
	// A region's racks are consecutive: rack k is its child k - racks[0].
	used := e.groupShards(v, member, e.kcons, e.rack_, w.rackName, e.epochK, moveRack, racks[0], len(racks))
	hintShards := e.rackShards(r) // nil unless collaborative
	for x, k := range racks {
		hosts := w.rackHosts[k]
		capacity, live := e.hostsCapacity(hosts)
		st := interfaces.ChildActive
		if live == 0 {
			st = interfaces.ChildFailed
		} else if capacity.IsZero() {
			st = interfaces.ChildDraining
		}
		if capacity.IsZero() {
			capacity = e.nominalHostsCapacity(hosts)
			if capacity.IsZero() { // a rack with no hosts at all takes nothing
				capacity = e.nominalCapacity(r)
				st = interfaces.ChildFailed
			}
		}
		id := interfaces.ChildID(w.rackName[k])
		v.Children = append(v.Children, interfaces.Child{ID: id, Tier: TierRack, Capacity: capacity, Labels: map[string]string{"region": w.regionName[r], TierRack: w.rackName[k]}, State: st})
		rep := e.groupReport(t, id, capacity, used[x], hosts)
		if hintShards != nil {
			rep.Hints = e.rackHints(k, rep, hintShards[x])
		}
		v.Reports[id] = rep
	}
	v.Constraints = e.constraints(interfaces.TierRegion, v)
	return v
}

// hostsView is the picture of a tier instance whose children are hosts: the
// shards for which member is true, with their hosts as assignments. A failed
// host the instance has not declared failed is still active in the view and
// sends no report; once its lease has expired (detect_after after the failure)
// it is silent since then: the second result, for the controller.
func (e *engine) hostsView(t time.Duration, tier, instance string, seed int64, hosts []int32, member func(i int) bool) (*interfaces.View, map[interfaces.ChildID]time.Time) {
	w := e.w
	var silent map[interfaces.ChildID]time.Time
	v := &interfaces.View{Tier: tier, Instance: instance, Now: Epoch.Add(t), Seed: seed, Reports: map[interfaces.ChildID]interfaces.Report{}}
	for _, h := range hosts {
		id := interfaces.ChildID(w.hostName[h])
		o := int(h) * nres
		capacity := interfaces.Load{CPU: w.hostCap[o], Mem: w.hostCap[o+1], Net: w.hostCap[o+2], Tasks: w.hostCap[o+3]}
		v.Children = append(v.Children, interfaces.Child{ID: id, Tier: interfaces.TierHost, Capacity: capacity, Labels: w.hostLabels[h], State: e.seenState(h)})
		if w.hostState[h] == interfaces.ChildFailed {
			if exp := e.failAt[h] + e.sc.Model.DetectAfter.D(); !e.hostDeclared[h] && t >= exp {
				if silent == nil {
					silent = map[interfaces.ChildID]time.Time{}
				}
				silent[id] = Epoch.Add(exp)
			}
			continue // a failed host sends no report
		}
		u := interfaces.Load{CPU: e.hostLoad[o], Mem: e.hostLoad[o+1], Net: e.hostLoad[o+2], Tasks: e.hostLoad[o+3]}
		v.Reports[id] = interfaces.Report{Child: id, Epoch: e.reportSeq(t), Capacity: capacity, Used: u, Headroom: capacity.Sub(u).Max(interfaces.Load{}), LatencyP99: time.Duration(e.hostLat[h] * float64(time.Millisecond))}
	}
	if e.shardRates {
		e.shardReports(v, member)
	}
	e.groupShards(v, member, w.rcons, e.host, w.hostName, e.epochH, moveHost, 0, 0) // hosts report their own load
	v.Constraints = e.constraints(interfaces.TierRegion, v)
	return v, silent
}

func (e *engine) globalRound(ctx context.Context, t time.Duration) error {
	v, silent := e.globalView(t)
	return e.round(ctx, t, e.global, v, silent, func(ms []interfaces.Move) []interfaces.Move { return e.applyRegionMoves(ms, t) }, func(id interfaces.ChildID) {
		if r := e.regionIndex(string(id)); r >= 0 {
			e.regionDeclared[r] = true
		}
	})
}

func (e *engine) regionRound(ctx context.Context, t time.Duration, r int32) error {
	if e.regionLost[r] {
		return nil // the region's tier instance is down with it
	}
	v, silent := e.regionView(t, r)
	if len(v.Shards) == 0 && len(silent) == 0 {
		return e.viewError(v, t)
	}
	apply := func(ms []interfaces.Move) []interfaces.Move { return e.applyHostMoves(ms, t) }
	if e.rack != nil {
		apply = func(ms []interfaces.Move) []interfaces.Move { return e.applyRackMoves(ms, t) }
	}
	return e.round(ctx, t, e.regions[r], v, silent, apply, func(id interfaces.ChildID) {
		if h := e.w.hostIndex(string(id)); h >= 0 {
			e.hostDeclared[h] = true
			e.trigger(-1, t) // the region reports less capacity
		}
	})
}

// rackRound runs rack k's control round over its hosts.
func (e *engine) rackRound(ctx context.Context, t time.Duration, k int32) error {
	if e.regionLost[e.w.rackRegion[k]] {
		return nil
	}
	v, silent := e.rackView(t, k)
	if len(v.Shards) == 0 && len(silent) == 0 {
		return e.viewError(v, t)
	}
	return e.round(ctx, t, e.racks[k], v, silent, func(ms []interfaces.Move) []interfaces.Move { return e.applyHostMoves(ms, t) }, func(id interfaces.ChildID) {
		if h := e.w.hostIndex(string(id)); h >= 0 {
			e.hostDeclared[h] = true
			e.trigger(e.w.rackRegion[k], t) // the rack reports less capacity
		}
	})
}

// viewError is the error met building view v at t, if any (engine.viewErr).
func (e *engine) viewError(v *interfaces.View, t time.Duration) error {
	if e.viewErr == nil {
		return nil
	}
	return fmt.Errorf("sim: building the view of %s %s at %v: %w", v.Tier, v.Instance, t, e.viewErr)
}

// round runs one control round of tier instance in — the daemons' round,
// tiercore.Round: controller, control policies, solve, screen, admit, verify
// — on view v, commits the verified moves with apply (which returns those it
// applied), marks the children it declares failed, and accounts for it.
//
// The simulator models no process failures and no job resizes: the
// quarantines and resizes the control policies ask for are not carried out
// (their findings are in the round's outcome). The view is the simulator's
// state, so the moves are screened and verified against it.
func (e *engine) round(ctx context.Context, t time.Duration, in *tierInstance, v *interfaces.View, silent map[interfaces.ChildID]time.Time, apply func([]interfaces.Move) []interfaces.Move, declare func(interfaces.ChildID)) error {
	if err := e.viewError(v, t); err != nil {
		return err
	}
	p, err := in.round.Start(tiercore.RoundInput{Now: v.Now, View: v, Silent: silent, AckMassFailure: in.ack})
	if err != nil {
		return err // it names the instance and the stage
	}
	if err := p.PoliciesErr(); err != nil {
		return err
	}
	cmds := p.Commands()
	res := make([]tiercore.CommandResult, len(cmds))
	for i, c := range cmds {
		res[i].Done = c.Kind == tiercore.DeclareFailed // noted below, after the moves
	}
	p.Carried(res)
	p.Solve(ctx)
	var batch tiercore.Batch
	if len(p.Plan().Moves) > 0 {
		st, err := tiercore.ViewState(p.SolveView())
		if err != nil {
			return fmt.Errorf("verifying the plan of %s %s: %w", v.Tier, v.Instance, err)
		}
		batch = p.Verify(st, nil)
	}
	var ops []tiercore.OpResult
	if len(batch.Moves) > 0 {
		ops = appliedOps(batch.Moves, apply(batch.Moves))
	}
	out := p.End(ops, nil)
	if out.ObserveErr != nil {
		return out.ObserveErr
	}
	dec := &out.Decision
	// The declared children are marked after the moves (the views built from
	// then on see them failed; this round's already did), so that the
	// rounds they trigger are scheduled after the moves'.
	for _, id := range dec.DeclareFailed {
		declare(id)
	}
	if in.ack && dec.Record.Silent == 0 {
		in.ack = false // the acknowledged failure is over
	}
	in.rounds++
	if dec.Solve() {
		e.sum.Rounds++
	}
	if out.SolveErr != nil {
		e.sum.SolveFailures++
	}
	e.sum.Rejected += len(out.Refused) + len(out.Rejected)
	e.noteRound(in, t, dec)
	return nil
}

// errBusy is the commit's result for a move apply did not carry out (its
// shard busy with a move below).
var errBusy = errors.New("sim: shard busy with a move below; the next round retries")

// appliedOps is the commit's results for moves when apply carried out
// applied, a subsequence of moves in order.
func appliedOps(moves, applied []interfaces.Move) []tiercore.OpResult {
	ops := make([]tiercore.OpResult, len(moves))
	j := 0
	for i, m := range moves {
		if j < len(applied) && applied[j].Shard == m.Shard {
			j++
			continue
		}
		ops[i].Err = errBusy
	}
	return ops
}

// applyRegionMoves applies the global tier's accepted moves: a first placement
// gives the shard to the region (whose round places it); a relocation moves its
// state between regions. It returns the moves applied.
func (e *engine) applyRegionMoves(ms []interfaces.Move, t time.Duration) []interfaces.Move {
	idx := e.shardIndex()
	applied := ms[:0:0]
	for _, m := range ms {
		i := idx[m.Shard]
		to := e.regionIndex(string(m.To))
		if e.moveKind[i] != moveNone {
			e.sum.Rejected++ // busy with a host move; the next round retries
			continue
		}
		applied = append(applied, m)
		e.epochR[i]++
		if m.From == "" {
			e.region_[i] = to
			e.rack_[i] = -1
			e.host[i] = -1
			e.sum.Placements++
			e.trigger(to, t)
			continue
		}
		e.left(i, moveRegion, e.region_[i], to, t) // verified: m.From is its owner
		e.startMove(i, moveRegion, to, t, e.moveTime(i, e.sc.Model.CrossRegionBandwidth))
	}
	return applied
}

// applyRackMoves applies a region's accepted moves onto its racks: a first
// placement gives the shard to the rack (whose round places it on a host); a
// relocation moves its state to a host of the new rack, after which that rack
// places it. It returns the moves applied.
func (e *engine) applyRackMoves(ms []interfaces.Move, t time.Duration) []interfaces.Move {
	idx := e.shardIndex()
	applied := ms[:0:0]
	for _, m := range ms {
		i := idx[m.Shard]
		k := e.w.rackIndex(string(m.To))
		if e.moveKind[i] != moveNone {
			e.sum.Rejected++ // busy with a host move; the next round retries
			continue
		}
		applied = append(applied, m)
		e.epochK[i]++
		if m.From == "" {
			e.rack_[i] = k
			e.host[i] = -1
			e.sum.Placements++
			e.dirty = true
			e.triggerRack(k, t)
			continue
		}
		e.left(i, moveRack, e.rack_[i], k, t)
		e.startMove(i, moveRack, k, t, e.moveTime(i, e.sc.Model.MoveBandwidth))
	}
	return applied
}

// applyHostMoves applies the accepted moves of an instance whose children are
// hosts; all of them apply.
func (e *engine) applyHostMoves(ms []interfaces.Move, t time.Duration) []interfaces.Move {
	idx := e.shardIndex()
	for _, m := range ms {
		i := idx[m.Shard]
		h := e.w.hostIndex(string(m.To))
		e.epochH[i]++
		if m.From == "" {
			e.host[i] = h
			e.sum.Placements++
			e.dirty = true
			continue
		}
		e.left(i, moveHost, e.host[i], h, t)
		e.startMove(i, moveHost, h, t, e.moveTime(i, e.sc.Model.MoveBandwidth))
	}
	return ms
}

func (e *engine) moveTime(i int32, bw Quantity) time.Duration {
	return e.sc.Model.MoveOverhead.D() + time.Duration(float64(e.w.stateBytes[i])/float64(bw)*float64(time.Second))
}

// startMove puts shard i in flight to child `to` and schedules its landing.
func (e *engine) startMove(i int32, kind uint8, to int32, t, d time.Duration) {
	e.moveKind[i] = kind
	e.moveTo[i] = to
	e.moveTag[i]++
	e.sched.schedule(t+d, evLand, i, int32(e.moveTag[i]))
	e.dirty = true
	e.sum.Moves++
	e.sum.BytesMoved += e.w.stateBytes[i]
	e.ivMoves++
	e.ivBytes += e.w.stateBytes[i]
	for k := range e.asserts {
		ar := &e.asserts[k]
		a := &e.sc.Assertions[ar.Index]
		if a.Kind == AssertSteady && t >= a.From.D() && t < a.To.D() {
			if ar.Passed {
				ar.Passed = false
				ar.At = t.Seconds()
			}
			ar.Value++
		}
		if a.Kind == AssertGuard && t >= a.From.D() && t < a.To.D() {
			ar.Value++
			if ar.Value > a.Max && ar.At == 0 {
				ar.At = t.Seconds()
			}
		}
	}
}

// shardIndex maps shard IDs to dense indexes; built once, the shard set is fixed.
func (e *engine) shardIndex() map[interfaces.ShardID]int32 {
	if e.idx == nil {
		e.idx = make(map[interfaces.ShardID]int32, len(e.w.shardID))
		for i, id := range e.w.shardID {
			e.idx[id] = int32(i)
		}
	}
	return e.idx
}

// nominalCapacity sums the capacity of every host of a region, whatever its state.
func (e *engine) nominalCapacity(r int32) interfaces.Load {
	return e.nominalHostsCapacity(e.w.regionHosts[r])
}

// nominalHostsCapacity sums the capacity of hosts, whatever their state.
func (e *engine) nominalHostsCapacity(hosts []int32) interfaces.Load {
	var c [nres]float64
	for _, h := range hosts {
		for q := 0; q < nres; q++ {
			c[q] += e.w.hostCap[int(h)*nres+q]
		}
	}
	return interfaces.Load{CPU: c[0], Mem: c[1], Net: c[2], Tasks: c[3]}
}

// tierInstance is one tier instance of a policy run — the global tier, a
// region or a rack — with its policy and its own controller (tiers/control),
// created at the start of the run (and again when its region comes back: a new
// leader). Its controller is driven with the run's virtual time only.
type tierInstance struct {
	name   string
	round  *tiercore.Round // its controller, control policies and policy
	ack    bool            // an operator acknowledged a mass failure: passed on until no child is silent
	rounds int             // rounds run
	// open are the alerts in force after the last round: key → index into
	// Summary.Alerts (-1 when it was dropped).
	open map[string]int
}

// newInstance returns a fresh tier instance: its controller and control
// policies (both validated with the scenario, so an error here is a bug,
// reported as one rather than a panic).
func (e *engine) newInstance(name string, pol interfaces.Policy) (*tierInstance, error) {
	ctl, err := control.New(e.cfg)
	if err != nil {
		return nil, fmt.Errorf("tier instance %s: controller: %w", name, err)
	}
	pols, err := e.spec.NewControlPolicies()
	if err != nil {
		return nil, fmt.Errorf("tier instance %s: control policies: %w", name, err)
	}
	round, err := tiercore.NewRound(tiercore.RoundConfig{Controller: ctl, Policies: pols, Policy: timed{pol, e}, ApplyResizes: name == interfaces.TierGlobal})
	if err != nil {
		return nil, fmt.Errorf("tier instance %s: %w", name, err)
	}
	return &tierInstance{name: name, round: round, open: map[string]int{}}, nil
}

// newInstances creates the run's tier instances.
func (e *engine) newInstances() error {
	if err := e.cfg.Validate(); err != nil {
		return err
	}
	w := e.w
	var err error
	if e.global, err = e.newInstance(interfaces.TierGlobal, e.gpol); err != nil {
		return err
	}
	e.regions = make([]*tierInstance, len(w.regionName))
	for r, name := range w.regionName {
		if e.regions[r], err = e.newInstance(name, e.rpol); err != nil {
			return err
		}
	}
	if e.rack != nil {
		e.racks = make([]*tierInstance, len(w.rackName))
		for k, name := range w.rackName {
			if e.racks[k], err = e.newInstance(name, e.rack); err != nil {
				return err
			}
		}
	}
	e.regionLost = make([]bool, len(w.regionName))
	e.regionLostAt = make([]time.Duration, len(w.regionName))
	e.regionDeclared = make([]bool, len(w.regionName))
	return nil
}

// regionIndex returns the index of the region named name, or -1 (unlike
// world.region, it never adds one).
func (e *engine) regionIndex(name string) int32 {
	for i, n := range e.w.regionName {
		if n == name {
			return int32(i)
		}
	}
	return -1
}

// instance returns the tier instance named name (global, a region or a rack of
// the policy's chain), or nil.
func (e *engine) instance(name string) *tierInstance {
	if name == interfaces.TierGlobal {
		return e.global
	}
	if r := e.regionIndex(name); r >= 0 {
		return e.regions[r]
	}
	if e.racks != nil {
		if k := e.w.rackIndex(name); k >= 0 {
			return e.racks[k]
		}
	}
	return nil
}

// alertKey identifies an alert across rounds: its code, and for a straggler
// the child it names.
func alertKey(a control.Alert) string {
	if a.Code == control.AlertStraggler {
		if f := strings.Fields(a.Message); len(f) > 0 {
			return a.Code + " " + f[0]
		}
	}
	return a.Code
}

// closeAlerts ends the alerts in force at instance in at t.
func (e *engine) closeAlerts(in *tierInstance, t time.Duration) {
	for k, i := range in.open {
		if i >= 0 {
			e.sum.Alerts[i].Until = t.Seconds()
		}
		delete(in.open, k)
	}
}

// noteRound records a round's alerts (opening and closing Summary.Alerts
// entries) and feeds the assertions that follow rounds (converge, guard).
func (e *engine) noteRound(in *tierInstance, t time.Duration, dec *control.Decision) {
	now := map[string]bool{}
	for _, a := range dec.Alerts {
		k := alertKey(a)
		now[k] = true
		if _, ok := in.open[k]; ok {
			continue
		}
		if len(e.sum.Alerts) >= maxAlerts {
			e.sum.AlertsDropped++
			in.open[k] = -1
			continue
		}
		in.open[k] = len(e.sum.Alerts)
		e.sum.Alerts = append(e.sum.Alerts, Alert{At: t.Seconds(), Instance: in.name, Code: a.Code, Message: a.Message})
	}
	for k, i := range in.open {
		if !now[k] {
			if i >= 0 {
				e.sum.Alerts[i].Until = t.Seconds()
			}
			delete(in.open, k)
		}
	}
	massAlert := false
	for _, a := range dec.Alerts {
		if a.Code == control.AlertMassFailure {
			massAlert = true
		}
	}
	for k := range e.asserts {
		a := &e.sc.Assertions[e.asserts[k].Index]
		tr := &e.track[k]
		switch a.Kind {
		case AssertConverge:
			if t >= a.From.D() && !tr.done {
				if tr.rounds == nil {
					tr.rounds, tr.acted = map[*tierInstance]int{}, map[*tierInstance]bool{}
				}
				tr.rounds[in]++
				if dec.Solve() {
					tr.acted[in] = true
				}
			}
		case AssertGuard:
			if !tr.guarded && dec.Record.Guard && massAlert && t >= a.From.D() && t <= a.From.D()+a.Within.D() {
				tr.guarded, tr.guardAt, tr.guardBy = true, t, in.name
			}
		}
	}
}

// shardReports adds to each host report of v the shards the host runs (those
// of member) with their measured processing rate in the last tick and their
// input rate, as host agents report them: the control policies (straggler)
// read them.
func (e *engine) shardReports(v *interfaces.View, member func(i int) bool) {
	w := e.w
	for i, act := range w.active {
		if !act || !member(i) || e.host[i] < 0 || e.moveKind[i] != moveNone {
			continue
		}
		id := interfaces.ChildID(w.hostName[e.host[i]])
		r, ok := v.Reports[id]
		if !ok {
			continue // a failed host sends no report
		}
		o := i * nres
		r.Shards = append(r.Shards, interfaces.ShardLoad{Shard: w.shardID[i], Load: interfaces.Load{CPU: e.cur[o], Mem: e.cur[o+1], Net: e.cur[o+2], Tasks: e.cur[o+3]}, Rate: e.procRate[i], InputRate: e.curRate[i]})
		v.Reports[id] = r
	}
}
