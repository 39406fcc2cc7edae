package tierd

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/coordinator/session"
	"github.com/strata-sched/strata/coordinator/tiercore"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

// uplink is a tier instance's session with its parent, run by the leader: the
// instance is one child of its parent. Assign puts the shard into this tier's
// FSM (to be placed on a child); Revoke takes it back from the child that runs
// it and acks only once that child has acked (moves go down the tree).
type uplink struct {
	d      *Daemon
	client *session.Client

	mu sync.Mutex
	// core is the uplink's state and decisions (the parent's epochs, pending
	// revokes, tombstones, the lease): tiercore.Uplink, under mu. Its
	// tombstones are kept across reconnects; docs/reliability.md gives the
	// bound.
	core   *tiercore.Uplink
	cancel context.CancelFunc
	done   chan struct{}
	// term is the Raft term this replica leads in while the uplink runs: its
	// Hello states it (group_term) and it stops when the replica no longer
	// leads in it.
	term uint64
}

type uplinkHandler struct{ u *uplink }

func newUplink(d *Daemon) *uplink {
	u := &uplink{d: d, core: tiercore.NewUplink(tiercore.Mutations{})}
	c, err := session.NewClient(session.Config{
		Parents:        d.cfg.Parent,
		Hello:          u.hello,
		Report:         u.report,
		ReportInterval: d.cfg.Interval,
		Seed:           uint64(len(d.cfg.NodeID)),
		Logf:           d.logger.Printf,
		Credentials:    d.parentCredentials(),
		// Anti-entropy between Hellos: a report lists only the heaviest
		// shards, so every restateEvery reports a Hello follows, stating
		// every shard held with its epoch, and the parent reconciles it.
		RestateEvery: restateEvery,
	}, uplinkHandler{u})
	if err != nil {
		panic(err) // Config.Validate guarantees parents
	}
	u.client = c
	return u
}

// start runs the session with the parent while this replica leads in term:
// the client, and a watcher that ends it as soon as Raft reports that the
// replica no longer leads in term (not only when the control loop next polls:
// a deposed leader's uplink would reconnect meanwhile and take the session
// over from the group's real leader).
func (u *uplink) start(ctx context.Context, term uint64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	u.cancel, u.term = cancel, term
	u.done = make(chan struct{})
	done := u.done
	go func() {
		defer close(done)
		watched := make(chan struct{})
		go func() { defer close(watched); u.watchLeadership(ctx, cancel, term) }()
		_ = u.client.Run(ctx)
		cancel()
		<-watched
	}()
}

// watchLeadership cancels the uplink (and wakes the control loop, which steps
// down) once this replica no longer leads in term; it wakes on every Raft
// state change (Daemon.raftEvents).
func (u *uplink) watchLeadership(ctx context.Context, cancel context.CancelFunc, term uint64) {
	for {
		if !u.d.leadsIn(term) {
			u.d.logger.Printf("uplink: no longer leading in term %d: session with the parent ended", term)
			cancel()
			u.d.poke()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-u.d.raftEvents:
		}
	}
}

// leaving reports whether the parent is taking shard back (a revoke pending):
// it is assigned to no child meanwhile.
func (u *uplink) leaving(shard interfaces.ShardID) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.core.Leaving(shard)
}

// tombstone is the parent epoch the parent last revoked shard at, if any.
func (u *uplink) tombstone(shard interfaces.ShardID) (uint64, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.core.Tombstone(shard)
}

func (u *uplink) stop() {
	u.mu.Lock()
	cancel, done := u.cancel, u.done
	u.cancel, u.done = nil, nil
	u.core.EndLease()
	u.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// leaseLeft is how long this instance's own lease from its parent has to run.
func (u *uplink) leaseLeft(now time.Time) time.Duration {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.core.LeaseLeft(now)
}

// capacity is this instance's capacity as its parent sees it: the sum of its
// active children's.
func (u *uplink) capacity() interfaces.Load {
	var c interfaces.Load
	for _, cu := range u.d.tier.FSM.Children() {
		if cu.Child.State == interfaces.ChildActive {
			c = c.Add(cu.Child.Capacity)
		}
	}
	return c.Capped() // valid however many children add up
}

func (u *uplink) hello() *wire.Hello {
	d := u.d
	capacity := u.capacity()
	if capacity.IsZero() {
		capacity = interfaces.Load{Tasks: 1} // no children yet: announce a token capacity
	}
	held := map[string]uint64{}
	u.mu.Lock()
	for _, a := range d.tier.FSM.Assignments() {
		held[string(a.Shard)] = u.core.Epoch(a.Shard)
	}
	u.mu.Unlock()
	// Unplaced shards are held too: the parent gave them to us.
	view := d.tier.FSM.View(d.cfg.Tier, d.cfg.Instance)
	u.mu.Lock()
	for _, s := range view.Shards {
		if _, ok := held[string(s.ID)]; !ok {
			held[string(s.ID)] = u.core.Epoch(s.ID)
		}
	}
	term := u.term
	u.mu.Unlock()
	return &wire.Hello{
		GroupTerm:          term,
		ChildId:            d.cfg.Instance,
		Tier:               d.cfg.Tier,
		Capacity:           wire.LoadToWire(capacity),
		ProtocolVersion:    wire.ContractVersion,
		MinProtocolVersion: wire.MinContractVersion,
		HeldEpochs:         held,
		Address:            d.advertisedGRPC(),
		Labels:             d.cfg.Labels,
		StopBudgetNanos:    int64(u.childrenStopBudget()),
	}
}

// childrenStopBudget is the largest stop budget of this instance's children:
// its parent must wait for that too after this instance's lease runs out
// (the children's leases end with it). A child that connects later with a
// larger budget counts from this instance's next session with its parent.
func (u *uplink) childrenStopBudget() time.Duration {
	var b time.Duration
	for _, cu := range u.d.tier.FSM.Children() {
		b = max(b, stopBudget(cu.Child))
	}
	return b
}

// report aggregates the children's reports: the instance's capacity and used
// load, its headroom, its worst latency, its throughput and its heaviest shards.
func (u *uplink) report() *wire.Report {
	d := u.d
	u.mu.Lock()
	term := u.term
	u.mu.Unlock()
	if !d.leadsIn(term) {
		return nil // deposed: say nothing (the watcher ends the session)
	}
	var r interfaces.Report
	r.Child = interfaces.ChildID(d.cfg.Instance)
	r.Capacity = u.capacity()
	// Only the children that count now: a failed or removed child's last
	// report is history (its shards run elsewhere).
	live := map[interfaces.ChildID]bool{}
	for _, cu := range d.tier.FSM.Children() {
		if cu.Child.State != interfaces.ChildFailed {
			live[cu.Child.ID] = true
		}
	}
	d.mu.Lock()
	var reported []interfaces.Report
	for id, cr := range d.reports {
		if !live[id] {
			continue
		}
		r.Used = r.Used.Add(cr.Used)
		r.Throughput += cr.Throughput
		if cr.LatencyP99 > r.LatencyP99 {
			r.LatencyP99 = cr.LatencyP99
		}
		if cr.LatencyP50 > r.LatencyP50 {
			r.LatencyP50 = cr.LatencyP50
		}
		reported = append(reported, cr)
	}
	d.mu.Unlock()
	// Each shard's load as its owner reports it, once: a former owner's last
	// report may still name a shard that moved.
	var shards []interfaces.ShardLoad
	for _, cr := range reported {
		for _, sl := range cr.Shards {
			if a, ok := d.tier.FSM.Assignment(sl.Shard); ok && a.Child == cr.Child {
				shards = append(shards, sl)
			}
		}
	}
	r.Used = r.Used.Capped()
	r.Headroom = r.Capacity.Sub(r.Used)
	sort.Slice(shards, func(i, j int) bool {
		_, a := shards[i].Load.Div(r.Capacity).MaxDim()
		_, b := shards[j].Load.Div(r.Capacity).MaxDim()
		if a != b {
			return a > b
		}
		return shards[i].Shard < shards[j].Shard
	})
	if len(shards) > 16 {
		shards = shards[:16]
	}
	r.Shards = shards
	if r.Capacity.IsZero() {
		r.Capacity = interfaces.Load{Tasks: 1}
	}
	r.Shape = d.capacityShape() // every mode: how the capacity is cut into children
	r.Hints = d.childHints()    // collaborative mode: hints derived from this tier's own view
	for i := range r.Hints {
		r.Hints[i].Amount = r.Hints[i].Amount.Capped() // sums over the children, like capacity
	}
	return wire.ReportToWire(r) // the session client numbers it (Report.epoch)
}

// restateEvery is how many reports a tier sends its parent between two
// restatements of what it holds (a Hello on the live session).
const restateEvery = 30

// filterView keeps the policy off the shards being revoked for the parent:
// they are leaving and must not be moved between children meanwhile. One
// that a child still runs stays in the view, pinned to that child: its load
// is on the child until the child stops it, and the commit's verification
// counts it there (the state does) — hidden from the plan, the child looked
// that much emptier to the policy than to the verification, and a move into
// it was planned, rejected (capacity) and planned again every round (issue
// 20, item 6). One no child runs, one on a draining or failed child (which
// takes no shards, so its room does not matter, and the shard must not look
// like one to evacuate), and one with a move in flight (which the revoke
// aborts) leave the view whole (dropShards): shards, assignments, in-flight
// moves and constraints.
func (u *uplink) filterView(v *interfaces.View) *interfaces.View {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.core.PendingCount() == 0 {
		return v
	}
	moving := map[interfaces.ShardID]bool{}
	for _, m := range v.InFlight {
		moving[m.Shard] = true
	}
	active := make(map[interfaces.ChildID]bool, len(v.Children))
	for _, c := range v.Children {
		active[c.ID] = c.State == interfaces.ChildActive
	}
	held := map[interfaces.ShardID]bool{}
	var pins []interfaces.Constraint
	on := map[interfaces.ChildID]int{} // pins index by child
	for _, a := range v.Assignments {
		if !u.core.Leaving(a.Shard) || moving[a.Shard] || !active[a.Child] {
			continue
		}
		held[a.Shard] = true
		i, ok := on[a.Child]
		if !ok {
			i = len(pins)
			on[a.Child] = i
			pins = append(pins, interfaces.Constraint{Kind: interfaces.ConstraintPin, Children: []interfaces.ChildID{a.Child},
				Reason: "revoked by the parent tier: stays on its child until the child stops it"})
		}
		pins[i].Shards = append(pins[i].Shards, a.Shard)
	}
	dropShards(v, func(id interfaces.ShardID) bool { return u.core.Leaving(id) && !held[id] })
	v.Constraints = append(v.Constraints, pins...)
	return v
}

// dropRevoking removes moves of shards our parent is taking back: a plan solved
// before the revoke arrived must not place them again.
func (u *uplink) dropRevoking(moves []interfaces.Move) []interfaces.Move {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.core.PendingCount() == 0 {
		return moves
	}
	out := moves[:0:0]
	for _, m := range moves {
		if !u.core.Leaving(m.Shard) {
			out = append(out, m)
		}
	}
	return out
}

// OnLease: the lease runs from from, our own send of the report (or Hello)
// the grant answers, minus a quarter as the safety margin
// (tiercore.Uplink.OnLease). A grant never shortens the lease an earlier one
// gave (each is the parent's promise on its own); a short or late one simply
// renews nothing.
func (h uplinkHandler) OnLease(g *wire.LeaseGrant, from time.Time) {
	h.u.mu.Lock()
	h.u.core.OnLease(from, time.Duration(g.GetTtlNanos()))
	h.u.mu.Unlock()
}

func (h uplinkHandler) OnAssign(a *wire.Assign) *wire.Ack {
	return h.OnAssigns([]*wire.Assign{a})[0]
}

// OnAssigns takes a run of Assigns from the parent: the new or changed shard
// specs are committed in one Raft entry, and each gets its ack.
func (h uplinkHandler) OnAssigns(as []*wire.Assign) []*wire.Ack {
	u, d := h.u, h.u.d
	d.decide.Lock()
	defer d.decide.Unlock()
	acks := make([]*wire.Ack, len(as))
	var put []interfaces.Shard
	var putIdx []int
	for i, a := range as {
		spec, err := wire.ShardFromWire(a.GetShard())
		if err != nil {
			acks[i] = wire.AckToWire(wire.AckKind_ACK_KIND_ASSIGN, interfaces.ShardID(a.GetShard().GetId()), interfaces.Epoch(a.GetEpoch()), err).GetAck()
			continue
		}
		epoch := interfaces.Epoch(a.GetEpoch())
		u.mu.Lock()
		tomb, refused := u.core.CheckAssign(spec.ID, uint64(epoch))
		u.mu.Unlock()
		if refused != nil {
			// Revoked at this epoch or a later one (a late or re-sent Assign),
			// or older than the epoch held. RevokedAt (when revoked) tells the
			// parent to place it again under a new epoch if it still counts it
			// ours (unassignRevoked).
			acks[i] = wire.AckToWire(wire.AckKind_ACK_KIND_ASSIGN, spec.ID, epoch, refused).GetAck()
			acks[i].RevokedAt = tomb
			continue
		}
		if st, ok := d.tier.FSM.Shard(spec.ID); !ok || !st.Spec.Equal(spec) {
			put = append(put, spec)
			putIdx = append(putIdx, i)
		}
		acks[i] = wire.AckToWire(wire.AckKind_ACK_KIND_ASSIGN, spec.ID, interfaces.Epoch(a.GetEpoch()), nil).GetAck()
	}
	if len(put) > 0 {
		res, err := d.exec(context.Background(), &fsm.PutShards{Shards: put})
		for k, i := range putIdx {
			e := err
			if e == nil && k < len(res.Ops) {
				e = res.Ops[k].Err
			}
			if e != nil {
				acks[i] = wire.AckToWire(wire.AckKind_ACK_KIND_ASSIGN, put[k].ID, interfaces.Epoch(as[i].GetEpoch()), e).GetAck()
			}
		}
	}
	u.mu.Lock()
	for i, a := range as {
		if acks[i].GetOk() {
			u.core.Assigned(interfaces.ShardID(a.GetShard().GetId()), a.GetEpoch())
		}
	}
	u.mu.Unlock()
	d.poke()
	return acks
}

func (h uplinkHandler) OnRevoke(r *wire.Revoke) *wire.Ack {
	u, d := h.u, h.u.d
	d.decide.Lock()
	defer d.decide.Unlock()
	shard := interfaces.ShardID(r.GetShard())
	epoch := interfaces.Epoch(r.GetEpoch())
	st, ok := d.tier.FSM.Shard(shard)
	// From here on no Assign at or below epoch is taken (the tombstone), and
	// a shard we have is pending until its child stopped it.
	u.mu.Lock()
	err := u.core.OnRevoke(shard, uint64(epoch), ok)
	u.mu.Unlock()
	if err != nil || !ok {
		return wire.AckToWire(wire.AckKind_ACK_KIND_REVOKE, shard, epoch, err).GetAck() // stale, or not here: done
	}
	if st.InFlight != nil {
		// A move between our children is under way: abort it (the source keeps
		// the shard), then revoke from the source. Completing it instead would
		// start the shard on the target while our parent takes it away.
		if _, err := d.exec(context.Background(), &fsm.AbortMove{Shard: shard, Epoch: st.Epoch, Reason: "revoked by the parent tier"}); err != nil {
			return wire.AckToWire(wire.AckKind_ACK_KIND_REVOKE, interfaces.ShardID(r.GetShard()), interfaces.Epoch(r.GetEpoch()), err).GetAck()
		}
		if st, ok = d.tier.FSM.Shard(shard); !ok {
			return wire.AckToWire(wire.AckKind_ACK_KIND_REVOKE, interfaces.ShardID(r.GetShard()), interfaces.Epoch(r.GetEpoch()), nil).GetAck()
		}
	}
	if u.ownerGone(st) {
		return u.finishRevoke(context.Background(), shard)
	}
	d.sendRevoke(st.Owner, shard, st.Epoch)
	return nil // acked when the child acks (finishAcked)
}

// ownerGone reports whether no child runs shard st for us: it has no owner,
// or its owner was declared failed. A parent's revoke of it is then done.
func (u *uplink) ownerGone(st fsm.ShardState) bool {
	if st.Owner == "" {
		return true
	}
	c, ok := u.d.tier.FSM.Child(st.Owner)
	return ok && c.State == interfaces.ChildFailed
}

// finishAcked finishes the parent's revoke of shard once the child that ran
// it acked (tiercore.RevokeAcked decided it may: only the owner's ack of a
// revoke at the shard's current epoch counts) and acks to the parent. Called
// with d.decide held.
func (u *uplink) finishAcked(ctx context.Context, shard interfaces.ShardID) {
	if a := u.finishRevoke(ctx, shard); a != nil {
		u.client.SendAck(a)
	}
}

// finishRevoke deletes the shard from this tier (its child no longer runs it)
// and returns the ack for the parent.
func (u *uplink) finishRevoke(ctx context.Context, shard interfaces.ShardID) *wire.Ack {
	d := u.d
	u.mu.Lock()
	e, _ := u.core.Revoking(shard)
	u.mu.Unlock()
	epoch := interfaces.Epoch(e)
	if st, ok := d.tier.FSM.Shard(shard); ok {
		if we, known := d.revokeEpoch(shard, st.Epoch); known {
			d.mu.Lock()
			d.deleted[shard] = we
			d.mu.Unlock()
		}
	}
	// One entry aborts a move in flight and deletes the shard.
	res, err := d.exec(ctx, &fsm.DropShards{IDs: []interfaces.ShardID{shard}, Reason: "revoked by the parent tier"})
	if err == nil {
		if e := res.Err(); e != nil && !isNotFound(e) {
			err = e
		}
	}
	if err != nil {
		return wire.AckToWire(wire.AckKind_ACK_KIND_REVOKE, shard, epoch, err).GetAck()
	}
	u.mu.Lock()
	u.core.Finished(shard) // its tombstone is kept: goneEpoch and OnAssigns read it
	u.mu.Unlock()
	return wire.AckToWire(wire.AckKind_ACK_KIND_REVOKE, shard, epoch, nil).GetAck()
}

// OnConstraints takes the parent's budget and target (collaborative mode).
func (h uplinkHandler) OnConstraints(c *wire.Constraints) { h.u.d.fromParent(c) }

// OnDisconnect forgets the parent's epochs: until the parent confirms a shard
// again (an Assign in answer to the next Hello, which then announces epoch 0 for
// every shard) this tier sends no Assign for it, so a shard the parent re-placed
// while we were away is never resumed here.
func (h uplinkHandler) OnDisconnect(err error) {
	h.u.d.logger.Printf("uplink: session with the parent ended: %v", err)
	h.u.mu.Lock()
	h.u.core.Disconnected()
	h.u.mu.Unlock()
	h.u.d.forgetParent()
}

// resendRevokes carries the parent's pending revokes along (called with
// d.decide held, each round): a revoke whose owner had no session when it
// came, or whose message or ack was lost, is sent again after twice the
// interval; one whose owner has failed or that has no owner is finished.
func (u *uplink) resendRevokes(ctx context.Context, now time.Time) {
	d := u.d
	u.mu.Lock()
	pending := u.core.Pending()
	u.mu.Unlock()
	for _, id := range pending {
		st, ok := d.tier.FSM.Shard(id)
		if ok && st.InFlight != nil {
			continue // OnRevoke aborted it; a move begun since is the loop's
		}
		if !ok || u.ownerGone(st) {
			if a := u.finishRevoke(ctx, id); a != nil {
				u.client.SendAck(a)
			}
			continue
		}
		d.mu.Lock()
		last := d.revokeSent[id]
		d.mu.Unlock()
		if now.Sub(last) > 2*d.cfg.Interval {
			d.sendRevoke(st.Owner, id, st.Epoch)
		}
	}
}
