package tierd

// Regressions for the protocol interleavings a review found (each failed
// before its fix): a stale or foreign revoke ack, a parent revoke that met no
// session, a revoke after the uplink's reconnect, an operator plan moving a
// shard the parent is taking back, and a reconnect that queued more Assigns
// than the outbox holds.

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/coordinator/session"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/testutil"
	"github.com/strata-sched/strata/tiers/control"
)

// revokeRegion: a region whose parent is unreachable (no lease: rounds do nothing),
// driven directly. Shard j/0 given by the parent at epoch 5, children hosts.
func revokeRegion(t *testing.T, hosts ...interfaces.ChildID) (*Daemon, uplinkHandler) {
	d := start(t, interfaces.TierRegion, []string{"127.0.0.1:1"})
	h := uplinkHandler{d.up}
	spec := &wire.Shard{Id: "j/0", Job: "j", Load: &wire.Load{Cpu: 1}}
	if a := h.OnAssign(&wire.Assign{Shard: spec, Epoch: 5}); !a.GetOk() {
		t.Fatalf("assign: %v", a)
	}
	for _, id := range hosts {
		must(t, d, &fsm.PutChild{Child: interfaces.Child{ID: id, Tier: interfaces.TierHost, Capacity: interfaces.Load{CPU: 8}}})
	}
	return d, h
}

func must(t *testing.T, d *Daemon, c fsm.Command) *fsm.Result {
	t.Helper()
	res, err := d.commit(context.Background(), c)
	if err != nil {
		t.Fatalf("%T: %v", c, err)
	}
	return res
}

func fakeSession(d *Daemon, id interfaces.ChildID) *childSession {
	s := &childSession{id: id, out: make(chan *wire.ParentMessage, 64), closed: make(chan struct{})}
	d.mu.Lock()
	d.sessions[id] = s
	d.mu.Unlock()
	return s
}

func drain(s *childSession) []*wire.ParentMessage {
	var out []*wire.ParentMessage
	for {
		select {
		case m := <-s.out:
			out = append(out, m)
		default:
			return out
		}
	}
}

func revokeAck(shard string, e uint64) *wire.Ack {
	return &wire.Ack{Shard: shard, Epoch: e, Kind: wire.AckKind_ACK_KIND_REVOKE, Ok: true}
}

func w(g, l uint64) uint64 { return g<<16 | l }

// P1: a revoke ack of an older epoch completes a newer move.
func TestStaleRevokeAckDoesNotCompleteANewerMove(t *testing.T) {
	d, _ := revokeRegion(t, "h1", "h2", "h3")
	ctx := context.Background()
	s1, s3 := fakeSession(d, "h1"), fakeSession(d, "h3")
	fakeSession(d, "h2")
	must(t, d, &fsm.Assign{Shard: "j/0", Child: "h1"}) // local 1
	must(t, d, &fsm.BeginMove{Move: interfaces.Move{Shard: "j/0", From: "h1", To: "h2", Epoch: 1}})
	d.onAck(ctx, s1, revokeAck("j/0", w(5, 1))) // first ack: completes, owner h2 @2
	if st, _ := d.Tier().FSM.Shard("j/0"); st.Owner != "h2" || st.Epoch != 2 {
		t.Fatalf("after first ack: %+v", st)
	}
	must(t, d, &fsm.Move{Move: interfaces.Move{Shard: "j/0", From: "h2", To: "h1", Epoch: 2}}) // back on h1 @3
	must(t, d, &fsm.BeginMove{Move: interfaces.Move{Shard: "j/0", From: "h1", To: "h3", Epoch: 3}})
	drain(s1)
	drain(s3)
	// A duplicate of the ack of Revoke(w(5,1)) (the loop re-sends revokes every
	// 2*Interval, each one acked) arrives now. h1 has not seen Revoke(w(5,3)).
	d.onAck(ctx, s1, revokeAck("j/0", w(5, 1)))
	st, _ := d.Tier().FSM.Shard("j/0")
	msgs := drain(s3)
	if st.Owner == "h3" {
		t.Errorf("stale revoke ack (epoch %d) completed the move begun at local epoch 3: owner %s epoch %d; msgs to h3: %v", w(5, 1), st.Owner, st.Epoch, msgs)
	}
}

// P2: the revoke ack (tiercore.RevokeAcked) finishes the parent's revoke on an ack from a child that is
// not the owner (a duplicate ack from the old source of a completed move).
func TestParentRevokeFinishesOnlyOnTheOwnersAck(t *testing.T) {
	d, h := revokeRegion(t, "h1", "h2")
	ctx := context.Background()
	s1, s2 := fakeSession(d, "h1"), fakeSession(d, "h2")
	must(t, d, &fsm.Assign{Shard: "j/0", Child: "h1"})
	must(t, d, &fsm.BeginMove{Move: interfaces.Move{Shard: "j/0", From: "h1", To: "h2", Epoch: 1}})
	d.onAck(ctx, s1, revokeAck("j/0", w(5, 1))) // move completes: h2 owns @2, Assign sent
	drain(s2)
	if a := h.OnRevoke(&wire.Revoke{Shard: "j/0", Epoch: 5}); a != nil {
		t.Fatalf("parent revoke acked at once: %v", a)
	}
	t.Logf("to h2: %v", drain(s2))
	d.onAck(ctx, s1, revokeAck("j/0", w(5, 1))) // duplicate ack from h1
	if _, ok := d.Tier().FSM.Shard("j/0"); !ok {
		t.Errorf("the parent's revoke finished (shard deleted, ack queued for the parent) on h1's stale ack while the owner h2 has not acked")
	}
}

// P3: a deleted shard whose owner had no session when the parent's Revoke
// arrived is never revoked: Hello and report reconciliation skip it.
func TestParentRevokeIsResentToAReconnectedOwner(t *testing.T) {
	d, h := revokeRegion(t, "h1")
	ctx := context.Background()
	must(t, d, &fsm.Assign{Shard: "j/0", Child: "h1"}) // h1 has no session now
	if a := h.OnRevoke(&wire.Revoke{Shard: "j/0", Epoch: 5}); a != nil {
		t.Fatalf("acked at once: %v", a)
	}
	s1 := fakeSession(d, "h1") // h1 comes back, holding and running j/0
	d.reconcileHeld(s1, map[string]uint64{"j/0": w(5, 1)}, s1.send)
	d.reconcileReport(s1, interfaces.Report{Child: "h1", Shards: []interfaces.ShardLoad{{Shard: "j/0"}}})
	d.decide.Lock()
	d.up.resendRevokes(ctx, time.Now()) // the round carries pending revokes along
	d.decide.Unlock()
	for _, m := range drain(s1) {
		if m.GetRevoke() != nil {
			return
		}
	}
	st, ok := d.Tier().FSM.Shard("j/0")
	t.Errorf("h1 runs j/0 which the parent revoked; no Revoke sent to h1 (shard %v %+v, hidden from view: %v)", ok, st, d.up.core.PendingCount())
}

// P4: after the uplink reconnects (epochs forgotten) the parent's Hello
// reconciliation revokes a deleted shard at the held epoch 0; the region cannot
// compose a wire epoch and sends nothing.
func TestParentRevokeAfterAReconnectStillRevokes(t *testing.T) {
	d, h := revokeRegion(t, "h1")
	s1 := fakeSession(d, "h1")
	must(t, d, &fsm.Assign{Shard: "j/0", Child: "h1"})
	drain(s1)
	h.OnDisconnect(nil)
	hello := d.up.hello()
	t.Logf("hello held: %v", hello.GetHeldEpochs())
	// global reconcileHeld, shard deleted there: Revoke(id, held e) = Revoke(j/0, 0)
	if a := h.OnRevoke(&wire.Revoke{Shard: "j/0", Epoch: hello.GetHeldEpochs()["j/0"]}); a != nil {
		t.Logf("ack %v", a)
	}
	for _, m := range drain(s1) {
		if m.GetRevoke() != nil {
			return
		}
	}
	t.Errorf("the parent's revoke of j/0 (at held epoch 0) sent nothing to h1, which keeps running it")
}

func TestOperatorPlanLeavesRevokingShards(t *testing.T) {
	d, h := revokeRegion(t, "h1", "h2")
	ctx := context.Background()
	s1, s2 := fakeSession(d, "h1"), fakeSession(d, "h2")
	must(t, d, &fsm.Assign{Shard: "j/0", Child: "h1"})
	if a := h.OnRevoke(&wire.Revoke{Shard: "j/0", Epoch: 5}); a != nil {
		t.Fatalf("acked at once: %v", a)
	}
	drain(s1)
	d.decide.Lock()
	applied, _, err := d.commitPlanBatch(ctx, nil, []interfaces.Move{{Shard: "j/0", From: "h1", To: "h2", Epoch: 1}}, nil, nil, "op")
	d.decide.Unlock()
	t.Logf("applied %d err %v", len(applied), err)
	d.onAck(ctx, s1, revokeAck("j/0", w(5, 1))) // h1 acks the parent's revoke
	st, ok := d.Tier().FSM.Shard("j/0")
	if msgs := drain(s2); ok && st.Owner == "h2" {
		t.Errorf("shard being revoked by the parent started on h2 (%v); parent revoke still pending: %v", msgs, d.up.core.Pending())
	}
}

// ackAll is a child session handler that acks every Assign and Revoke.
type ackAll struct{ n atomic.Int64 }

func (h *ackAll) OnLease(*wire.LeaseGrant, time.Time) {}
func (h *ackAll) OnAssign(a *wire.Assign) *wire.Ack {
	h.n.Add(1)
	return wire.AckToWire(wire.AckKind_ACK_KIND_ASSIGN, interfaces.ShardID(a.GetShard().GetId()), interfaces.Epoch(a.GetEpoch()), nil).GetAck()
}
func (h *ackAll) OnRevoke(r *wire.Revoke) *wire.Ack {
	return wire.AckToWire(wire.AckKind_ACK_KIND_REVOKE, interfaces.ShardID(r.GetShard()), interfaces.Epoch(r.GetEpoch()), nil).GetAck()
}
func (h *ackAll) OnConstraints(*wire.Constraints) {}
func (h *ackAll) OnDisconnect(error)              {}

// TestReconnectQueuesEveryAssign: a region that reconnects owning far more
// shards than the session outbox holds (as after an uplink reconnect: every
// epoch 0), through a real session client that acks each Assign, gets every
// Assign, and the tier's decide lock stays free meanwhile. The reconciliation
// used to queue them before the sender ran and drop the excess; then, waiting
// for room before the child's acks were read, it hung the session and every
// decide holder sending to it.
func TestReconnectQueuesEveryAssign(t *testing.T) {
	d := start(t, interfaces.TierGlobal, nil)
	must(t, d, &fsm.PutChild{Child: interfaces.Child{ID: "r1", Tier: interfaces.TierRegion, Capacity: interfaces.Load{CPU: 1e6, Tasks: 1e6}}})
	const n = 40000 // the outbox holds 8192
	shards := make([]interfaces.Shard, n)
	moves := make([]interfaces.Move, n)
	held := map[string]uint64{}
	for i := range shards {
		id := interfaces.ShardID("j/" + strconv.Itoa(i))
		shards[i] = interfaces.Shard{ID: id, Job: "j", Load: interfaces.Load{CPU: 1}}
		moves[i] = interfaces.Move{Shard: id, To: "r1"}
		held[string(id)] = 0
	}
	must(t, d, &fsm.PutShards{Shards: shards})
	must(t, d, &fsm.ApplyPlan{Tier: "global", Moves: moves})
	h := &ackAll{}
	c, err := session.NewClient(session.Config{
		Parents: []string{d.GRPCAddr()},
		Hello: func() *wire.Hello {
			return &wire.Hello{ChildId: "r1", Tier: interfaces.TierRegion, ProtocolVersion: 1, Capacity: &wire.Load{Cpu: 1e6, Tasks: 1e6}, HeldEpochs: held}
		},
		Report:         func() *wire.Report { return &wire.Report{Capacity: &wire.Load{Cpu: 1e6, Tasks: 1e6}} },
		ReportInterval: 100 * time.Millisecond,
	}, h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Run(ctx)
	testutil.Until(t, "the child took every Assign", 60*time.Second, func() bool { return h.n.Load() >= n })
	free := make(chan struct{})
	go func() {
		d.decide.Lock()
		d.sendRevoke("r1", "j/0", 1)
		d.decide.Unlock()
		close(free)
	}()
	select {
	case <-free:
	case <-time.After(10 * time.Second):
		t.Fatal("a decide holder sending to r1 is blocked")
	}
}

// TestRefusedAssignToATierIsRetried: a region that refuses an Assign (here:
// it has no lease yet) gets it again a little later; a stale-epoch refusal
// is not retried (the same Assign would meet it again). A host's refusals are
// left to its reports (reconcileReport).
func TestRefusedAssignToATierIsRetried(t *testing.T) {
	d := start(t, interfaces.TierGlobal, nil)
	ctx := context.Background()
	must(t, d, &fsm.PutChild{Child: interfaces.Child{ID: "r1", Tier: interfaces.TierRegion, Capacity: interfaces.Load{CPU: 8}}})
	must(t, d, &fsm.PutShards{Shards: []interfaces.Shard{{ID: "j/0", Job: "j", Load: interfaces.Load{CPU: 1}}, {ID: "j/1", Job: "j", Load: interfaces.Load{CPU: 1}}}})
	must(t, d, &fsm.Assign{Shard: "j/0", Child: "r1"})
	must(t, d, &fsm.Assign{Shard: "j/1", Child: "r1"})
	s := fakeSession(d, "r1")
	d.sendAssign("r1", "j/0", 1)
	d.sendAssign("r1", "j/1", 1)
	drain(s)
	refuse := func(shard, why string) *wire.Ack {
		return &wire.Ack{Shard: shard, Epoch: 1, Kind: wire.AckKind_ACK_KIND_ASSIGN, Error: why}
	}
	d.onAck(ctx, s, refuse("j/0", "no valid lease"))
	d.onAck(ctx, s, refuse("j/1", "shard j/1: epoch 1 is older than the 2 held: "+interfaces.ErrStaleEpoch.Error()))
	d.retryRefused(time.Now()) // too soon
	if msgs := drain(s); len(msgs) != 0 {
		t.Fatalf("resent at once: %v", msgs)
	}
	d.retryRefused(time.Now().Add(time.Minute))
	msgs := drain(s)
	if len(msgs) != 1 || msgs[0].GetAssign().GetShard().GetId() != "j/0" || msgs[0].GetAssign().GetEpoch() != 1 {
		t.Fatalf("after the wait: %v, want one Assign of j/0 at 1", msgs)
	}
}

// TestGrantCappedAsItLeaves: a grant that waited in the outbox is cut, as it
// leaves, to what the region's own lease has left, and dropped when nothing is.
func TestGrantCappedAsItLeaves(t *testing.T) {
	d := start(t, interfaces.TierRegion, []string{"127.0.0.1:1"})
	g := &wire.LeaseGrant{TtlNanos: int64(4 * time.Second)}
	if d.capGrant(g) {
		t.Fatal("a grant left a region that holds no lease from its parent")
	}
	d.up.mu.Lock()
	d.up.core.OnLease(time.Now(), time.Second*4/3)
	d.up.mu.Unlock()
	if !d.capGrant(g) || time.Duration(g.GetTtlNanos()) > time.Second {
		t.Fatalf("grant ttl %v with 1s of the region's lease left", time.Duration(g.GetTtlNanos()))
	}
}

// TestAssignRefusedAsRevokedIsPlacedAgain: a host that refuses an Assign
// because it revoked the shard at that epoch (a failed start, then a restart
// that forgot the failure) will never run it under it; the shard is taken off
// the host, to be placed again under a new epoch, instead of re-sent for ever.
// A refusal of an older Assign changes nothing.
func TestAssignRefusedAsRevokedIsPlacedAgain(t *testing.T) {
	d, _ := revokeRegion(t, "h1")
	ctx := context.Background()
	s1 := fakeSession(d, "h1")
	must(t, d, &fsm.Assign{Shard: "j/0", Child: "h1"}) // local 1, wire w(5,1)
	refused := func(e uint64) *wire.Ack {
		return &wire.Ack{Shard: "j/0", Epoch: e, Kind: wire.AckKind_ACK_KIND_ASSIGN, Error: "stale epoch", RevokedAt: e}
	}
	d.onAck(ctx, s1, refused(w(4, 1))) // an older Assign's refusal
	if st, _ := d.Tier().FSM.Shard("j/0"); st.Owner != "h1" {
		t.Fatalf("a refusal of an older epoch unassigned it: %+v", st)
	}
	d.onAck(ctx, s1, refused(w(5, 1)))
	if st, _ := d.Tier().FSM.Shard("j/0"); st.Owner != "" || st.Epoch != 1 {
		t.Fatalf("after the refusal: %+v, want unassigned at epoch 1", st)
	}
}

// TestResizeLeavesQuarantinedShardsAlone: autoscale counts a job's shards
// without the quarantined ones (they are out of placement); resize must count
// them the same way, or every resize of such a job fails as a conflict (a
// review's probe). Neither a grow nor a shrink touches the quarantined shard.
func TestResizeLeavesQuarantinedShardsAlone(t *testing.T) {
	d := start(t, interfaces.TierGlobal, nil)
	var ss []interfaces.Shard
	for i := 0; i < 4; i++ {
		ss = append(ss, interfaces.Shard{ID: interfaces.ShardID("j/" + strconv.Itoa(i)), Job: "j", Load: interfaces.Load{CPU: 1}, InputRate: 10})
	}
	must(t, d, &fsm.PutShards{Shards: ss})
	must(t, d, &fsm.Quarantine{Shard: "j/3", Reason: "poison"})
	d.decide.Lock()
	defer d.decide.Unlock()
	ctx := context.Background()
	if _, err := d.resize(ctx, control.Resize{Job: "j", Current: 3, Target: 4, Apply: true}); err != nil {
		t.Fatalf("grow 3 → 4 with j/3 quarantined: %v", err)
	}
	if _, ok := d.Tier().FSM.Shard("j/4"); !ok {
		t.Error("the grow did not add j/4 (j/3 is taken, quarantined)")
	}
	deleted, err := d.resize(ctx, control.Resize{Job: "j", Current: 4, Target: 2, Apply: true})
	if err != nil {
		t.Fatalf("shrink 4 → 2: %v", err)
	}
	if st, ok := d.Tier().FSM.Shard("j/3"); !ok || st.Quarantined == "" {
		t.Errorf("the shrink touched the quarantined j/3 (deleted %v)", deleted)
	}
}

// TestGrownIDsStartAboveTheirDeletedEpochs: an autoscale shrink then grow
// re-creates the IDs the shrink deleted (j/2, j/3); their epochs must start
// above the ones the deleted shards had (hosts keep tombstones of those), and
// this must hold on any leader: it is the FSM's epoch floor (RetireShards),
// not this daemon's memory. Re-submitting a deleted job is the same.
func TestGrownIDsStartAboveTheirDeletedEpochs(t *testing.T) {
	d := start(t, interfaces.TierGlobal, nil)
	must(t, d, &fsm.PutChild{Child: interfaces.Child{ID: "r1", Tier: interfaces.TierRegion, Capacity: interfaces.Load{CPU: 100}}})
	must(t, d, &fsm.PutChild{Child: interfaces.Child{ID: "r2", Tier: interfaces.TierRegion, Capacity: interfaces.Load{CPU: 100}}})
	var ss []interfaces.Shard
	for i := 0; i < 4; i++ {
		ss = append(ss, interfaces.Shard{ID: interfaces.ShardID("j/" + strconv.Itoa(i)), Job: "j", Load: interfaces.Load{CPU: 1}})
	}
	must(t, d, &fsm.PutShards{Shards: ss})
	for _, s := range ss {
		must(t, d, &fsm.Assign{Shard: s.ID, Child: "r1"})
	}
	must(t, d, &fsm.Move{Move: interfaces.Move{Shard: "j/3", From: "r1", To: "r2", Epoch: 1}}) // j/3 at epoch 2
	d.decide.Lock()
	defer d.decide.Unlock()
	ctx := context.Background()
	if _, err := d.resize(ctx, control.Resize{Job: "j", Current: 4, Target: 2, Apply: true}); err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	clear(d.deleted) // what a new leader knows of them: nothing
	d.mu.Unlock()
	if _, err := d.resize(ctx, control.Resize{Job: "j", Current: 2, Target: 4, Apply: true}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []interfaces.ShardID{"j/2", "j/3"} {
		must(t, d, &fsm.Assign{Shard: id, Child: "r1"})
		if st, ok := d.Tier().FSM.Shard(id); !ok || st.Epoch <= 2 {
			t.Errorf("%s re-created by the grow is at epoch %d (exists %v), not above the deleted j/3's 2", id, st.Epoch, ok)
		}
	}
}

// TestReportsAreOfLiveChildrenAndThisTerm: a region's report to its parent
// counts only its live children's reports (a failed host's last one, with its
// shards and its p99, stayed in forever), and a step-down forgets reports and
// what was derived from them (a replica that leads again acted on its
// children's hints from its earlier term). A review's probes.
func TestReportsAreOfLiveChildrenAndThisTerm(t *testing.T) {
	d, _ := revokeRegion(t, "h1", "h2")
	must(t, d, &fsm.ApplyPlan{Tier: d.cfg.Tier, Moves: []interfaces.Move{{Shard: "j/0", To: "h2"}}})
	d.mu.Lock()
	d.reports["h1"] = interfaces.Report{Child: "h1", Used: interfaces.Load{CPU: 7}, LatencyP99: 9 * time.Second,
		Shards: []interfaces.ShardLoad{{Shard: "j/0", Load: interfaces.Load{CPU: 7}}}}
	d.reports["h2"] = interfaces.Report{Child: "h2", Used: interfaces.Load{CPU: 1}, LatencyP99: time.Millisecond,
		Shards: []interfaces.ShardLoad{{Shard: "j/0", Load: interfaces.Load{CPU: 1}}}}
	d.mu.Unlock()
	must(t, d, &fsm.PutChild{Child: interfaces.Child{ID: "h1", Tier: interfaces.TierHost, Capacity: interfaces.Load{CPU: 8}, State: interfaces.ChildFailed}})
	r, err := wire.ReportFromWire(d.up.report())
	if err != nil {
		t.Fatal(err)
	}
	if r.Used.CPU != 1 || r.LatencyP99 != time.Millisecond || len(r.Shards) != 1 {
		t.Errorf("the region's report counts the failed h1: used %v, p99 %v, shards %v", r.Used, r.LatencyP99, r.Shards)
	}
	d.stepDown()
	d.mu.Lock()
	n := len(d.reports)
	d.mu.Unlock()
	if n != 0 {
		t.Errorf("%d children's reports survive a step-down", n)
	}
}

// TestRegionReportsEachShardOnceFromItsOwner: a region's report to its parent
// carries each shard's load once, as its owner reports it (a former owner's
// last report still named a shard that moved: it went up twice, with two
// rates, and the parent's straggler policy counted both). A review's probes.
// (The reports' numbers, which all went up as 0 once, are the session
// client's: coordinator/session numbers every report it sends.)
func TestRegionReportsEachShardOnceFromItsOwner(t *testing.T) {
	d, _ := revokeRegion(t, "h1", "h2")
	must(t, d, &fsm.ApplyPlan{Tier: d.cfg.Tier, Moves: []interfaces.Move{{Shard: "j/0", To: "h2"}}})
	d.mu.Lock()
	d.reports["h1"] = interfaces.Report{Child: "h1", Used: interfaces.Load{CPU: 1},
		Shards: []interfaces.ShardLoad{{Shard: "j/0", Load: interfaces.Load{CPU: 1}, Rate: 5}}}
	d.reports["h2"] = interfaces.Report{Child: "h2", Used: interfaces.Load{CPU: 1},
		Shards: []interfaces.ShardLoad{{Shard: "j/0", Load: interfaces.Load{CPU: 1}, Rate: 100}}}
	d.mu.Unlock()
	for range 2 {
		r, err := wire.ReportFromWire(d.up.report())
		if err != nil {
			t.Fatal(err) // a shard twice is refused at the parent
		}
		if len(r.Shards) != 1 || r.Shards[0].Rate != 100 {
			t.Errorf("the region reports %+v, want j/0 once, at its owner h2's rate", r.Shards)
		}
	}
}

// TestReportsOfThisSessionInOrder: a report from a session that is no longer
// the child's (closed by a step-down, or replaced) is dropped, as is one not
// newer than the session's last (a report from a closed session came back
// after a step-down forgot the reports; an older one was sampled again).
func TestReportsOfThisSessionInOrder(t *testing.T) {
	d, _ := revokeRegion(t, "h1")
	report := func(s *childSession, seq uint64, cpu float64) {
		rep := wire.ReportToWire(interfaces.Report{Child: "h1", Epoch: seq, Used: interfaces.Load{CPU: cpu}})
		d.onChildMessage(context.Background(), s, &wire.ChildMessage{Msg: &wire.ChildMessage_Report{Report: rep}})
	}
	stored := func() (interfaces.Report, bool) {
		d.mu.Lock()
		defer d.mu.Unlock()
		r, ok := d.reports["h1"]
		return r, ok
	}
	s := fakeSession(d, "h1")
	report(s, 5, 5)
	report(s, 4, 4)
	if r, _ := stored(); r.Epoch != 5 {
		t.Errorf("stored report %d after reports 5 then 4, want 5", r.Epoch)
	}
	newer := fakeSession(d, "h1") // replaces s
	report(s, 6, 6)
	if r, _ := stored(); r.Epoch != 5 {
		t.Errorf("a replaced session's report was stored (report %d)", r.Epoch)
	}
	report(newer, 1, 1) // a new session numbers from 1 again
	if r, _ := stored(); r.Epoch != 1 {
		t.Errorf("the new session's first report was not stored (have %d)", r.Epoch)
	}
	d.stepDown()
	report(newer, 2, 2)
	if _, kept := stored(); kept {
		t.Error("a report processed after a step-down was stored")
	}
}

// TestRegionSumsStayValid: a region's capacity and used load are its hosts'
// sums, capped at interfaces.MaxQuantity: two valid hosts of 9e23 each summed
// to 1.8e24, and the parent refused every report and Hello of the region (a
// review's probe).
func TestRegionSumsStayValid(t *testing.T) {
	d, _ := revokeRegion(t)
	for _, id := range []interfaces.ChildID{"h1", "h2"} {
		must(t, d, &fsm.PutChild{Child: interfaces.Child{ID: id, Tier: interfaces.TierHost, Capacity: interfaces.Load{CPU: 8, Net: 9e23}}})
	}
	d.mu.Lock()
	d.reports["h1"] = interfaces.Report{Child: "h1", Used: interfaces.Load{Net: 9e23}}
	d.reports["h2"] = interfaces.Report{Child: "h2", Used: interfaces.Load{Net: 9e23}}
	d.mu.Unlock()
	if _, err := wire.ReportFromWire(d.up.report()); err != nil {
		t.Errorf("the region's report is refused: %v", err)
	}
	if _, _, err := wire.HelloFromWire(d.up.hello()); err != nil {
		t.Errorf("the region's Hello is refused: %v", err)
	}
}

// TestFailureEvidenceOnlyFromTheHolder: a failed ack counts as evidence for
// the doctor only from the child holding the shard (or receiving it): any
// child could otherwise have any shard quarantined (a review's suspicion).
func TestFailureEvidenceOnlyFromTheHolder(t *testing.T) {
	d, _ := revokeRegion(t, "h1", "h2")
	must(t, d, &fsm.Assign{Shard: "j/0", Child: "h1"})
	failed := func(from interfaces.ChildID) {
		s := fakeSession(d, from)
		ack := wire.AckToWire(wire.AckKind_ACK_KIND_ASSIGN, "j/0", 1, errors.New("exit status 1")).GetAck()
		ack.Failed = true
		d.onChildMessage(context.Background(), s, &wire.ChildMessage{Msg: &wire.ChildMessage_Ack{Ack: ack}})
	}
	failed("h2")
	if f := d.takeFailures(); len(f) != 0 {
		t.Errorf("h2, which does not hold j/0, made evidence %+v", f)
	}
	failed("h1")
	if f := d.takeFailures(); len(f) != 1 || f[0].Child != "h1" {
		t.Errorf("evidence %+v, want j/0's failure on h1", f)
	}
}
