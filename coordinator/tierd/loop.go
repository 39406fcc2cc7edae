package tierd

import (
	"context"
	"errors"
	"fmt"
	"maps"
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

// round drives one control round of the pure core (tiercore.Round: controller
// → control policies → solve → screen → admit → verify → commit → send): it
// builds the round's input from the replicated state and the sessions,
// commits the commands the core returns through Raft, sends the messages it
// asks for, and keeps the metrics and the log. The solve runs without
// d.decide held (it may take a while, and sessions must not wait for it);
// what it returns is verified against the state at commit time, under the
// lock.
func (d *Daemon) round(ctx context.Context, now time.Time) {
	start := time.Now()
	defer func() { d.scope.Timer("control_round_seconds").Record(time.Since(start)) }()
	r, err := d.newRound(d.ctl)
	if err != nil {
		d.logger.Printf("round: %v", err)
		return
	}
	in := tiercore.RoundInput{Now: now, NoParentLease: d.up != nil && d.up.leaseLeft(now) <= 0}
	if in.NoParentLease {
		// Nothing is observed either (the core decides nothing): when the
		// lease comes back, children get a whole lease before they can be
		// declared lost.
		p, _ := r.Start(in)
		d.mu.Lock()
		d.leaderSince = now
		d.mu.Unlock()
		d.record(p.Skipped(), 0, 0, 0, nil)
		return
	}
	d.runRound(ctx, r, now)
}

// runRound runs round r at now on the replica's state (round, once it knows
// the parent's lease holds; tests call it with their own controller) and
// returns what it did.
func (d *Daemon) runRound(ctx context.Context, r *tiercore.Round, now time.Time) tiercore.RoundOutcome {
	d.decide.Lock()
	in := tiercore.RoundInput{Now: now}
	in.View, in.Quarantined = d.observe(ctx, now)
	in.Silent, in.Failures = d.silent(now), d.takeFailures()
	in.Unreachable = d.unreachable(now, in.View)
	p, err := r.Start(in)
	if err != nil {
		d.decide.Unlock()
		d.logger.Printf("%v", err)
		return tiercore.RoundOutcome{}
	}
	d.startRound(ctx, p)
	d.decide.Unlock()
	dec := p.Decision()
	d.setAlerts(dec.Alerts)
	if p.Solves() {
		sctx, cancel := context.WithTimeout(ctx, d.cfg.SolveTimeout)
		solveStart := time.Now()
		p.Solve(sctx)
		d.scope.Timer("solve_seconds").Record(time.Since(solveStart))
		cancel()
	}
	out := d.act(ctx, p)
	if out.DroppedUnreachable > 0 {
		d.scope.Counter("moves_dropped_unreachable_total").Inc(int64(out.DroppedUnreachable))
	}
	if out.ObserveErr != nil {
		d.logger.Printf("controller: %v", out.ObserveErr)
	}
	mode := dec.Mode.String()
	switch {
	case out.SolveErr != nil:
		d.logger.Printf("policy %s failed, keeping the current assignment: %v", d.policy.Name(), out.SolveErr)
		d.record(mode, 0, 0, 0, out.SolveErr)
	case !out.Solved:
		d.record(mode, 0, 0, 0, nil)
	default:
		d.noteInfeasible(out.Infeasible)
		d.noteRejections(out.Rejected, p.DefaultReason())
		d.notePlacement(now, out.Held)
		d.record(mode, len(out.Plan.Moves), len(out.Applied), len(out.Rejected), out.CommitErr)
	}
	return out
}

// act runs the core's screen, admit and verify on the latest state, commits
// the batch in one entry, ends the pass with the results and sends what the
// committed moves need, all under d.decide.
func (d *Daemon) act(ctx context.Context, p *tiercore.Pass) tiercore.RoundOutcome {
	d.decide.Lock()
	defer d.decide.Unlock()
	batch := p.Verify(d.tier.FSM, d.leaving())
	ops, err := d.commitBatch(ctx, nil, batch)
	out := p.End(ops, err)
	d.carryOut(out.Tell, out.Failed)
	return out
}

// newRound wires the core round of this replica with controller ctl (made
// when it became leader; tests pass their own), its control policies and its
// tier policy.
func (d *Daemon) newRound(ctl *control.Controller) (*tiercore.Round, error) {
	return tiercore.NewRound(tiercore.RoundConfig{Controller: ctl, Policies: d.pol.set, Policy: d.policy, ApplyResizes: d.up == nil})
}

// startRound carries out what the core's first stages decided — the lost
// children declared failed, quarantines, resizes, committed through Raft —
// and gives it the results; then it sends what the core asks for and keeps
// the control policies' findings. Called with d.decide held.
func (d *Daemon) startRound(ctx context.Context, p *tiercore.Pass) {
	cmds := p.Commands()
	results := make([]tiercore.CommandResult, len(cmds))
	for i, c := range cmds {
		results[i] = d.carryCommand(ctx, c)
	}
	d.carryOut(p.Carried(results), 0)
	if err := p.PoliciesErr(); err != nil {
		d.logger.Printf("%v", err)
		return
	}
	if d.pol.set == nil {
		return
	}
	d.pol.mu.Lock()
	d.pol.findings = p.Findings()
	d.pol.mu.Unlock()
	d.scope.Gauge("control_findings").Update(float64(len(p.Findings())))
}

// carryCommand commits one of the round's commands. Called with d.decide held.
func (d *Daemon) carryCommand(ctx context.Context, c tiercore.RoundCommand) tiercore.CommandResult {
	switch c.Kind {
	case tiercore.DeclareFailed:
		return tiercore.CommandResult{Done: d.declareFailed(ctx, c.Child)}
	case tiercore.Quarantine:
		if _, err := d.commit(ctx, &fsm.Quarantine{Shard: c.Shard, Reason: c.Reason}); err != nil {
			d.logger.Printf("quarantine %s: %v", c.Shard, err)
			return tiercore.CommandResult{}
		}
		d.scope.Counter("shards_quarantined_total").Inc(1)
		d.logger.Printf("shard %s quarantined: %s", c.Shard, c.Reason)
		return tiercore.CommandResult{Done: true}
	case tiercore.Resize:
		rz := c.Resize
		deleted, err := d.resize(ctx, rz)
		if err != nil {
			d.logger.Printf("autoscale %s %d → %d: %v", rz.Job, rz.Current, rz.Target, err)
			return tiercore.CommandResult{Deleted: deleted}
		}
		d.logger.Printf("autoscale: job %s resized %d → %d shards (%s)", rz.Job, rz.Current, rz.Target, rz.Reason)
		return tiercore.CommandResult{Done: true, Deleted: deleted}
	}
	return tiercore.CommandResult{}
}

// leaving says which shards our parent is taking back (nil at the top tier): the
// round never moves them.
func (d *Daemon) leaving() func(interfaces.ShardID) bool {
	if d.up == nil {
		return nil
	}
	return func(id interfaces.ShardID) bool { return len(d.up.dropRevoking([]interfaces.Move{{Shard: id}})) == 0 }
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
// refused, while the shard is still that child's (tiercore.DueRetries,
// tiercore.RetryAssign).
func (d *Daemon) retryRefused(now time.Time) {
	d.mu.Lock()
	due := tiercore.DueRetries(now, d.refused, 2*d.cfg.Interval)
	for _, id := range due {
		delete(d.refused, id)
	}
	d.mu.Unlock()
	for _, id := range due {
		st, ok := d.tier.FSM.Shard(id)
		if !ok {
			continue
		}
		if t, ok := tiercore.RetryAssign(id, st.Owner, st.Epoch, st.InFlight != nil); ok {
			d.sendAssign(t.Child, t.Shard, t.Epoch)
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

// declareFailed commits child id as failed (the core found it lost: silent
// past lease and grace), drops its session, and reports whether it did.
// Called with d.decide held.
func (d *Daemon) declareFailed(ctx context.Context, id interfaces.ChildID) bool {
	c, ok := d.tier.FSM.Child(id)
	if !ok || c.State == interfaces.ChildFailed {
		return false
	}
	// The controller decided from silent(), a while ago: a lease granted
	// since (a report, a reconnect) keeps the child. Checked, and grants
	// to it stopped, in one step with grants (stampGrant), so that none
	// slips in before the commit; the round then moves its shards directly.
	if !d.startDeclaring(c, time.Now()) {
		return false
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
		return false
	}
	d.scope.Counter("lease_expiries_total").Inc(1)
	d.logger.Printf("child %s lost (lease expired, grace passed); its shards will move", id)
	if s != nil {
		d.dropSession(s, "lease expired") // it must come back with a Hello
	}
	return true
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
	// Move along in-flight moves (tiercore.Advance).
	var moving []tiercore.Moving
	for _, m := range d.tier.FSM.InFlight() {
		src, _ := d.tier.FSM.Child(m.From)
		st, ok := d.tier.FSM.Shard(m.Shard)
		if !ok {
			continue
		}
		d.mu.Lock()
		last := d.revokeSent[m.Shard]
		d.mu.Unlock()
		moving = append(moving, tiercore.Moving{Move: m, Epoch: st.Epoch, SourceFailed: src.State == interfaces.ChildFailed, RevokeSent: last})
	}
	complete, tell := tiercore.Advance(now, moving, 2*d.cfg.Interval)
	for _, m := range complete {
		d.completeMove(ctx, m.Move.Shard, m.Epoch, m.Move.To)
	}
	d.carryOut(tell, 0)
	if d.up != nil {
		d.up.resendRevokes(ctx, now)
	}
	d.retryRefused(now)

	view, quarantined := d.baseView(now)
	view.Constraints = append(view.Constraints, d.cooperate(view)...)
	return view, quarantined
}

// unreachable lists the live children of view gone quiet for
// control.step_down_after: they keep their shards until their leases end,
// and the round leaves them alone meanwhile (tiercore.Unreachable).
func (d *Daemon) unreachable(now time.Time, view *interfaces.View) []interfaces.ChildID {
	d.mu.Lock()
	defer d.mu.Unlock()
	return tiercore.Unreachable(now, d.leaderSince, d.lastGrant, view.Children, d.cfg.StepDownAfter)
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
		tiercore.Within(view, interfaces.ChildID(d.cfg.Instance))
	}
	tiercore.Measured(view)
	if d.up != nil {
		view = d.up.filterView(view)
	}
	return view, d.withoutQuarantined(view)
}

// commitMoves verifies moves against the latest state and the tier-level
// rules and commits the accepted ones in one entry, then sends what they need
// (commitVerified). Called with d.decide held.
func (d *Daemon) commitMoves(ctx context.Context, moves []interfaces.Move, rules []interfaces.Constraint, planned []interfaces.Shard, defaultReason string) (applied []interfaces.Move, rejected int, err error) {
	applied, rejections, err := d.commitVerified(ctx, nil, moves, rules, planned, defaultReason)
	return applied, len(rejections), err
}

// commitPlanBatch is commitMoves for an operator's plan that also drains
// children: the drains and every accepted move go in one entry (fsm.PlanBatch),
// so the plan is never left half done — drained without its moves, or the
// reverse. A drain the state machine refuses (a child gone) refuses the whole
// batch. Called with d.decide held.
func (d *Daemon) commitPlanBatch(ctx context.Context, drain []interfaces.ChildID, moves []interfaces.Move, rules []interfaces.Constraint, planned []interfaces.Shard, defaultReason string) (applied []interfaces.Move, rejected int, err error) {
	// Not the shards our parent is taking back (as the round).
	kept := tiercore.DropLeaving(moves, d.leaving())
	applied, refused, err := d.commitVerified(ctx, drain, kept, rules, planned, defaultReason)
	return applied, len(moves) - len(kept) + len(refused), err
}

// commitVerified verifies moves (tiercore.VerifyMoves), commits the drains and
// the accepted moves in one fsm.PlanBatch entry, in plan order, and carries
// out the sends. It returns the moves that committed and every rejection.
// Called with d.decide held.
func (d *Daemon) commitVerified(ctx context.Context, drain []interfaces.ChildID, moves []interfaces.Move, rules []interfaces.Constraint, planned []interfaces.Shard, defaultReason string) (applied []interfaces.Move, rejections []balancer.Rejection, err error) {
	batch, rejections := tiercore.VerifyMoves(d.tier.FSM, moves, rules, planned, defaultReason, nil)
	d.noteRejections(rejections, defaultReason)
	ops, err := d.commitBatch(ctx, drain, batch)
	if err != nil {
		return nil, rejections, err
	}
	applied, tell, failed := tiercore.CarryOut(batch, ops)
	d.carryOut(tell, failed)
	return applied, rejections, nil
}

// commitBatch commits the drains and the batch's moves in one fsm.PlanBatch
// entry and returns the moves' results (nothing to commit: none). A drain the
// state machine refuses refuses the whole batch.
func (d *Daemon) commitBatch(ctx context.Context, drain []interfaces.ChildID, b tiercore.Batch) ([]tiercore.OpResult, error) {
	if len(drain) == 0 && len(b.Moves) == 0 {
		return nil, nil
	}
	res, err := d.exec(ctx, &fsm.PlanBatch{Tier: d.cfg.Tier, Drain: drain, Moves: b.Moves, Begin: b.Begin})
	if err != nil {
		return nil, err
	}
	for _, op := range res.Ops[:len(drain)] {
		if op.Err != nil {
			return nil, fmt.Errorf("drain %s: %w (nothing of the plan was applied)", op.ID, op.Err)
		}
	}
	ops := make([]tiercore.OpResult, 0, len(b.Moves))
	for _, op := range res.Ops[len(drain):] {
		ops = append(ops, tiercore.OpResult{Epoch: op.Epoch, Err: op.Err})
	}
	return ops, nil
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

// carryOut sends what the core asks for (an Assign to the new owner of a
// direct move, a Revoke to the old owner of a begun one or of a quarantined
// shard) and counts the moves whose commit failed.
func (d *Daemon) carryOut(tell []tiercore.Tell, failed int) {
	if failed > 0 {
		d.scope.Counter("moves_failed_total").Inc(int64(failed))
	}
	for _, t := range tell {
		switch t.Kind {
		case tiercore.Revoke:
			d.sendRevoke(t.Child, t.Shard, t.Epoch)
		case tiercore.Assign:
			d.scope.Counter("moves_committed_total").Inc(1)
			d.sendAssign(t.Child, t.Shard, t.Epoch)
		}
	}
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

// reportsCopy is the children's latest reports, copied under d.mu so that the
// caller works on them without holding the lock every report takes.
func (d *Daemon) reportsCopy() map[interfaces.ChildID]interfaces.Report {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.reports) // never nil: made with the daemon
}

// ownerLoads is tiercore.OwnerLoads (Explain shows the reported loads too).
var ownerLoads = tiercore.OwnerLoads
