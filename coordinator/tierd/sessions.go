package tierd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/coordinator/tiercore"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

// childSession is the parent side of one child's live stream.
type childSession struct {
	id      interfaces.ChildID
	out     chan *wire.ParentMessage
	version uint32
	closed  chan struct{}
	// senderDone is closed when the session's sender stops, so that a
	// waiting send (sendWait) gives up.
	senderDone chan struct{}
	// term is the leader's term when the session opened: grants go only in it.
	term uint64
	// capacity carries the latest capacity a child tier reported that differs
	// from its record, from the receiver to the worker, which commits it
	// (under the decide lock, which the receiver must never wait for).
	capacity chan interfaces.Load
	// lastSeq is the sequence number (Report.Epoch) of the last report taken
	// from this session (under Daemon.mu): an older or repeated one is
	// dropped, so the controller samples each report once.
	lastSeq uint64
	// groupTerm is the Raft term the child's replica stated in its Hello (a
	// child tier; 0 for hosts).
	groupTerm uint64
}

// offerCapacity hands c to the session's worker, replacing one not yet taken.
func (s *childSession) offerCapacity(c interfaces.Load) {
	for {
		select {
		case s.capacity <- c:
			return
		default:
		}
		select {
		case <-s.capacity:
		default:
		}
	}
}

// sendWait queues m for the child, waiting for room: only the session's own
// handler uses it, for the session's first messages (the lease, then the
// Hello reconciliation, which may be one Assign per shard the child owns:
// more than the outbox holds), never a caller holding a lock. It gives up when
// the session closes, its sender stops or ctx ends.
func (s *childSession) sendWait(ctx context.Context, m *wire.ParentMessage) bool {
	select {
	case s.out <- m:
		return true
	case <-s.closed:
	case <-s.senderDone:
	case <-ctx.Done():
	}
	return false
}

// send queues m for the child without blocking; a full queue drops m (the
// reconciliation on the next report or Hello re-sends what matters).
func (s *childSession) send(m *wire.ParentMessage) bool {
	select {
	case s.out <- m:
		return true
	case <-s.closed:
		return false
	default:
		return false
	}
}

// Connect is the parent side of the shard-assignment session.
func (d *Daemon) Connect(stream wire.Session_ConnectServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	hello := first.GetHello()
	if hello == nil {
		return status.Error(codes.InvalidArgument, "session: the first message must be a Hello")
	}
	child, err := d.helloChild(hello)
	if err != nil {
		return wire.ToStatus(err)
	}
	if err := d.checkChildIdentity(stream.Context(), child); err != nil {
		return err
	}
	if child.Tier != d.cfg.ChildTier {
		return status.Errorf(codes.FailedPrecondition, "a %s cannot be a child of %s %s: in the chain %s its children are %s tier instances",
			child.Tier, d.cfg.Tier, d.cfg.Instance, ChainString(d.cfg.Chain), d.cfg.ChildTier)
	}
	version, err := wire.Negotiate(wire.SupportedVersions(), wire.HelloVersions(hello))
	if err != nil {
		return wire.ToStatus(err)
	}
	if !d.IsLeader() {
		addr, id := d.leaderGRPC()
		return stream.Send(&wire.ParentMessage{Msg: &wire.ParentMessage_Redirect{Redirect: &wire.Redirect{LeaderAddress: addr, LeaderId: id}}})
	}
	if d.up != nil && d.up.leaseLeft(time.Now()) <= 0 {
		// Leases below us are bounded by ours: without one we can grant none.
		return status.Error(codes.Unavailable, "this tier holds no lease from its parent yet; retry shortly")
	}
	ctx := stream.Context()
	if h := testHookConnect.Load(); h != nil {
		(*h)(d)
	}
	if err := d.registerChild(ctx, child, hello.GetGroupTerm()); err != nil {
		return wire.ToStatus(err)
	}
	s := &childSession{id: child.ID, out: make(chan *wire.ParentMessage, 8192), version: version, closed: make(chan struct{}), senderDone: make(chan struct{}), capacity: make(chan interfaces.Load, 1), groupTerm: hello.GetGroupTerm()}
	d.mu.Lock()
	if !d.leader {
		// Leadership moved since the check above (the loop's stepDown takes
		// this lock): a session opened now would never be closed.
		d.mu.Unlock()
		return status.Error(codes.Unavailable, "this replica is no longer the leader; reconnect")
	}
	old := d.sessions[child.ID]
	if old != nil {
		// Two replicas of the child's group may both have passed
		// registerChild; the one of the newer term keeps the session.
		if _, err := tiercore.AdmitHello(child.ID, old.groupTerm, s.groupTerm); err != nil {
			d.mu.Unlock()
			return wire.ToStatus(err)
		}
	}
	s.term = d.leaderTerm
	delete(d.reports, child.ID) // the last session's: the new one reports afresh
	if old != nil {
		close(old.closed) // a newer session replaces it
	}
	d.sessions[child.ID] = s
	if a := hello.GetAddress(); a != "" {
		d.addrs[child.ID] = a
	}
	d.mu.Unlock()
	d.scope.Counter("sessions_opened_total").Inc(1)
	d.logger.Printf("session: %s connected (%d shards held)", child.ID, len(hello.GetHeldEpochs()))
	defer func() {
		d.mu.Lock()
		if d.sessions[child.ID] == s {
			delete(d.sessions, child.ID)
			close(s.closed)
		}
		d.mu.Unlock()
		d.logger.Printf("session: %s disconnected", child.ID)
	}()

	// Reports (which renew the lease) are handled on the receive goroutine, at
	// once; acks and hints, which may wait for a control round, go in order to a
	// worker goroutine, so they never hold up a renewal. Both run, and the
	// sender too, before the first messages are queued: the Hello
	// reconciliation may queue more than the outbox holds (a region owning tens
	// of thousands of shards), which the child can only take in while its acks
	// are read.
	recvErr := make(chan error, 1)
	work := make(chan *wire.ChildMessage, 8192)
	go func() {
		// The stream's context ends when Connect returns.
		for {
			select {
			case m := <-work:
				d.onChildMessage(ctx, s, m)
			case c := <-s.capacity:
				d.updateCapacity(ctx, s.id, c)
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			if m.GetReport() != nil {
				d.onChildMessage(ctx, s, m)
				continue
			}
			select {
			case work <- m:
			case <-ctx.Done():
				recvErr <- ctx.Err()
				return
			}
		}
	}()
	sendErr := make(chan error, 1)
	go func() {
		defer close(s.senderDone)
		for {
			select {
			case m := <-s.out:
				if !d.leadsIn(s.term) {
					// Deposed (the control loop's step-down, which closes
					// the session, comes at its next poll): what this
					// replica decided from its state may be stale, and
					// the child must hear only its group's leader.
					sendErr <- status.Error(codes.Unavailable, "this replica is no longer the leader; reconnect")
					return
				}
				if g := m.GetLeaseGrant(); g != nil {
					if !d.capGrant(g) || !d.stampGrant(s) {
						continue // our own lease ran out, not leader now, or the child is being declared lost
					}
				}
				if err := stream.Send(m); err != nil {
					sendErr <- err
					return
				}
			case <-s.closed:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	wait := func(m *wire.ParentMessage) bool { return s.sendWait(ctx, m) }
	wait(d.grantMessage(s, 0)) // answers the Hello
	d.reconcileHeld(s, hello.GetHeldEpochs(), wait)
	d.poke()

	for {
		select {
		case err := <-sendErr:
			return err
		case err := <-recvErr:
			return err
		case <-s.closed:
			return status.Error(codes.Aborted, "session closed by the parent (replaced by a newer one, or the lease expired); reconnect")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// registerChild registers or refreshes child from its Hello, under the decide
// lock so that it does not overwrite a drain or a capacity committed between
// its read and its write. A draining child stays draining; a failed one that is
// back is active again.
//
// groupTerm is the Raft term the Hello states (a child tier): one older than
// the last accepted from the child is refused (tiercore.AdmitHello), and the
// newest is kept with the child's record (GroupTermLabel), replicated, so a new
// leader of this tier refuses a deposed replica's Hello too.
func (d *Daemon) registerChild(ctx context.Context, child interfaces.Child, groupTerm uint64) error {
	d.decide.Lock()
	defer d.decide.Unlock()
	old, ok := d.tier.FSM.Child(child.ID)
	term, err := tiercore.AdmitHello(child.ID, groupTermOf(old), groupTerm)
	if err != nil {
		return err
	}
	child.Labels = withGroupTerm(child.Labels, term)
	if ok && old.State == interfaces.ChildDraining {
		child.State = interfaces.ChildDraining
	}
	if ok && sameChild(old, child) {
		return nil
	}
	if h := testHookRegister.Load(); h != nil {
		(*h)(d)
	}
	if _, err := d.exec(ctx, &fsm.PutChild{Child: child}); err != nil {
		return fmt.Errorf("registering child %s: %w", child.ID, err)
	}
	return nil
}

// dropSession ends a child's session (the child reconnects with a Hello).
func (d *Daemon) dropSession(s *childSession, why string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sessions[s.id] == s {
		delete(d.sessions, s.id)
		close(s.closed)
		d.logger.Printf("session %s: closed: %s", s.id, why)
	}
}

func sameChild(a, b interfaces.Child) bool {
	if a.ID != b.ID || a.Tier != b.Tier || a.State != b.State || !a.Capacity.Equal(b.Capacity) || len(a.Labels) != len(b.Labels) {
		return false
	}
	for k, v := range a.Labels {
		if b.Labels[k] != v {
			return false
		}
	}
	return true
}

func (d *Daemon) helloChild(h *wire.Hello) (interfaces.Child, error) {
	budget := time.Duration(h.GetStopBudgetNanos())
	if budget < 0 || budget > maxStopBudget {
		return interfaces.Child{}, fmt.Errorf("hello.stop_budget: must be in [0, %v] (got %v): %w", maxStopBudget, budget, interfaces.ErrInvalid)
	}
	if h.GetTier() == "" {
		// A child that names no tier belongs to the one below ours.
		h = &wire.Hello{ChildId: h.GetChildId(), Tier: d.cfg.ChildTier, Capacity: h.GetCapacity(), Labels: h.GetLabels()}
	}
	c, _, err := wire.HelloFromWire(h)
	if err != nil {
		return c, err
	}
	// The budget is kept with the child's record, replicated, so that a new
	// leader waits for it too (silent) before the child has reconnected.
	if _, taken := c.Labels[StopBudgetLabel]; taken || budget > 0 {
		labels := make(map[string]string, len(c.Labels)+1)
		for k, v := range c.Labels {
			labels[k] = v
		}
		delete(labels, StopBudgetLabel) // reserved: only the Hello's field sets it
		if budget > 0 {
			labels[StopBudgetLabel] = budget.String()
		}
		c.Labels = labels
	}
	return c, nil
}

// StopBudgetLabel is the child label that records the stop budget the child
// announced in its Hello (wire Hello.stop_budget_nanos): how long after its
// fence it may still be stopping shards. It is reserved: a label of that name
// in a child's configuration is replaced.
const StopBudgetLabel = "strata.stop_budget"

// GroupTermLabel is the child label that records the newest Raft term a child
// tier stated in a Hello this tier accepted (wire Hello.group_term). It is
// reserved: a label of that name in a child's configuration is replaced.
const GroupTermLabel = "strata.group_term"

// groupTermOf is the group term recorded for child c (0 when none).
func groupTermOf(c interfaces.Child) uint64 {
	t, err := strconv.ParseUint(c.Labels[GroupTermLabel], 10, 64)
	if err != nil {
		return 0
	}
	return t
}

// withGroupTerm returns labels with GroupTermLabel set to term (removed when
// term is 0), copied when it changes.
func withGroupTerm(labels map[string]string, term uint64) map[string]string {
	v, has := labels[GroupTermLabel]
	if term == 0 && !has || term != 0 && v == strconv.FormatUint(term, 10) {
		return labels
	}
	out := make(map[string]string, len(labels)+1)
	for k, v := range labels {
		out[k] = v
	}
	delete(out, GroupTermLabel)
	if term != 0 {
		out[GroupTermLabel] = strconv.FormatUint(term, 10)
	}
	return out
}

// maxStopBudget bounds a child's announced stop budget.
const maxStopBudget = time.Hour

// stopBudget is the stop budget recorded for child c (0 when none).
func stopBudget(c interfaces.Child) time.Duration {
	b, err := time.ParseDuration(c.Labels[StopBudgetLabel])
	if err != nil || b < 0 || b > maxStopBudget {
		return 0
	}
	return b
}

// grant queues a LeaseGrant for s in answer to its report numbered seq. Its
// sender decides, as it leaves, whether it may go, how long it runs and when it
// was granted (capGrant, stampGrant).
func (d *Daemon) grant(s *childSession, seq uint64) { s.send(d.grantMessage(s, seq)) }

// grantMessage is a LeaseGrant of LeaseTTL for s, answering its report
// numbered seq (0: its Hello). The grant echoes seq (report_seq): the child
// times the lease from its own send of that message, which precedes this
// grant's send, from which this side counts (stampGrant), so the child's
// lease always ends first.
func (d *Daemon) grantMessage(s *childSession, seq uint64) *wire.ParentMessage {
	_, leaderID := d.leaderGRPC()
	g := &wire.LeaseGrant{
		LeaseId:             fmt.Sprintf("%s/%s", d.cfg.Instance, s.id),
		TtlNanos:            int64(d.cfg.LeaseTTL),
		Term:                d.tier.Raft().CurrentTerm(),
		LeaderId:            leaderID,
		ProtocolVersion:     s.version,
		ReportIntervalNanos: int64(d.cfg.ReportInterval),
		ReportSeq:           seq,
	}
	return &wire.ParentMessage{Msg: &wire.ParentMessage_LeaseGrant{LeaseGrant: g}}
}

// capGrant shortens g, as it leaves, to what this tier's own lease from its
// parent has left (a tier grants no more than it holds; the grant may have
// waited in the outbox behind a reconciliation); false when nothing is left:
// then the children fence with it.
func (d *Daemon) capGrant(g *wire.LeaseGrant) bool {
	if d.up == nil {
		return true
	}
	left := d.up.leaseLeft(time.Now())
	if left <= 0 {
		return false
	}
	if time.Duration(g.GetTtlNanos()) > left {
		g.TtlNanos = int64(left)
	}
	return true
}

// stampGrant is called by s's sender just before it sends a LeaseGrant: it
// reports whether the grant may go — this replica still leads, in the term it
// opened the session in, s is the child's session, and the child is neither
// failed nor being declared failed — and if so records the grant's time. The
// time is taken as the grant leaves, not when it was queued, so that a grant
// that waited in the outbox does not outlive what the leader counts (silent).
func (d *Daemon) stampGrant(s *childSession) bool {
	if !d.tier.IsLeader() || d.tier.Raft().CurrentTerm() != s.term {
		return false
	}
	if c, ok := d.tier.FSM.Child(s.id); ok && c.State == interfaces.ChildFailed {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.leader || d.leaderTerm != s.term || d.sessions[s.id] != s || d.declaring[s.id] {
		return false
	}
	now := time.Now()
	d.lastGrant[s.id], d.heard[s.id] = now, now
	return true
}

// reconcileHeld compares what a (re)connecting child holds with the committed
// assignment and sends what tiercore.Reconcile decides: shards it should run
// and does not (or at an older epoch) are assigned again; shards it holds that
// it must not — another child's, one moving away from it, one this tier's
// parent is taking back, one deleted here — are revoked. Epochs here are wire
// epochs (see epochs.go).
//
// send queues a message for s (Connect passes one that waits for room).
func (d *Daemon) reconcileHeld(s *childSession, held map[string]uint64, send func(*wire.ParentMessage) bool) {
	h := make(map[interfaces.ShardID]uint64, len(held))
	for id, e := range held {
		h[interfaces.ShardID(id)] = e
	}
	d.sendReconciled(tiercore.Reconcile(d.reconcileInput(s.id, h, true)), send)
}

// reconcileInput is the committed state tiercore.Reconcile compares what child
// holds (held) with.
func (d *Daemon) reconcileInput(child interfaces.ChildID, held map[interfaces.ShardID]uint64, stated bool) tiercore.Input {
	owned, away := d.owned.of(d.tier.FSM, child), d.owned.away(d.tier.FSM, child)
	in := tiercore.Input{Child: child, Held: held, EpochsStated: stated, Owned: make([]tiercore.Shard, 0, len(owned))}
	for _, a := range owned {
		var from interfaces.ChildID
		if away[a.Shard] {
			from = child
		}
		in.Owned = append(in.Owned, d.coreShard(a.Shard, a.Child, a.Epoch, from))
	}
	in.Lookup = func(id interfaces.ShardID) (tiercore.Shard, bool) {
		st, ok := d.tier.FSM.Shard(id)
		if !ok {
			return tiercore.Shard{}, false
		}
		return d.coreShardOf(st), true
	}
	in.Gone = d.goneEpoch
	return in
}

// coreShard is a shard of the committed state as tiercore sees it, with the
// wire epochs this tier sends for it now.
func (d *Daemon) coreShard(id interfaces.ShardID, owner interfaces.ChildID, e interfaces.Epoch, movingFrom interfaces.ChildID) tiercore.Shard {
	s := tiercore.Shard{ID: id, Owner: owner, MovingFrom: movingFrom, Leaving: d.up != nil && d.up.leaving(id)}
	if we, ok := d.wireEpoch(id, e); ok {
		s.AssignEpoch = we
	}
	if we, ok := d.revokeEpoch(id, e); ok {
		s.RevokeEpoch = we
	}
	return s
}

func (d *Daemon) coreShardOf(st fsm.ShardState) tiercore.Shard {
	var from interfaces.ChildID
	if st.InFlight != nil {
		from = st.InFlight.From
	}
	return d.coreShard(st.Spec.ID, st.Owner, st.Epoch, from)
}

// goneEpoch is the wire epoch a revoke of a shard this tier no longer has
// carries (0: none known): its epoch when it was deleted here, this tier's
// tombstone of its parent's revoke (the highest wire epoch of that parent
// epoch), and at the top tier the state's epoch floor (every deleted job's
// shards are retired, so the floor is at least their last epoch).
func (d *Daemon) goneEpoch(id interfaces.ShardID) uint64 {
	d.mu.Lock()
	e := d.deleted[id]
	d.mu.Unlock()
	if d.up == nil {
		return max(e, uint64(d.tier.FSM.EpochFloor()))
	}
	d.up.mu.Lock()
	defer d.up.mu.Unlock()
	return max(e, d.up.core.GoneEpoch(id))
}

// sendReconciled sends what tiercore.Reconcile decided, with send; Assigns
// are recorded (assignSent).
func (d *Daemon) sendReconciled(msgs []tiercore.Msg, send func(*wire.ParentMessage) bool) {
	for _, m := range msgs {
		switch m.Kind {
		case tiercore.Assign:
			st, ok := d.tier.FSM.Shard(m.Shard)
			if !ok {
				continue
			}
			if send(wire.AssignToWire(st.Spec, interfaces.Epoch(m.Epoch))) {
				d.mu.Lock()
				d.assignSent.Sent(m.Shard, m.Epoch, time.Now())
				d.mu.Unlock()
			}
		case tiercore.Revoke:
			send(wire.RevokeToWire(m.Shard, interfaces.Epoch(m.Epoch)))
		}
	}
}

// sendAssign sends Assign(shard, epoch, spec) to child, if it has a session.
func (d *Daemon) sendAssign(child interfaces.ChildID, shard interfaces.ShardID, epoch interfaces.Epoch) bool {
	d.mu.Lock()
	s := d.sessions[child]
	d.mu.Unlock()
	if s == nil {
		return false
	}
	return d.assignOn(s, shard, epoch, s.send)
}

// assignOn queues Assign(shard, epoch, spec) for session s with send and
// records it (assignSent).
func (d *Daemon) assignOn(s *childSession, shard interfaces.ShardID, epoch interfaces.Epoch, send func(*wire.ParentMessage) bool) bool {
	st, ok := d.tier.FSM.Shard(shard)
	if !ok || !tiercore.MayAssign(d.coreShardOf(st), s.id) {
		// Not its owner now, moving away from it, or being taken back by
		// our parent: an Assign would make a second owner.
		return false
	}
	we, known := d.wireEpoch(shard, epoch)
	if !known {
		return false
	}
	if send(wire.AssignToWire(st.Spec, interfaces.Epoch(we))) {
		d.mu.Lock()
		d.assignSent.Sent(shard, we, time.Now())
		d.mu.Unlock()
		return true
	}
	return false
}

// sendRevoke sends Revoke(shard, epoch) to child, if it has a session; epoch is
// this tier's (local) epoch.
func (d *Daemon) sendRevoke(child interfaces.ChildID, shard interfaces.ShardID, epoch interfaces.Epoch) bool {
	we, known := d.revokeEpoch(shard, epoch)
	if !known {
		return false
	}
	d.mu.Lock()
	s := d.sessions[child]
	d.mu.Unlock()
	if s == nil {
		return false
	}
	if s.send(wire.RevokeToWire(shard, interfaces.Epoch(we))) {
		d.mu.Lock()
		d.revokeSent[shard] = time.Now()
		d.mu.Unlock()
		return true
	}
	return false
}

func (d *Daemon) onChildMessage(ctx context.Context, s *childSession, m *wire.ChildMessage) {
	switch msg := m.GetMsg().(type) {
	case *wire.ChildMessage_Report:
		r, err := wire.ReportFromWire(msg.Report)
		if err != nil {
			d.logger.Printf("session %s: bad report: %v", s.id, err)
			return
		}
		r.Child = s.id
		d.mu.Lock()
		if !d.leader || d.sessions[s.id] != s {
			// Processed after a step-down or after a newer session took
			// over: this session's reports are history.
			d.mu.Unlock()
			return
		}
		if r.Epoch != 0 && r.Epoch <= s.lastSeq {
			d.mu.Unlock()
			d.logger.Printf("session %s: report %d after report %d is dropped", s.id, r.Epoch, s.lastSeq)
			return
		}
		s.lastSeq = r.Epoch
		d.reports[s.id] = r
		d.mu.Unlock()
		c, known := d.tier.FSM.Child(s.id)
		if known && c.State == interfaces.ChildFailed {
			// Declared lost while its stream lingered: its shards may run elsewhere
			// now. No renewal; it must reconnect, and its Hello is reconciled.
			d.dropSession(s, "its lease expired and its shards were re-placed")
			return
		}
		d.grant(s, r.Epoch) // every report renews the lease, before any commit below
		// A child tier's capacity is the sum of its children's: it changes as
		// they come and go, and its reports say so.
		if known && !r.Capacity.IsZero() && !c.Capacity.Equal(r.Capacity) && s.capacity != nil {
			s.offerCapacity(r.Capacity) // committed by the worker: a renewal never waits for decide
		}
		if d.cfg.ChildTier == interfaces.TierHost {
			d.reconcileReport(s, r)
		}
	case *wire.ChildMessage_Ack:
		d.onAck(ctx, s, msg.Ack)
	case *wire.ChildMessage_Hint:
		h, err := wire.HintFromWire(msg.Hint)
		if err != nil {
			d.logger.Printf("session %s: bad hint: %v", s.id, err)
			return
		}
		d.mu.Lock()
		if r, ok := d.reports[s.id]; ok && d.leader && d.sessions[s.id] == s {
			// Onto this session's last report; a hint before any report
			// waits for the next one (it would stand for a report of zeros).
			r.Hints = append(r.Hints[:0:0], h)
			d.reports[s.id] = r
		}
		d.mu.Unlock()
	case *wire.ChildMessage_Hello:
		// A child restating what it holds (a child tier does so now and
		// then: uplink.report): reconciled like the first Hello. Nothing
		// else in it changes the session.
		if msg.Hello.GetChildId() != string(s.id) {
			d.logger.Printf("session %s: a Hello for %q on this session is ignored", s.id, msg.Hello.GetChildId())
			return
		}
		d.mu.Lock()
		live := d.leader && d.sessions[s.id] == s
		d.mu.Unlock()
		if live {
			d.reconcileHeld(s, msg.Hello.GetHeldEpochs(), s.send)
		}
	}
}

// reconcileReport: a host reports every shard it runs. Shards it should run but
// does not are assigned again (when due: see below); shards it runs that it must
// not are revoked (tiercore.Reconcile, without epochs).
func (d *Daemon) reconcileReport(s *childSession, r interfaces.Report) {
	running := make(map[interfaces.ShardID]uint64, len(r.Shards))
	for _, sl := range r.Shards {
		running[sl.Shard] = 0
	}
	now := time.Now()
	in := d.reconcileInput(s.id, running, false)
	due := map[interfaces.ShardID]bool{}
	d.mu.Lock()
	for _, a := range in.Owned {
		if _, ok := running[a.ID]; ok {
			continue
		}
		// Re-send when the child acked it and still does not run it (it fenced
		// or lost it), or when no ack came for a long while (tiercore.Assigns).
		if d.assignSent.Due(a.ID, now, d.cfg.ReportInterval, d.cfg.LeaseTTL) {
			due[a.ID] = true
		}
	}
	d.mu.Unlock()
	in.Due = func(id interfaces.ShardID) bool { return due[id] }
	d.sendReconciled(tiercore.Reconcile(in), s.send)
}

// heldBy reports whether child owns shard here, or is its in-flight move's
// target: only such a child's word that the shard's process failed is
// evidence (a child could otherwise have any shard quarantined).
func (d *Daemon) heldBy(shard interfaces.ShardID, child interfaces.ChildID) bool {
	st, ok := d.tier.FSM.Shard(shard)
	return ok && (st.Owner == child || st.InFlight != nil && st.InFlight.To == child)
}

// onAck: a revoke ack lets an in-flight move complete (epoch+1, then Assign to
// the new owner), or lets a revoke asked by our parent finish.
func (d *Daemon) onAck(ctx context.Context, s *childSession, ack *wire.Ack) {
	shard := interfaces.ShardID(ack.GetShard())
	if ack.GetKind() == wire.AckKind_ACK_KIND_ASSIGN {
		d.mu.Lock()
		// A refusal (e.g. no lease yet) is due again at the next report.
		if d.assignSent.Acked(shard, ack.GetEpoch(), ack.GetOk()) {
			if ack.GetOk() {
				delete(d.refused, shard)
			} else if d.cfg.ChildTier != interfaces.TierHost && !strings.Contains(ack.GetError(), interfaces.ErrStaleEpoch.Error()) {
				// A child tier's refusal other than a stale epoch (which
				// the same Assign would meet again) is retried.
				d.refused[shard] = time.Now()
			}
		}
		d.mu.Unlock()
	}
	if !ack.GetOk() {
		d.scope.Counter("acks_failed_total").Inc(1)
		d.logger.Printf("session %s: %s of %s@%d failed: %s", s.id, ack.GetKind(), shard, ack.GetEpoch(), ack.GetError())
		if ack.GetFailed() && d.heldBy(shard, s.id) {
			d.noteFailure(shard, s.id, ack.GetError(), time.Now()) // evidence for the doctor
		}
		if ack.GetKind() == wire.AckKind_ACK_KIND_ASSIGN && ack.GetRevokedAt() >= ack.GetEpoch() && ack.GetRevokedAt() > 0 && d.IsLeader() {
			d.unassignRevoked(ctx, s, shard, ack.GetEpoch())
		}
		return
	}
	if ack.GetKind() != wire.AckKind_ACK_KIND_REVOKE {
		return
	}
	if !d.IsLeader() {
		return
	}
	d.decide.Lock()
	defer d.decide.Unlock()
	st, ok := d.tier.FSM.Shard(shard)
	var cs tiercore.Shard
	if ok {
		cs = d.coreShardOf(st)
	}
	// Only an ack of the revoke sent now counts (tiercore.RevokeAcked): a
	// late duplicate of an earlier move's revoke (the loop re-sends them)
	// must not complete a move while the source still runs the shard.
	switch tiercore.RevokeAcked(cs, ok, s.id, ack.GetEpoch(), d.up != nil && d.up.leaving(shard)) {
	case tiercore.AckCompleteMove:
		d.completeMove(ctx, shard, st.Epoch, st.InFlight.To)
	case tiercore.AckFinishRevoke:
		d.up.finishAcked(ctx, shard)
	}
}

// unassignRevoked takes shard off child s when s refused its Assign at wire
// epoch we because it revoked the shard at that epoch or later: s will never
// run it under that epoch (a failed-start mark lost in a restart leaves only
// the tombstone), so re-sending it would wait for ever. Unassigned, the next
// round places it again under a new epoch, on s or elsewhere.
func (d *Daemon) unassignRevoked(ctx context.Context, s *childSession, shard interfaces.ShardID, we uint64) {
	d.decide.Lock()
	defer d.decide.Unlock()
	st, ok := d.tier.FSM.Shard(shard)
	if !ok || st.Owner != s.id || st.InFlight != nil {
		return
	}
	if cur, known := d.wireEpoch(shard, st.Epoch); !known || cur != we {
		return // the refusal is of an older Assign
	}
	if _, err := d.commit(ctx, &fsm.Unassign{Shard: shard, Epoch: st.Epoch, Reason: fmt.Sprintf("%s refused it at epoch %d, which it had revoked", s.id, we)}); err != nil {
		d.logger.Printf("unassigning %s off %s: %v", shard, s.id, err)
		return
	}
	d.poke()
}

// completeMove commits an in-flight move and assigns the shard to its new owner.
func (d *Daemon) completeMove(ctx context.Context, shard interfaces.ShardID, epoch interfaces.Epoch, to interfaces.ChildID) {
	res, err := d.commit(ctx, &fsm.CompleteMove{Shard: shard, Epoch: epoch})
	if err != nil {
		if !errors.Is(err, interfaces.ErrStaleEpoch) && !errors.Is(err, interfaces.ErrConflict) {
			d.logger.Printf("complete move of %s: %v", shard, err)
		}
		return
	}
	d.mu.Lock()
	delete(d.revokeSent, shard)
	d.mu.Unlock()
	d.scope.Counter("moves_committed_total").Inc(1)
	d.sendAssign(to, shard, res.Ops[0].Epoch)
}

// ownedIndex groups the FSM's assignments by child, rebuilt only when the FSM's
// applied index has moved: every child reports every interval, and scanning
// all assignments per report would cost shards × children per interval, while
// commits come far less often than reports.
type ownedIndex struct {
	mu sync.Mutex
	at uint64                                         // the applied index by was built at
	by map[interfaces.ChildID][]interfaces.Assignment // nil until first built
	// moving holds, per child, its shards that are moving away from it (the
	// sources of in-flight moves), built with by.
	moving map[interfaces.ChildID]map[interfaces.ShardID]bool
}

// of returns child id's assignments. The applied index is read before the
// assignments: if a commit lands in between, the index is older than the data
// and the next call rebuilds — never the other way round.
func (o *ownedIndex) of(f *fsm.FSM, id interfaces.ChildID) []interfaces.Assignment {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.build(f)
	return o.by[id]
}

// away returns child id's shards that are moving away from it.
func (o *ownedIndex) away(f *fsm.FSM, id interfaces.ChildID) map[interfaces.ShardID]bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.build(f)
	return o.moving[id]
}

// build rebuilds the index if the FSM's applied index moved (o.mu held).
func (o *ownedIndex) build(f *fsm.FSM) {
	at := f.AppliedIndex()
	if o.by != nil && o.at == at {
		return
	}
	by := make(map[interfaces.ChildID][]interfaces.Assignment, len(o.by))
	for _, a := range f.Assignments() {
		by[a.Child] = append(by[a.Child], a)
	}
	away := map[interfaces.ChildID]map[interfaces.ShardID]bool{}
	for _, m := range f.InFlight() {
		if away[m.From] == nil {
			away[m.From] = map[interfaces.ShardID]bool{}
		}
		away[m.From][m.Shard] = true
	}
	o.by, o.moving, o.at = by, away, at
}

// updateCapacity commits child's reported capacity, under the decide lock and
// from a fresh read of its record, so that it does not overwrite a state an
// operator's drain or the control loop committed meanwhile.
func (d *Daemon) updateCapacity(ctx context.Context, child interfaces.ChildID, capacity interfaces.Load) {
	d.decide.Lock()
	defer d.decide.Unlock()
	c, ok := d.tier.FSM.Child(child)
	if !ok || c.Capacity.Equal(capacity) {
		return
	}
	c.Capacity = capacity
	if _, err := d.exec(ctx, &fsm.PutChild{Child: c}); err != nil {
		d.logger.Printf("session %s: updating capacity: %v", child, err)
	}
}

// ServerKeepalive are the gRPC server options of a tier's Session and Admin
// server: it pings a silent client connection every 10s and drops it when the
// ping is not answered within 5s (a dead or cut-off child's stream ends, so its
// session is not kept open for ever), and it permits the children's own pings
// (coordinator/session: every 10s, with or without a stream) down to every 5s.
func ServerKeepalive() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 10 * time.Second, Timeout: 5 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
	}
}
