package tierd

import (
	"context"
	"errors"
	"time"

	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/coordinator/plugin"
	"github.com/strata-sched/strata/interfaces"
)

// loop is the control loop: every Interval (or when poked) the leader runs one
// round; followers only track leadership.
func (d *Daemon) loop(ctx context.Context) {
	t := time.NewTicker(d.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			d.stepDown()
			return
		case <-t.C:
		case <-d.wake:
		}
		if !d.trackLeadership(ctx) {
			continue
		}
		d.round(ctx, time.Now())
	}
}

// trackLeadership notices leadership changes: a new leader waits for a barrier
// (its FSM then holds every committed entry) and starts its uplink; a replica
// that lost leadership closes its sessions so children find the new leader.
func (d *Daemon) trackLeadership(ctx context.Context) bool {
	leader := d.tier.IsLeader()
	d.mu.Lock()
	was := d.leader
	d.mu.Unlock()
	switch {
	case leader && !was:
		if err := d.tier.Raft().Barrier(5 * time.Second).Error(); err != nil {
			return false
		}
		d.mu.Lock()
		d.leader = true
		d.leaderSince = time.Now()
		d.mu.Unlock()
		d.scope.Gauge("leader").Update(1)
		d.logger.Printf("became leader")
		if d.up != nil {
			d.up.start(ctx)
		}
	case !leader && was:
		d.stepDown()
	}
	return leader
}

func (d *Daemon) stepDown() {
	d.mu.Lock()
	wasLeader := d.leader
	d.leader = false
	sessions := d.sessions
	d.sessions = map[interfaces.ChildID]*childSession{}
	d.lastGrant = map[interfaces.ChildID]time.Time{}
	d.mu.Unlock()
	for _, s := range sessions {
		close(s.closed)
	}
	if d.up != nil {
		d.up.stop()
	}
	if wasLeader {
		d.scope.Gauge("leader").Update(0)
		d.logger.Printf("no longer leader")
	}
}

// lost reports whether child's lease has certainly expired at now: no grant was
// sent for a whole lease plus the grace period, counting from when this replica
// became leader at the earliest.
func (d *Daemon) lost(child interfaces.ChildID, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	from := d.lastGrant[child]
	if from.Before(d.leaderSince) {
		from = d.leaderSince
	}
	return now.Sub(from) > d.cfg.LeaseTTL+d.cfg.Grace
}

// round is one pass of observe → detect → decide → act → explain. The solve runs
// without d.decide held (it may take a while, and sessions must not wait for it);
// what it returns is verified against the state at commit time, under the lock.
func (d *Daemon) round(ctx context.Context, now time.Time) {
	start := time.Now()
	defer func() { d.scope.Timer("control_round_seconds").Record(time.Since(start)) }()
	if d.up != nil && d.up.leaseLeft(now) <= 0 {
		// Without a lease from our parent our shards may be given away and our
		// children's leases run out with ours: decide nothing. When the lease
		// comes back, children get a whole lease before they can be declared lost.
		d.mu.Lock()
		d.leaderSince = now
		d.mu.Unlock()
		d.record(now, "no-parent-lease", 0, 0, 0, nil)
		return
	}
	d.decide.Lock()
	view, mode, ok := d.observe(ctx, now)
	d.decide.Unlock()
	if !ok {
		return
	}
	if len(view.Shards) == 0 {
		d.record(now, mode, 0, 0, 0, nil)
		return
	}
	sctx, cancel := context.WithTimeout(ctx, d.cfg.SolveTimeout)
	solveStart := time.Now()
	plan, err := d.policy.Plan(sctx, view)
	cancel()
	d.scope.Timer("solve_seconds").Record(time.Since(solveStart))
	if err != nil {
		d.logger.Printf("policy %s failed, keeping the current assignment: %v", d.policy.Name(), err)
		d.record(now, mode, 0, 0, 0, err)
		return
	}
	d.decide.Lock()
	defer d.decide.Unlock()
	d.act(ctx, now, mode, plan)
}

// observe detects lost children, moves in-flight moves along and returns the
// view to plan from. Called with d.decide held.
func (d *Daemon) observe(ctx context.Context, now time.Time) (*interfaces.View, string, bool) {
	// Detect lost children: after lease + grace their shards may move.
	mode := "periodic"
	for _, cu := range d.tier.FSM.Children() {
		c := cu.Child
		if c.State == interfaces.ChildFailed || !d.lost(c.ID, now) {
			continue
		}
		c.State = interfaces.ChildFailed
		if _, err := d.exec(ctx, &fsm.PutChild{Child: c}); err != nil {
			d.logger.Printf("marking %s failed: %v", c.ID, err)
			return nil, mode, false
		}
		d.scope.Counter("lease_expiries_total").Inc(1)
		d.logger.Printf("child %s lost (lease expired); its %d shards will move", c.ID, cu.Shards)
		d.mu.Lock()
		s := d.sessions[c.ID]
		d.mu.Unlock()
		if s != nil {
			d.dropSession(s, "lease expired") // it must come back with a Hello
		}
		mode = "emergency"
	}

	// Move along in-flight moves: a failed source cannot ack, and its lease has
	// expired, so the move completes; otherwise the revoke is re-sent now and then.
	for _, m := range d.tier.FSM.InFlight() {
		src, _ := d.tier.FSM.Child(m.From)
		st, ok := d.tier.FSM.Shard(m.Shard)
		if !ok {
			continue
		}
		if src.State == interfaces.ChildFailed {
			d.completeMove(ctx, m.Shard, st.Epoch, m.To)
			continue
		}
		d.mu.Lock()
		last := d.revokeSent[m.Shard]
		d.mu.Unlock()
		if now.Sub(last) > 2*d.cfg.Interval {
			d.sendRevoke(m.From, m.Shard, st.Epoch)
		}
	}

	// Decide.
	view := d.tier.FSM.View(d.cfg.Tier, d.cfg.Instance)
	view.Now = now
	view.Seed = int64(d.tier.FSM.AppliedIndex())
	d.mu.Lock()
	view.Reports = make(map[interfaces.ChildID]interfaces.Report, len(d.reports))
	for k, v := range d.reports {
		view.Reports[k] = v
	}
	d.mu.Unlock()
	if d.up != nil {
		view = d.up.filterView(view)
	}
	return view, mode, true
}

// act verifies the plan against the latest state and carries it out. Called
// with d.decide held.
func (d *Daemon) act(ctx context.Context, now time.Time, mode string, plan interfaces.Plan) {
	moves := d.budget(plan.Moves)
	if d.up != nil {
		moves = d.up.dropRevoking(moves)
	}
	if len(moves) == 0 {
		d.record(now, mode, len(plan.Moves), 0, 0, nil)
		return
	}
	accepted, rejected, err := d.commitMoves(ctx, moves, "policy "+d.policy.Name())
	d.record(now, mode, len(plan.Moves), accepted, rejected, err)
}

// commitMoves verifies moves against the latest state and carries out the
// accepted ones: a direct commit (then Assign) for first placements and moves off
// failed children; revoke → ack → commit for moves off live children. Called
// with d.decide held.
func (d *Daemon) commitMoves(ctx context.Context, moves []interfaces.Move, defaultReason string) (accepted, rejected int, err error) {
	verdict := d.tier.FSM.VerifyPlan(moves)
	rejected = len(verdict.Rejected)
	if rejected > 0 {
		d.scope.Counter("moves_rejected_total").Inc(int64(rejected))
		for i, r := range verdict.Rejected {
			if i == 3 {
				d.logger.Printf("… and %d more rejected moves", rejected-i)
				break
			}
			d.logger.Printf("%s: rejected: %v", defaultReason, r.Err())
		}
		d.mu.Lock()
		d.lastRejections = verdict.Rejected
		d.mu.Unlock()
	}
	var direct, revoke []interfaces.Move
	for _, m := range verdict.Accepted {
		if m.Reason == "" {
			m.Reason = defaultReason
		}
		src, ok := d.tier.FSM.Child(m.From)
		if m.From == "" || !ok || src.State == interfaces.ChildFailed {
			direct = append(direct, m)
		} else {
			revoke = append(revoke, m)
		}
	}
	if len(direct) > 0 {
		res, err := d.exec(ctx, &fsm.ApplyPlan{Tier: d.cfg.Tier, Moves: direct})
		if err != nil {
			return accepted, rejected, err
		}
		for i, op := range res.Ops {
			if op.Err != nil {
				d.scope.Counter("moves_failed_total").Inc(1)
				continue
			}
			accepted++
			d.scope.Counter("moves_committed_total").Inc(1)
			d.sendAssign(direct[i].To, direct[i].Shard, op.Epoch)
		}
	}
	if len(revoke) > 0 {
		res, err := d.exec(ctx, &fsm.ApplyPlan{Tier: d.cfg.Tier, Begin: true, Moves: revoke})
		if err != nil {
			return accepted, rejected, err
		}
		for i, op := range res.Ops {
			if op.Err != nil {
				d.scope.Counter("moves_failed_total").Inc(1)
				continue
			}
			accepted++
			d.sendRevoke(revoke[i].From, revoke[i].Shard, revoke[i].Epoch)
		}
	}
	return accepted, rejected, nil
}

// budget keeps every first placement and every move off a failed or draining
// child, and at most MaxMoves other (rebalancing) moves, in plan order.
func (d *Daemon) budget(moves []interfaces.Move) []interfaces.Move {
	out := make([]interfaces.Move, 0, len(moves))
	rebalance := 0
	for _, m := range moves {
		if m.From != "" {
			if c, ok := d.tier.FSM.Child(m.From); ok && c.State == interfaces.ChildActive {
				if rebalance >= d.cfg.MaxMoves {
					continue
				}
				rebalance++
			}
		}
		out = append(out, m)
	}
	return out
}

func (d *Daemon) record(now time.Time, mode string, planned, accepted, rejected int, err error) {
	r := roundRecord{At: now, Mode: mode, Planned: planned, Accepted: accepted, Rejected: rejected}
	if err != nil && !errors.Is(err, context.Canceled) {
		r.Err = err.Error()
	}
	d.mu.Lock()
	d.lastRound = r
	d.mu.Unlock()
	if planned > 0 || err != nil {
		d.logger.Printf("round (%s): %d moves planned, %d committed, %d rejected%s", mode, planned, accepted, rejected, errSuffix(r.Err))
	}
	var owned int64
	for _, cu := range d.tier.FSM.Children() {
		owned += int64(cu.Shards)
	}
	d.scope.Gauge("shards_owned").Update(float64(owned))
	d.mu.Lock()
	d.scope.Gauge("sessions").Update(float64(len(d.sessions)))
	d.mu.Unlock()
	if p, ok := d.policy.(*plugin.Policy); ok {
		st := p.Status()
		healthy := 0.0
		if st.Healthy {
			healthy = 1
		}
		d.scope.Gauge("plugin_healthy").Update(healthy)
		d.scope.Gauge("plugin_failures").Update(float64(st.Failures))
	}
}

func errSuffix(e string) string {
	if e == "" {
		return ""
	}
	return ": " + e
}
