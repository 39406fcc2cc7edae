package sim

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/strata-sched/strata/interfaces"
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
		w.hostState[ev.a] = interfaces.ChildFailed
		e.dirty = true
		e.trigger(w.hostRegion[ev.a], t+detect)
		e.trigger(-1, t+detect)
		e.triggerHostRack(ev.a, t+detect)
	case evHostRecover:
		w.hostState[ev.a] = interfaces.ChildActive
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
		for _, h := range w.regionHosts[ev.a] {
			w.hostState[h] = interfaces.ChildFailed
		}
		e.dirty = true
		e.trigger(-1, t+detect)
		e.trigger(ev.a, t+detect)
		e.triggerRegionRacks(ev.a, t+detect)
	case evRegionBack:
		for _, h := range w.regionHosts[ev.a] {
			w.hostState[h] = interfaces.ChildActive
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

func (e *engine) stepConfig(shards int) StepConfig {
	c := StepConfig{Trigger: e.sc.Model.Trigger, Target: e.sc.Model.Target, Floor: e.sc.Model.Floor}
	if b := e.sc.Model.MoveBudget; b > 0 {
		c.MoveBudget = max(1, int(math.Ceil(b*float64(shards))))
	}
	return c
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

// regionCapacity sums the capacity of a region's active hosts.
func (e *engine) regionCapacity(r int32) (interfaces.Load, int) {
	return e.hostsCapacity(e.w.regionHosts[r])
}

// hostsCapacity sums the capacity of the active hosts among hosts and counts the
// live ones (active or draining).
func (e *engine) hostsCapacity(hosts []int32) (interfaces.Load, int) {
	var c [nres]float64
	live := 0
	for _, h := range hosts {
		if e.w.hostState[h] != interfaces.ChildActive {
			if e.w.hostState[h] == interfaces.ChildDraining {
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
func (e *engine) globalView(t time.Duration) *interfaces.View {
	w := e.w
	v := &interfaces.View{Tier: interfaces.TierGlobal, Instance: interfaces.TierGlobal, Now: Epoch.Add(t), Seed: e.roundSeed(-1), Reports: map[interfaces.ChildID]interfaces.Report{}}
	used := make([][nres]float64, len(w.regionName))
	n := 0
	for _, act := range w.active {
		if act {
			n++
		}
	}
	v.Shards = make([]interfaces.Shard, 0, n)
	v.Assignments = make([]interfaces.Assignment, 0, n)
	for i, act := range w.active {
		if !act {
			continue
		}
		v.Shards = append(v.Shards, e.shard(i, w.gcons[i]))
		r := e.region_[i]
		if r < 0 {
			continue
		}
		v.Assignments = append(v.Assignments, interfaces.Assignment{Shard: w.shardID[i], Child: interfaces.ChildID(w.regionName[r]), Epoch: e.epochR[i]})
		if e.moveKind[i] == moveRegion {
			v.InFlight = append(v.InFlight, interfaces.Move{Shard: w.shardID[i], From: interfaces.ChildID(w.regionName[r]), To: interfaces.ChildID(w.regionName[e.moveTo[i]]), Epoch: e.epochR[i], Goal: "in_flight"})
			r = e.moveTo[i]
		}
		for q := 0; q < nres; q++ {
			used[r][q] += e.cur[i*nres+q]
		}
	}
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
		v.Children = append(v.Children, interfaces.Child{ID: id, Tier: interfaces.TierRegion, Capacity: capacity, Labels: map[string]string{"region": name}, State: st})
		u := interfaces.Load{CPU: used[r][0], Mem: used[r][1], Net: used[r][2], Tasks: used[r][3]}
		rep := interfaces.Report{Child: id, Capacity: capacity, Used: u, Headroom: capacity.Sub(u).Max(interfaces.Load{})}
		var lat float64
		for _, h := range w.regionHosts[r] {
			if w.hostState[h] != interfaces.ChildFailed && e.hostLat[h] > lat {
				lat = e.hostLat[h]
			}
		}
		rep.LatencyP99 = time.Duration(lat * float64(time.Millisecond))
		rep.Hints = e.regionHints(int32(r), rep)
		v.Reports[id] = rep
	}
	v.Constraints = e.constraints(interfaces.TierGlobal, v)
	return v
}

// regionView is region r's picture: its hosts (or, in a rack chain, its racks)
// as children and the shards the global tier has given it (not those leaving it).
func (e *engine) regionView(t time.Duration, r int32) *interfaces.View {
	if e.rack != nil {
		return e.racksView(t, r)
	}
	return e.hostsView(t, interfaces.TierRegion, e.w.regionName[r], e.roundSeed(r), e.w.regionHosts[r], func(i int) bool {
		return e.region_[i] == r && e.moveKind[i] != moveRegion
	})
}

// rackView is rack k's picture: its hosts as children and the shards its region
// has given it (not those leaving it or its region).
func (e *engine) rackView(t time.Duration, k int32) *interfaces.View {
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
	used := make([][nres]float64, len(racks))
	local := func(k int32) int { return int(k) - int(racks[0]) } // a region's racks are consecutive
	n := 0
	for i, act := range w.active {
		if act && e.region_[i] == r && e.moveKind[i] != moveRegion {
			n++
		}
	}
	v.Shards = make([]interfaces.Shard, 0, n)
	v.Assignments = make([]interfaces.Assignment, 0, n)
	for i, act := range w.active {
		if !act || e.region_[i] != r || e.moveKind[i] == moveRegion {
			continue
		}
		v.Shards = append(v.Shards, e.shard(i, e.kcons[i]))
		k := e.rack_[i]
		if k < 0 {
			continue
		}
		v.Assignments = append(v.Assignments, interfaces.Assignment{Shard: w.shardID[i], Child: interfaces.ChildID(w.rackName[k]), Epoch: e.epochK[i]})
		if e.moveKind[i] == moveRack {
			v.InFlight = append(v.InFlight, interfaces.Move{Shard: w.shardID[i], From: interfaces.ChildID(w.rackName[k]), To: interfaces.ChildID(w.rackName[e.moveTo[i]]), Epoch: e.epochK[i], Goal: "in_flight"})
			k = e.moveTo[i]
		}
		for q := 0; q < nres; q++ {
			used[local(k)][q] += e.cur[i*nres+q]
		}
	}
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
		u := interfaces.Load{CPU: used[x][0], Mem: used[x][1], Net: used[x][2], Tasks: used[x][3]}
		rep := interfaces.Report{Child: id, Capacity: capacity, Used: u, Headroom: capacity.Sub(u).Max(interfaces.Load{})}
		var lat float64
		for _, h := range hosts {
			if w.hostState[h] != interfaces.ChildFailed && e.hostLat[h] > lat {
				lat = e.hostLat[h]
			}
		}
		rep.LatencyP99 = time.Duration(lat * float64(time.Millisecond))
		v.Reports[id] = rep
	}
	v.Constraints = e.constraints(interfaces.TierRegion, v)
	return v
}

// hostsView is the picture of a tier instance whose children are hosts: the
// shards for which member is true, with their hosts as assignments.
func (e *engine) hostsView(t time.Duration, tier, instance string, seed int64, hosts []int32, member func(i int) bool) *interfaces.View {
	w := e.w
	v := &interfaces.View{Tier: tier, Instance: instance, Now: Epoch.Add(t), Seed: seed, Reports: map[interfaces.ChildID]interfaces.Report{}}
	for _, h := range hosts {
		id := interfaces.ChildID(w.hostName[h])
		o := int(h) * nres
		capacity := interfaces.Load{CPU: w.hostCap[o], Mem: w.hostCap[o+1], Net: w.hostCap[o+2], Tasks: w.hostCap[o+3]}
		v.Children = append(v.Children, interfaces.Child{ID: id, Tier: interfaces.TierHost, Capacity: capacity, Labels: w.hostLabels[h], State: w.hostState[h]})
		u := interfaces.Load{CPU: e.hostLoad[o], Mem: e.hostLoad[o+1], Net: e.hostLoad[o+2], Tasks: e.hostLoad[o+3]}
		v.Reports[id] = interfaces.Report{Child: id, Capacity: capacity, Used: u, Headroom: capacity.Sub(u).Max(interfaces.Load{}), LatencyP99: time.Duration(e.hostLat[h] * float64(time.Millisecond))}
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
		v.Shards = append(v.Shards, e.shard(i, w.rcons[i]))
		h := e.host[i]
		if h < 0 {
			continue
		}
		v.Assignments = append(v.Assignments, interfaces.Assignment{Shard: w.shardID[i], Child: interfaces.ChildID(w.hostName[h]), Epoch: e.epochH[i]})
		if e.moveKind[i] == moveHost {
			v.InFlight = append(v.InFlight, interfaces.Move{Shard: w.shardID[i], From: interfaces.ChildID(w.hostName[h]), To: interfaces.ChildID(w.hostName[e.moveTo[i]]), Epoch: e.epochH[i], Goal: "in_flight"})
		}
	}
	v.Constraints = e.constraints(interfaces.TierRegion, v)
	return v
}

func (e *engine) globalRound(ctx context.Context, t time.Duration) error {
	v := e.globalView(t)
	res, err := ControlStep(ctx, timed{e.global, e}, v, e.stepConfig(len(v.Shards)))
	if err != nil {
		return err
	}
	e.account(res)
	w := e.w
	idx := e.shardIndex()
	for _, m := range res.Accepted {
		i := idx[m.Shard]
		to := w.region(string(m.To))
		if e.moveKind[i] != moveNone {
			e.sum.Rejected++ // busy with a host move; the next round retries
			continue
		}
		e.epochR[i]++
		if m.From == "" {
			e.region_[i] = to
			e.rack_[i] = -1
			e.host[i] = -1
			e.sum.Placements++
			e.trigger(to, t)
			continue
		}
		d := e.moveTime(i, e.sc.Model.CrossRegionBandwidth)
		e.startMove(i, moveRegion, to, t, d)
	}
	return nil
}

func (e *engine) regionRound(ctx context.Context, t time.Duration, r int32) error {
	v := e.regionView(t, r)
	if len(v.Shards) == 0 {
		return nil
	}
	res, err := ControlStep(ctx, timed{e.region, e}, v, e.stepConfig(len(v.Shards)))
	if err != nil {
		return err
	}
	e.account(res)
	if e.rack != nil {
		e.applyRackMoves(res, t)
		return nil
	}
	e.applyHostMoves(res, t)
	return nil
}

// rackRound runs rack k's control step over its hosts.
func (e *engine) rackRound(ctx context.Context, t time.Duration, k int32) error {
	v := e.rackView(t, k)
	if len(v.Shards) == 0 {
		return nil
	}
	res, err := ControlStep(ctx, timed{e.rack, e}, v, e.stepConfig(len(v.Shards)))
	if err != nil {
		return err
	}
	e.account(res)
	e.applyHostMoves(res, t)
	return nil
}

// applyRackMoves applies a region's accepted moves onto its racks: a first
// placement gives the shard to the rack (whose round places it on a host); a
// relocation moves its state to a host of the new rack, after which that rack
// places it.
func (e *engine) applyRackMoves(res StepResult, t time.Duration) {
	idx := e.shardIndex()
	for _, m := range res.Accepted {
		i := idx[m.Shard]
		k := e.w.rackIndex(string(m.To))
		if e.moveKind[i] != moveNone {
			e.sum.Rejected++ // busy with a host move; the next round retries
			continue
		}
		e.epochK[i]++
		if m.From == "" {
			e.rack_[i] = k
			e.host[i] = -1
			e.sum.Placements++
			e.dirty = true
			e.triggerRack(k, t)
			continue
		}
		e.startMove(i, moveRack, k, t, e.moveTime(i, e.sc.Model.MoveBandwidth))
	}
}

// applyHostMoves applies the accepted moves of an instance whose children are hosts.
func (e *engine) applyHostMoves(res StepResult, t time.Duration) {
	idx := e.shardIndex()
	for _, m := range res.Accepted {
		i := idx[m.Shard]
		h := e.w.hostIndex(string(m.To))
		e.epochH[i]++
		if m.From == "" {
			e.host[i] = h
			e.sum.Placements++
			e.dirty = true
			continue
		}
		e.startMove(i, moveHost, h, t, e.moveTime(i, e.sc.Model.MoveBandwidth))
	}
}

func (e *engine) account(res StepResult) {
	if res.Mode != ModeIdle {
		e.sum.Rounds++
	}
	e.sum.Rejected += len(res.Rejected)
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
