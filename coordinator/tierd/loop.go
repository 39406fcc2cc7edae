package tierd

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/coordinator/tiercore"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/tiers/control"
	"github.com/strata-sched/strata/tiers/coop"
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
		now := time.Now()
		d.ensureBootstrapToken(ctx)
		d.gcChildren(ctx, now, d.cfg.Children.GCAfter)
		d.round(ctx, now)
	}
}

// trackLeadership notices leadership changes: a new leader waits for a barrier
// (its FSM then holds every committed entry) and starts its uplink; a replica
// that lost leadership closes its sessions so children find the new leader.
//
// Leadership is known by its term: a replica that lost leadership and won it
// back between two polls (another leader in between, which may have granted
// leases) steps down and up again, as if it had seen the change.
func (d *Daemon) trackLeadership(ctx context.Context) bool {
	leader := d.tier.IsLeader()
	term := d.tier.Raft().CurrentTerm()
	d.mu.Lock()
	was, wasTerm := d.leader, d.leaderTerm
	d.mu.Unlock()
	if leader && was && term != wasTerm {
		d.stepDown()
		was = false
	}
	switch {
	case leader && !was:
		if err := d.tier.Raft().Barrier(5 * time.Second).Error(); err != nil {
			return false
		}
		d.resetPlacement() // before anyone sees this replica lead
		d.mu.Lock()
		d.leader = true
		d.leaderSince = time.Now()
		d.leaderTerm = term
		d.mu.Unlock()
		ctl, err := control.New(d.controlConfig())
		if err != nil {
			d.logger.Printf("controller: %v", err)
			return false
		}
		d.ctl = ctl         // used by this goroutine only
		d.failedSince = nil // children.gc_after counts afresh under each leadership
		if err := d.newPolicies(); err != nil {
			d.logger.Printf("control policies: %v", err)
			return false
		}
		d.scope.Gauge("leader").Update(1)
		d.logger.Printf("became leader")
		if d.up != nil {
			d.up.start(ctx, term)
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
	// Reports and what was derived from them are this term's: a replica that
	// leads again waits for fresh ones rather than act on old hints.
	d.reports = map[interfaces.ChildID]interfaces.Report{}
	d.mu.Unlock()
	d.coop.mu.Lock()
	d.coop.mem, d.coop.last, d.coop.sent = coop.Memory{}, nil, nil
	d.coop.mu.Unlock()
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

// round is one pass of observe → detect → decide → act → explain. The decisions
// (mode, budget, who is lost, the mass-failure guard, anti-bounce) are the pure
// controller's (tiers/control), followed by the control policies' (stragglers,
// failing shards, job sizes; see runPolicies); the solve runs without d.decide held (it may take
// a while, and sessions must not wait for it), and what it returns is verified
// against the state at commit time, under the lock.
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
		d.record("no-parent-lease", 0, 0, 0, nil)
		return
	}
	d.decide.Lock()
	view, quarantined := d.observe(ctx, now)
	dec, err := d.ctl.Step(control.Input{Now: now, View: view, Silent: d.silent(now)})
	if err != nil {
		d.decide.Unlock()
		d.logger.Printf("controller: %v", err)
		return
	}
	d.declareFailed(ctx, view, dec.DeclareFailed)
	// The control policies (detect → diagnose → resolve): quarantines and
	// resizes are committed now; their constraints and evictions join the
	// decision, their alerts the controller's.
	evictions := d.runPolicies(ctx, now, view, &dec, quarantined)
	d.decide.Unlock()
	d.setAlerts(dec.Alerts)
	mode := dec.Mode.String()
	obs := control.RoundResult{Round: dec.Round, At: now, P99: control.WorstP99(view), MovesActive: len(view.InFlight)}
	if !dec.Solve() || len(view.Shards) == 0 {
		d.observeRound(obs)
		d.record(mode, 0, 0, 0, nil)
		return
	}
	sv := dec.Apply(view)
	// Frozen after the controller's decision: a child it declared failed in
	// this round is evacuated, not frozen.
	d.unreachable = slices.DeleteFunc(d.unreachable, func(c interfaces.ChildID) bool { return slices.Contains(dec.DeclareFailed, c) })
	sv.Constraints = append(sv.Constraints, tiercore.Freeze(sv, d.unreachable)...)
	plan, err := d.solve(ctx, sv)
	if err != nil {
		d.logger.Printf("policy %s failed, keeping the current assignment: %v", d.policy.Name(), err)
		obs.SolveErr = err
		d.observeRound(obs)
		d.record(mode, 0, 0, 0, err)
		return
	}
	d.decide.Lock()
	applied, rejections, err := d.act(ctx, sv, plan, &dec, evictions)
	d.decide.Unlock()
	// The commit's rejections go back to the controller: a move rejected
	// for the same reason HoldAfter rounds in a row is held (control.Backoff).
	obs.Planned, obs.Applied, obs.Rejected = len(plan.Moves), applied, rejections
	d.observeRound(obs)
	d.notePlacement(now, d.ctl.Held(now))
	d.record(mode, len(plan.Moves), len(applied), len(rejections), err)
}

// solve runs the tier's policy on the round's view sv within the solve
// timeout, and keeps the shards its plan places nowhere (noteInfeasible).
func (d *Daemon) solve(ctx context.Context, sv *interfaces.View) (interfaces.Plan, error) {
	sctx, cancel := context.WithTimeout(ctx, d.cfg.SolveTimeout)
	defer cancel()
	solveStart := time.Now()
	plan, err := d.policy.Plan(sctx, sv)
	d.scope.Timer("solve_seconds").Record(time.Since(solveStart))
	if err == nil {
		d.noteInfeasible(plan)
	}
	return plan, err
}

func (d *Daemon) observeRound(r control.RoundResult) {
	if err := d.ctl.Observe(r); err != nil {
		d.logger.Printf("controller: %v", err)
	}
}

// silent maps each live child whose lease has expired (from this leader's view)
// to the expiry: the controller counts the grace from there. A child's lease
// runs, from this side, for LeaseTTL plus the stop budget it announced plus
// DriftMargin: it fences by the end of its lease as its own clock counts it
// (timed from its send of the report the last grant answered, which precedes
// the grant's send this side counts from), and may take the stop budget to
// stop its shards.
func (d *Daemon) silent(now time.Time) map[interfaces.ChildID]time.Time {
	out := map[interfaces.ChildID]time.Time{}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, cu := range d.tier.FSM.Children() {
		if cu.Child.State == interfaces.ChildFailed {
			continue
		}
		if exp := d.leaseEnd(cu.Child); now.After(exp) {
			out[cu.Child.ID] = exp
		}
	}
	return out
}

// leaseEnd is when child c's lease ends from this leader's view: its last
// grant (or this leader's start, if later) plus LeaseTTL, the stop budget it
// announced and the drift margin. Called with d.mu held.
func (d *Daemon) leaseEnd(c interfaces.Child) time.Time {
	from := d.lastGrant[c.ID]
	if from.Before(d.leaderSince) {
		from = d.leaderSince
	}
	return from.Add(d.cfg.LeaseTTL + stopBudget(c) + d.cfg.DriftMargin)
}

// retryRefused sends again, after twice the interval, the Assigns a child tier
// refused, while the shard is still that child's.
func (d *Daemon) retryRefused(now time.Time) {
	d.mu.Lock()
	var due []interfaces.ShardID
	for id, at := range d.refused {
		if now.Sub(at) > 2*d.cfg.Interval {
			due = append(due, id)
		}
	}
	for _, id := range due {
		delete(d.refused, id)
	}
	d.mu.Unlock()
	slices.Sort(due)
	for _, id := range due {
		if st, ok := d.tier.FSM.Shard(id); ok && st.Owner != "" && st.InFlight == nil {
			d.sendAssign(st.Owner, id, st.Epoch)
		}
	}
}

// startDeclaring reports whether child c is still silent past its lease, stop
// budget and grace at now and, if so, marks it as being declared failed (no
// grant until the declaration is done).
func (d *Daemon) startDeclaring(c interfaces.Child, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if now.Before(d.leaseEnd(c).Add(d.cfg.Grace)) {
		d.logger.Printf("child %s renewed its lease while being declared lost: kept", c.ID)
		return false
	}
	d.declaring[c.ID] = true
	return true
}

// declareFailed commits the children the controller found lost (silent past
// lease and grace) as failed, drops their sessions, and marks them failed in the
// view the round plans from. Called with d.decide held.
func (d *Daemon) declareFailed(ctx context.Context, view *interfaces.View, ids []interfaces.ChildID) {
	for _, id := range ids {
		c, ok := d.tier.FSM.Child(id)
		if !ok || c.State == interfaces.ChildFailed {
			continue
		}
		// The controller decided from silent(), a while ago: a lease granted
		// since (a report, a reconnect) keeps the child. Checked, and grants
		// to it stopped, in one step with grants (stampGrant), so that none
		// slips in before the commit; the round then moves its shards directly.
		if !d.startDeclaring(c, time.Now()) {
			continue
		}
		c.State = interfaces.ChildFailed
		if h := testHookDeclare.Load(); h != nil {
			(*h)(d, id)
		}
		_, err := d.exec(ctx, &fsm.PutChild{Child: c})
		d.mu.Lock()
		delete(d.declaring, id)
		if err == nil {
			delete(d.reports, id) // history now: its shards move
		}
		s := d.sessions[id]
		d.mu.Unlock()
		if err != nil {
			d.logger.Printf("marking %s failed: %v", id, err)
			continue
		}
		d.scope.Counter("lease_expiries_total").Inc(1)
		d.logger.Printf("child %s lost (lease expired, grace passed); its shards will move", id)
		if s != nil {
			d.dropSession(s, "lease expired") // it must come back with a Hello
		}
		for i := range view.Children {
			if view.Children[i].ID == id {
				view.Children[i].State = interfaces.ChildFailed
			}
		}
	}
}

func (d *Daemon) setAlerts(alerts []control.Alert) {
	out := make([]string, len(alerts))
	for i, a := range alerts {
		out[i] = a.String()
	}
	d.mu.Lock()
	changed := strings.Join(out, "\n") != strings.Join(d.alerts, "\n")
	d.alerts = out
	d.mu.Unlock()
	if changed {
		for _, a := range out {
			d.logger.Printf("ALERT %s", a)
		}
	}
	d.scope.Gauge("alerts").Update(float64(len(out)))
}

// observe moves in-flight moves along and returns the view to plan from (with
// the cooperation rules derived this round) and the quarantined shards left
// out of it. Called with d.decide held.
func (d *Daemon) observe(ctx context.Context, now time.Time) (*interfaces.View, map[interfaces.ShardID]string) {
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
	if d.up != nil {
		d.up.resendRevokes(ctx, now)
	}
	d.retryRefused(now)

	view, quarantined := d.baseView(now)
	view.Constraints = append(view.Constraints, d.cooperate(view)...)
	// Children gone quiet keep their shards until their leases end; the
	// round leaves them alone meanwhile (tiercore.Unreachable).
	d.mu.Lock()
	since, heard := d.leaderSince, maps.Clone(d.lastGrant)
	d.mu.Unlock()
	d.unreachable = tiercore.Unreachable(now, since, heard, view.Children, d.cfg.StepDownAfter)
	return view, quarantined
}

// baseView is the picture every decision of this instance starts from — the
// control round, a what-if Plan, the hints sent to the parent: the replicated
// state with the shards' rules that bind within this instance (within), the
// children's latest reports with the loads they measured in place of the
// declared ones, the shards our parent is taking back pinned where a child
// still runs them or else left out (uplink.filterView), and without
// quarantined shards (never placed until released), which it returns with
// their reasons.
func (d *Daemon) baseView(now time.Time) (*interfaces.View, map[interfaces.ShardID]string) {
	view := d.tier.FSM.View(d.cfg.Tier, d.cfg.Instance)
	view.Now = now
	view.Seed = int64(d.tier.FSM.AppliedIndex())
	view.Reports = d.reportsCopy()
	if d.up != nil {
		within(view, interfaces.ChildID(d.cfg.Instance))
	}
	measured(view)
	if d.up != nil {
		view = d.up.filterView(view)
	}
	return view, d.withoutQuarantined(view)
}

// act carries out the policy's plan: it drops the moves the tier refuses
// whatever else the plan does (fsm.Screen), admits what the round's decision
// allows of the rest (dec.Admit: budget, anti-bounce, held moves, emergency scope) — so
// that refused moves use none of the round's budget — and commits those,
// verified against the latest state and the tier-level rules the policy was
// given (sv.Constraints). Capacity and anti-affinity are checked only then, on
// the admitted moves: whether a move fits depends on the moves before it, and
// a move admission drops must not keep a later one out (an evacuation off a
// failed child was refused for the room of a rebalancing move the emergency
// round then dropped). It returns the moves committed and every rejection
// (Screen's, then the verification's). Called with d.decide held.
func (d *Daemon) act(ctx context.Context, sv *interfaces.View, plan interfaces.Plan, dec *control.Decision, evictions map[interfaces.ShardID]control.Eviction) (applied []interfaces.Move, rejections []balancer.Rejection, err error) {
	moves, frozen := tiercore.Reachable(plan.Moves, d.unreachable)
	if frozen > 0 {
		d.scope.Counter("moves_dropped_unreachable").Inc(int64(frozen))
	}
	if d.up != nil {
		moves = d.up.dropRevoking(moves)
	}
	var pre []balancer.Rejection
	if len(moves) == 0 {
		return nil, nil, nil
	}
	reason := "policy " + d.policy.Name()
	plan.Moves, pre = d.tier.FSM.Screen(moves)
	admitted, _ := dec.Admit(sv, plan)
	explainEvictions(admitted, evictions)
	if len(admitted) == 0 {
		d.noteRejections(pre, reason)
		return nil, pre, nil
	}
	applied, rejections, err = d.commitVerified(ctx, nil, admitted, sv.Constraints, sv.Shards, reason, pre)
	return applied, rejections, err
}

// commitMoves verifies moves against the latest state and the tier-level rules
// (the hard constraints the moves' policy was given: pin, allowed,
// anti-affinity, capacity limits) and carries out the accepted ones: a direct commit (then Assign) for first placements and moves off
// failed children; revoke → ack → commit for moves off live children. The
// accepted moves go in one entry (fsm.PlanBatch), so a plan is never left half
// applied because its second entry failed; a move the state machine would refuse
// is rejected by the verification on its own. Called with d.decide held.
// earlier are rejections of the same plan made before (noted with these).
func (d *Daemon) commitMoves(ctx context.Context, moves []interfaces.Move, rules []interfaces.Constraint, planned []interfaces.Shard, defaultReason string, earlier ...balancer.Rejection) (applied []interfaces.Move, rejected int, err error) {
	applied, rejections, err := d.commitVerified(ctx, nil, moves, rules, planned, defaultReason, earlier)
	return applied, len(rejections) - len(earlier), err
}

// commitPlanBatch is commitMoves for an operator's plan that also drains
// children: the drains and every accepted move go in one entry (fsm.PlanBatch),
// so the plan is never left half done — drained without its moves, or the
// reverse. A drain the state machine refuses (a child gone) refuses the whole
// batch. Called with d.decide held.
func (d *Daemon) commitPlanBatch(ctx context.Context, drain []interfaces.ChildID, moves []interfaces.Move, rules []interfaces.Constraint, planned []interfaces.Shard, defaultReason string) (applied []interfaces.Move, rejected int, err error) {
	if d.up != nil {
		// Not the shards our parent is taking back (as act).
		kept := d.up.dropRevoking(moves)
		rejected = len(moves) - len(kept)
		moves = kept
	}
	applied, refused, err := d.commitVerified(ctx, drain, moves, rules, planned, defaultReason, nil)
	return applied, rejected + len(refused), err
}

// commitVerified verifies moves (verifyMoves) and commits the drains and the
// accepted moves in one fsm.PlanBatch entry, in plan order. It returns the
// moves that committed and every rejection (earlier's first). Called with
// d.decide held.
func (d *Daemon) commitVerified(ctx context.Context, drain []interfaces.ChildID, moves []interfaces.Move, rules []interfaces.Constraint, planned []interfaces.Shard, defaultReason string, earlier []balancer.Rejection) (applied []interfaces.Move, rejections []balancer.Rejection, err error) {
	accepted, begin, rejections := d.verifyMoves(moves, rules, planned, defaultReason, earlier)
	if len(drain) == 0 && len(accepted) == 0 {
		return nil, rejections, nil
	}
	res, err := d.exec(ctx, &fsm.PlanBatch{Tier: d.cfg.Tier, Drain: drain, Moves: accepted, Begin: begin})
	if err != nil {
		return nil, rejections, err
	}
	for _, op := range res.Ops[:len(drain)] {
		if op.Err != nil {
			return nil, rejections, fmt.Errorf("drain %s: %w (nothing of the plan was applied)", op.ID, op.Err)
		}
	}
	return d.carryOut(accepted, begin, res.Ops[len(drain):]), rejections, nil
}

// verifyMoves checks moves against the latest state, on the loads they were
// planned on (planned: the planning view's shards, balancer.PlannedLoads; nil
// = the declared ones), and the tier-level rules (fsm.VerifyPlanned; see
// balancer.CommitRules), counts and logs the rejected ones
// (with earlier ones of the same plan), and returns them (earlier's first)
// and the accepted ones in plan order, with defaultReason for those without a
// reason, and for each whether it is begun (revoke → ack → commit: a move off
// a live child) or committed directly (a first placement, a move off a failed
// child).
func (d *Daemon) verifyMoves(moves []interfaces.Move, rules []interfaces.Constraint, planned []interfaces.Shard, defaultReason string, earlier []balancer.Rejection) (accepted []interfaces.Move, begin []bool, rejections []balancer.Rejection) {
	verdict := d.tier.FSM.VerifyPlanned(planned, balancer.CommitRules(rules), moves)
	rejections = append(earlier[:len(earlier):len(earlier)], verdict.Rejected...)
	d.noteRejections(rejections, defaultReason)
	accepted = make([]interfaces.Move, 0, len(verdict.Accepted))
	begin = make([]bool, 0, len(verdict.Accepted))
	for _, m := range verdict.Accepted {
		if m.Reason == "" {
			m.Reason = defaultReason
		}
		src, ok := d.tier.FSM.Child(m.From)
		accepted = append(accepted, m)
		begin = append(begin, m.From != "" && ok && src.State != interfaces.ChildFailed)
	}
	return accepted, begin, rejections
}

// noteRejections counts and logs the moves a verification rejected and keeps
// them for LastRejections (when there are any).
func (d *Daemon) noteRejections(rejected []balancer.Rejection, defaultReason string) {
	if len(rejected) == 0 {
		return
	}
	d.scope.Counter("moves_rejected_total").Inc(int64(len(rejected)))
	for i, r := range rejected {
		if i == 3 {
			d.logger.Printf("… and %d more rejected moves", len(rejected)-i)
			break
		}
		d.logger.Printf("%s: rejected: %v", defaultReason, r.Err())
	}
	d.mu.Lock()
	d.lastRejections = rejected
	d.mu.Unlock()
}

// carryOut follows up committed moves (ops are their results, in order): an
// Assign to the new owner of a direct move, a Revoke to the old owner of a
// begun one (begun[i]). It returns the moves that committed.
func (d *Daemon) carryOut(moves []interfaces.Move, begun []bool, ops []fsm.OpResult) []interfaces.Move {
	var applied []interfaces.Move
	for i, op := range ops {
		if op.Err != nil {
			d.scope.Counter("moves_failed_total").Inc(1)
			continue
		}
		applied = append(applied, moves[i])
		if begun[i] {
			d.sendRevoke(moves[i].From, moves[i].Shard, moves[i].Epoch)
			continue
		}
		d.scope.Counter("moves_committed_total").Inc(1)
		d.sendAssign(moves[i].To, moves[i].Shard, op.Epoch)
	}
	return applied
}

// record logs a round that did something and updates the tier's gauges; the
// controller keeps the per-round records (control.Controller.History).
func (d *Daemon) record(mode string, planned, accepted, rejected int, err error) {
	if err != nil && errors.Is(err, context.Canceled) {
		err = nil
	}
	if planned > 0 || err != nil {
		msg := ""
		if err != nil {
			msg = ": " + err.Error()
		}
		d.logger.Printf("round (%s): %d moves planned, %d committed, %d rejected%s", mode, planned, accepted, rejected, msg)
	}
	var owned int64
	for _, cu := range d.tier.FSM.Children() {
		owned += int64(cu.Shards)
	}
	d.scope.Gauge("shards_owned").Update(float64(owned))
	d.mu.Lock()
	d.scope.Gauge("sessions").Update(float64(len(d.sessions)))
	d.mu.Unlock()
	if p, ok := d.policy.(interfaces.HealthReporter); ok {
		st := p.Health()
		healthy := 0.0
		if st.Healthy {
			healthy = 1
		}
		d.scope.Gauge("plugin_healthy").Update(healthy)
		d.scope.Gauge("plugin_failures").Update(float64(st.Failures))
	}
}

// backoffHoldRounds is how many control intervals a move the commit rejected
// control.Config.HoldAfter rounds in a row is held (control.Config.HoldFor).
const backoffHoldRounds = 60

// controlConfig is the controller's configuration for this tier.
func (d *Daemon) controlConfig() control.Config {
	c := control.DefaultConfig()
	c.Grace = d.cfg.Grace
	c.HoldFor = backoffHoldRounds * d.cfg.Interval
	if d.cfg.MaxMoves > 0 {
		c.MaxMoves = d.cfg.MaxMoves
		if c.MinMoves > c.MaxMoves {
			c.MinMoves = c.MaxMoves
		}
		if c.MaxConcurrency < c.MaxMoves {
			c.MaxConcurrency = c.MaxMoves
		}
	}
	return c
}

// measured replaces a shard's declared load with the load its owner measured and
// reported, when the owner reports it: a shard whose real load doubled weighs
// double in the plan. The view's shards are copied, never changed in place.
func measured(v *interfaces.View) {
	loads := ownerLoads(v.Assignments, v.Reports)
	if len(loads) == 0 {
		return
	}
	shards := make([]interfaces.Shard, len(v.Shards))
	copy(shards, v.Shards)
	for i := range shards {
		if l, ok := loads[shards[i].ID]; ok {
			// Dimensions the child does not measure keep their declared value.
			shards[i].Load = shards[i].Load.WithMeasured(l)
		}
	}
	v.Shards = shards
}

// within replaces each shard's rules with the ones that bind inside this
// tier instance, self (interfaces.ShardConstraints.Within: a pin to self, or
// an allowed list naming it, was our parent's to keep). The view's shards
// are copied when one changes, never changed in place. The commit verifies
// on the same rules (balancer.PlannedLoads of the planning view).
func within(v *interfaces.View, self interfaces.ChildID) {
	var shards []interfaces.Shard
	for i := range v.Shards {
		c := &v.Shards[i].Constraints
		if c.Pinned != self && !slices.Contains(c.Allowed, self) {
			continue
		}
		if shards == nil {
			shards = make([]interfaces.Shard, len(v.Shards))
			copy(shards, v.Shards)
		}
		shards[i].Constraints = c.Within(self)
	}
	if shards != nil {
		v.Shards = shards
	}
}

// reportsCopy is the children's latest reports, copied under d.mu so that the
// caller works on them without holding the lock every report takes.
func (d *Daemon) reportsCopy() map[interfaces.ChildID]interfaces.Report {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.reports) // never nil: made with the daemon
}

// ownerLoads returns each shard's load as its owner under assignments last
// reported it (reports of former owners and unusable loads are ignored); nil
// when there is none.
func ownerLoads(assignments []interfaces.Assignment, reports map[interfaces.ChildID]interfaces.Report) map[interfaces.ShardID]interfaces.Load {
	owner := make(map[interfaces.ShardID]interfaces.ChildID, len(assignments))
	for _, a := range assignments {
		owner[a.Shard] = a.Child
	}
	var loads map[interfaces.ShardID]interfaces.Load
	for child, r := range reports {
		for _, sl := range r.Shards {
			if owner[sl.Shard] != child || !validLoad(sl.Load) {
				continue // a stale report from a former owner, or nothing usable
			}
			if loads == nil {
				loads = map[interfaces.ShardID]interfaces.Load{}
			}
			loads[sl.Shard] = sl.Load
		}
	}
	return loads
}

func validLoad(l interfaces.Load) bool {
	return interfaces.ValidateLoad("load", l) == nil
}
