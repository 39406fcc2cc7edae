package tierd

// Regressions for the tier-boundary failures of issue 20 ("What was observed",
// items 1 and 4). Each forces its interleaving by driving the daemons' handlers
// directly (or over a real stream for the Hello checks) and failed before its
// fix; the commit that added it says how that was checked.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/testutil"
)

// globalWithTwoRegions: a top tier with regions r1 and r2 and shard j/0.
func globalWithTwoRegions(t *testing.T) *Daemon {
	g := start(t, interfaces.TierGlobal, nil)
	for _, id := range []interfaces.ChildID{"r1", "r2"} {
		must(t, g, &fsm.PutChild{Child: interfaces.Child{ID: id, Tier: interfaces.TierRegion, Capacity: interfaces.Load{CPU: 100}}})
	}
	must(t, g, &fsm.PutShards{Shards: []interfaces.Shard{{ID: "j/0", Job: "j", Load: interfaces.Load{CPU: 1}}}})
	return g
}

func assignsOf(msgs []*wire.ParentMessage, shard string) []uint64 {
	var out []uint64
	for _, m := range msgs {
		if a := m.GetAssign(); a != nil && a.GetShard().GetId() == shard {
			out = append(out, a.GetEpoch())
		}
	}
	return out
}

func revokesOf(msgs []*wire.ParentMessage, shard string) []uint64 {
	var out []uint64
	for _, m := range msgs {
		if r := m.GetRevoke(); r != nil && r.GetShard() == shard {
			out = append(out, r.GetEpoch())
		}
	}
	return out
}

// Observation 1, first bullet: the global tier began r1 → r2 while r1 had no
// session with it; r1 reconnected before the move ended, and its Hello
// reconciliation re-sent r1 the shard's Assign at the old epoch (r1 still owns
// it during the move): r1, whose parent epochs a reconnect forgets, took it
// and placed it at w(1,1) = 65537. The move then completed by r1's lease
// expiry, giving r2 epoch 2 (w(2,1) = 131073 on its host): the two epochs the
// hosts' ledgers showed. The source of a move must only ever be revoked.
func TestReconnectingMoveSourceIsNotReassigned(t *testing.T) {
	g := globalWithTwoRegions(t)
	ctx := context.Background()
	must(t, g, &fsm.Assign{Shard: "j/0", Child: "r1"}) // epoch 1
	must(t, g, &fsm.BeginMove{Move: interfaces.Move{Shard: "j/0", From: "r1", To: "r2", Epoch: 1}})
	// The daemon's own control loop runs meanwhile and may re-send the
	// move's revoke to r1 at any time: the checks allow for copies of it.
	s1 := fakeSession(g, "r1") // r1 reconnects: its epochs forgotten, it states 0
	g.reconcileHeld(s1, map[string]uint64{"j/0": 0}, s1.send)
	msgs := drain(s1)
	if a := assignsOf(msgs, "j/0"); len(a) != 0 {
		t.Errorf("the source r1 of the in-flight move was sent Assign(j/0) at %v on its Hello: it runs the shard again", a)
	}
	if r := revokesOf(msgs, "j/0"); len(r) == 0 || slices.ContainsFunc(r, func(e uint64) bool { return e != 1 }) {
		t.Errorf("revokes to r1 on its Hello: %v, want the move's revoke at 1", r)
	}
	if g.sendAssign("r1", "j/0", 1) {
		t.Error("sendAssign sent the move's source an Assign of the shard")
	}
	// The move completes by r1's lease expiry; r1's next Hello still
	// holding it (at the epoch of any Assign it may have taken) is revoked
	// at the new epoch.
	must(t, g, &fsm.PutChild{Child: interfaces.Child{ID: "r1", Tier: interfaces.TierRegion, Capacity: interfaces.Load{CPU: 100}, State: interfaces.ChildFailed}})
	g.decide.Lock()
	g.observe(ctx, time.Now())
	g.decide.Unlock()
	if st, _ := g.Tier().FSM.Shard("j/0"); st.Owner != "r2" || st.Epoch != 2 {
		t.Fatalf("after r1's expiry: %+v, want r2 at 2", st)
	}
	drain(s1) // the loop's copies of the move's revoke: none come after its end
	g.reconcileHeld(s1, map[string]uint64{"j/0": 1}, s1.send)
	msgs = drain(s1)
	if a, r := assignsOf(msgs, "j/0"), revokesOf(msgs, "j/0"); len(a) != 0 || len(r) != 1 || r[0] != 2 {
		t.Errorf("r1 holding j/0 after the move: assigns %v, revokes %v; want one revoke at 2", a, r)
	}
}

// Observation 1, second bullet, at the region: after the parent's revoke
// finished (the shard deleted, its parent epoch forgotten), a re-sent Assign
// at the revoked epoch — from the global tier's Hello reconciliation after a
// reconnect — was taken, and the region placed the shard again while the
// parent completed the move elsewhere. So was one arriving while the revoke
// was still pending (it also cancelled the revoke).
func TestRegionRefusesAssignsAtARevokedEpoch(t *testing.T) {
	d, h := revokeRegion(t, "h1")
	ctx := context.Background()
	spec := &wire.Shard{Id: "j/0", Job: "j", Load: &wire.Load{Cpu: 1}}
	s1 := fakeSession(d, "h1")
	must(t, d, &fsm.Assign{Shard: "j/0", Child: "h1"}) // local 1, wire w(5,1)
	if a := h.OnRevoke(&wire.Revoke{Shard: "j/0", Epoch: 5}); a != nil {
		t.Fatalf("acked at once: %v", a)
	}
	// Pending: h1 has not acked yet.
	if a := h.OnAssign(&wire.Assign{Shard: spec, Epoch: 5}); a.GetOk() {
		t.Errorf("an Assign at the epoch of the pending revoke was taken (revoke still pending: %v)", d.up.leaving("j/0"))
	}
	if !d.up.leaving("j/0") {
		t.Fatal("an Assign at the revoked epoch cancelled the parent's revoke")
	}
	d.onAck(ctx, s1, revokeAck("j/0", w(5, 1))) // h1 stopped it: the revoke finishes
	if _, ok := d.Tier().FSM.Shard("j/0"); ok {
		t.Fatal("the revoke did not finish")
	}
	h.OnDisconnect(nil) // the uplink reconnects
	a := h.OnAssign(&wire.Assign{Shard: spec, Epoch: 5})
	if _, ok := d.Tier().FSM.Shard("j/0"); ok || a.GetOk() {
		t.Errorf("after the revoke at 5 finished, a re-sent Assign at 5 was taken (ack %v): the region holds j/0 again", a)
	}
	if !strings.Contains(a.GetError(), interfaces.ErrStaleEpoch.Error()) || a.GetRevokedAt() != 5 {
		t.Errorf("refusal %v: want a stale epoch with revoked_at 5", a)
	}
	if a := h.OnAssign(&wire.Assign{Shard: spec, Epoch: 6}); !a.GetOk() {
		t.Errorf("the shard given back at a newer epoch was refused: %v", a)
	}
	if _, ok := d.up.tombstone("j/0"); ok {
		t.Error("the newer Assign left the tombstone")
	}
}

// Observation 1, third bullet: a parent's revoke at a newer epoch than the one
// the region was given the shard at (the global tier's reconciliation revokes
// at its current epoch, once the shard has moved on) entered the epochs
// Assigns are composed from: the region's report and Hello reconciliation
// then re-sent its host the shard under the new global epoch — the one the
// shard's new region runs it at ("epoch … already used by").
func TestRevokeEpochComposesNoAssign(t *testing.T) {
	for _, reconnect := range []bool{false, true} {
		d, h := revokeRegion(t, "h1")
		s1 := fakeSession(d, "h1")
		must(t, d, &fsm.Assign{Shard: "j/0", Child: "h1"}) // local 1, wire w(5,1)
		if reconnect {
			h.OnDisconnect(nil)
		}
		h.OnRevoke(&wire.Revoke{Shard: "j/0", Epoch: 6})
		if we, ok := d.wireEpoch("j/0", 1); ok && (reconnect || we != w(5, 1)) {
			t.Errorf("reconnect %v: after Revoke(6) Assigns are composed at %d (w(5,1) = %d, w(6,1) = %d)", reconnect, we, w(5, 1), w(6, 1))
		}
		if r := revokesOf(drain(s1), "j/0"); len(r) != 1 || r[0] < w(5, 1) {
			t.Errorf("reconnect %v: revokes to h1 %v, want one at %d or later", reconnect, r, w(5, 1))
		}
		// h1 stopped running it (fenced, or the revoke is under way) and
		// reports, then reconnects.
		d.reconcileReport(s1, interfaces.Report{Child: "h1"})
		d.reconcileHeld(s1, map[string]uint64{"j/0": w(5, 1)}, s1.send)
		if a := assignsOf(drain(s1), "j/0"); len(a) != 0 {
			t.Errorf("reconnect %v: after the parent's revoke at 6, h1 was sent Assign(j/0) at %v (w(6,1) = %d)", reconnect, a, w(6, 1))
		}
	}
}

// Observation 4: after a region leader change (parent epochs unknown) the
// region's Hello states a deleted job's shard at epoch 0; the global tier,
// which retired it, revoked it at that 0, and the region, unable to compose a
// host epoch from it, sent nothing: the shard stayed in the region's FSM and
// on its host for ever. Anti-entropy at the global → region boundary: the
// revoke carries an epoch at least the shard's last (the FSM's epoch floor),
// the region revokes from its host, and the shard is gone.
func TestOrphanOfADeletedJobIsRevokedAfterARegionLeaderChange(t *testing.T) {
	ctx := context.Background()
	g := globalWithTwoRegions(t)
	must(t, g, &fsm.Assign{Shard: "j/0", Child: "r1"})                                                                 // epoch 1
	must(t, g, &fsm.Move{Move: interfaces.Move{Shard: "j/0", From: "r1", To: "r2", Epoch: 1}})                         // 2
	must(t, g, &fsm.Move{Move: interfaces.Move{Shard: "j/0", From: "r2", To: "r1", Epoch: 2}})                         // 3
	must(t, g, &fsm.RetireShards{DropShards: fsm.DropShards{IDs: []interfaces.ShardID{"j/0"}, Reason: "job deleted"}}) // job deleted

	// A new leader of r1: its FSM has j/0 on h1 (placed under w(3,1) by the
	// old leader), and it knows no parent epoch.
	r := start(t, interfaces.TierRegion, []string{"127.0.0.1:1"})
	must(t, r, &fsm.PutChild{Child: interfaces.Child{ID: "h1", Tier: interfaces.TierHost, Capacity: interfaces.Load{CPU: 8}}})
	must(t, r, &fsm.PutShards{Shards: []interfaces.Shard{{ID: "j/0", Job: "j", Load: interfaces.Load{CPU: 1}}}})
	must(t, r, &fsm.Assign{Shard: "j/0", Child: "h1"})
	sh := fakeSession(r, "h1")
	hello := r.up.hello()

	sg := fakeSession(g, "r1")
	g.reconcileHeld(sg, hello.GetHeldEpochs(), sg.send)
	h := uplinkHandler{r.up}
	for _, m := range drain(sg) {
		if rv := m.GetRevoke(); rv != nil {
			h.OnRevoke(rv)
		}
	}
	rv := revokesOf(drain(sh), "j/0")
	if len(rv) != 1 || rv[0] < w(3, 1) {
		t.Fatalf("h1 holds j/0 at %d (a deleted job's shard); the region sent it revokes %v", w(3, 1), rv)
	}
	r.onAck(ctx, sh, revokeAck("j/0", rv[0]))
	if _, ok := r.Tier().FSM.Shard("j/0"); ok {
		t.Error("the deleted job's shard stays in the region's FSM")
	}
}

// helloTerm opens a session to addr as child tier r1 stating group term term;
// it returns the first answer's error (nil: a LeaseGrant came).
func helloTerm(t *testing.T, addr string, term uint64) (context.CancelFunc, error) {
	t.Helper()
	// A guard, not a timing check: a session that never answers fails the
	// test instead of hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	st, err := wire.NewSessionClient(dial(t, addr)).Connect(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	h := wire.HelloToWire(interfaces.Child{ID: "r1", Tier: interfaces.TierRegion, Capacity: interfaces.Load{CPU: 100}}, nil)
	h.GroupTerm = term
	if err := st.Send(&wire.ChildMessage{Msg: &wire.ChildMessage_Hello{Hello: h}}); err != nil {
		cancel()
		t.Fatal(err)
	}
	for range 16 { // a Constraints may come first when the grant was held back
		m, err := st.Recv()
		if err != nil || m.GetLeaseGrant() != nil {
			return cancel, err
		}
		if m.GetRedirect() != nil {
			return cancel, fmt.Errorf("redirected: %v", m)
		}
	}
	return cancel, fmt.Errorf("no LeaseGrant among the first 16 answers")
}

// Observation 1, fourth bullet: a deposed region leader's uplink reconnected
// and replaced its group's real leader's session (a Hello carried no term).
// The parent refuses a Hello whose group term is older than the last it
// accepted from the child, and remembers that term with the child's record, so
// a new leader of the parent refuses it too.
func TestHelloOfAnOlderGroupTermIsRefused(t *testing.T) {
	ds := startGroup(t, 3, func(c *Config) { c.Interval = 50 * time.Millisecond })
	var L *Daemon
	var cancel context.CancelFunc
	testutil.Eventually(t, "a leader that takes r1's Hello at term 5", 30*time.Second, func() error {
		// An election under load may move leadership meanwhile: then
		// again on the new leader.
		L = leaderOf(t, ds)
		if _, err := L.commit(context.Background(), &fsm.PutChild{Child: interfaces.Child{ID: "r1", Tier: interfaces.TierRegion, Capacity: interfaces.Load{CPU: 100}}}); err != nil {
			return err
		}
		var err error
		if cancel, err = helloTerm(t, L.GRPCAddr(), 5); err != nil {
			cancel()
		}
		return err
	})
	defer cancel()
	L.mu.Lock()
	real := L.sessions["r1"]
	L.mu.Unlock()
	cancel4, err := helloTerm(t, L.GRPCAddr(), 4)
	defer cancel4()
	if code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "group_term") {
		t.Errorf("Hello at term 4 after 5: %v, want FailedPrecondition naming group_term", err)
	}
	L.mu.Lock()
	kept := L.sessions["r1"] == real
	L.mu.Unlock()
	if !kept {
		t.Error("the deposed replica's Hello replaced the real leader's session")
	}
	// The term survives a change of this tier's leader.
	for _, d := range ds {
		testutil.Until(t, "the term replicated", 10*time.Second, func() bool {
			c, _ := d.Tier().FSM.Child("r1")
			return groupTermOf(c) == 5
		})
	}
	_ = L.Tier().Raft().LeadershipTransfer().Error() // fails only if L lost leadership already
	var L2 *Daemon
	testutil.Until(t, "a new leader", 20*time.Second, func() bool {
		for _, d := range ds {
			d.mu.Lock()
			ok := d.leader
			d.mu.Unlock()
			if d != L && ok && d.IsLeader() {
				L2 = d
				return true
			}
		}
		return false
	})
	cancel4b, err := helloTerm(t, L2.GRPCAddr(), 4)
	defer cancel4b()
	if code(err) != codes.FailedPrecondition {
		t.Errorf("the new leader took a Hello at term 4 after the old one accepted 5: %v", err)
	}
	cancel6, err := helloTerm(t, L2.GRPCAddr(), 6)
	defer cancel6()
	if err != nil {
		t.Errorf("Hello at a newer term 6: %v", err)
	}
}

// Observation 1, fourth bullet, the region's side: its Hello states its Raft
// term, and its uplink ends as soon as Raft reports that the replica lost
// leadership — here the control loop never polls (its interval is an hour),
// so only the leadership notification can end it.
func TestUplinkEndsWhenItsReplicaStopsLeading(t *testing.T) {
	ds := startGroup(t, 3, func(c *Config) {
		c.Tier, c.Instance, c.Parent, c.Interval = interfaces.TierRegion, "r1", []string{"127.0.0.1:1"}, time.Hour
	})
	var L *Daemon
	testutil.Until(t, "a leader with its uplink", 20*time.Second, func() bool {
		for _, d := range ds {
			d.poke() // the loop runs only when poked
			d.mu.Lock()
			ok := d.leader
			d.mu.Unlock()
			if ok && d.IsLeader() {
				L = d
				return true
			}
		}
		return false
	})
	testutil.Until(t, "the uplink started", 10*time.Second, func() bool {
		L.up.mu.Lock()
		defer L.up.mu.Unlock()
		return L.up.done != nil
	})
	L.up.mu.Lock()
	done, term := L.up.done, L.up.term
	L.up.mu.Unlock()
	if got := L.up.hello().GetGroupTerm(); got != term || term != L.Tier().Raft().CurrentTerm() {
		t.Errorf("the region's Hello states group term %d (uplink term %d, Raft term %d)", got, term, L.Tier().Raft().CurrentTerm())
	}
	_ = L.Tier().Raft().LeadershipTransfer().Error() // fails only if L lost leadership already
	testutil.Until(t, "the deposed replica's uplink ended", 20*time.Second, func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
	if r := L.up.report(); r != nil {
		t.Errorf("the deposed replica still composes reports: %v", r)
	}
}

// Anti-entropy between reconnects (observation 1, first bullet: the source
// region ran the shard for 52 s, until it next reconnected): a child tier
// restates what it holds on its live session (a Hello every restateEvery
// reports), and the parent reconciles it like the first. Here a region comes
// to hold a shard that is another region's after its session opened; the
// restatement has it revoked. A second Hello used to be ignored.
//
// This checks the outcome end to end. A reconnect (the watchdog gives up a
// parent silent for 1.5 of these 10 ms report intervals, which happens under
// -race) reaches it too, through the new session's Hello, so the test passes
// with RestateEvery 0 as well (checked); the mechanism itself is tested by
// session's TestRestateEveryFollowsEveryNthReportWithAHello and the parent's
// half by TestSecondHelloIsReconciled below.
func TestRestatedHoldingsAreReconciled(t *testing.T) {
	g, err := Start(Config{
		Tier: interfaces.TierGlobal, Instance: "g", NodeID: "n1", DataDir: t.TempDir(),
		RaftAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", Bootstrap: true,
		Interval: 50 * time.Millisecond, ReportInterval: 10 * time.Millisecond,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	testutil.Until(t, "global: leader", 10*time.Second, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.leader && g.IsLeader()
	})
	must(t, g, &fsm.PutChild{Child: interfaces.Child{ID: "r2", Tier: interfaces.TierRegion, Capacity: interfaces.Load{CPU: 100}}})
	must(t, g, &fsm.PutShards{Shards: []interfaces.Shard{{ID: "j/0", Job: "j", Load: interfaces.Load{CPU: 1}}}})
	must(t, g, &fsm.Assign{Shard: "j/0", Child: "r2"})

	r := start(t, interfaces.TierRegion, []string{g.GRPCAddr()})
	testutil.Until(t, "the region's session with the global tier", 10*time.Second, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.sessions[interfaces.ChildID(r.cfg.Instance)] != nil
	})
	// The region comes to hold r2's shard after its Hello was reconciled.
	must(t, r, &fsm.PutShards{Shards: []interfaces.Shard{{ID: "j/0", Job: "j", Load: interfaces.Load{CPU: 1}}}})
	testutil.Until(t, "r2's shard revoked from the region", 20*time.Second, func() bool {
		_, held := r.Tier().FSM.Shard("j/0")
		return !held
	})
	if st, _ := g.Tier().FSM.Shard("j/0"); st.Owner != "r2" {
		t.Errorf("the global tier's j/0: %+v, want r2's", st)
	}
}

// The parent's half of the above, driven directly.
func TestSecondHelloIsReconciled(t *testing.T) {
	g := globalWithTwoRegions(t)
	must(t, g, &fsm.Assign{Shard: "j/0", Child: "r2"})
	s1 := fakeSession(g, "r1")
	hello := &wire.Hello{ChildId: "r1", Tier: interfaces.TierRegion, HeldEpochs: map[string]uint64{"j/0": 1}}
	g.onChildMessage(context.Background(), s1, &wire.ChildMessage{Msg: &wire.ChildMessage_Hello{Hello: hello}})
	if r := revokesOf(drain(s1), "j/0"); len(r) != 1 || r[0] != 1 {
		t.Errorf("r1 restates holding r2's j/0: revokes %v, want one at 1", r)
	}
	hello.ChildId = "r2" // another child's Hello on r1's session
	g.onChildMessage(context.Background(), s1, &wire.ChildMessage{Msg: &wire.ChildMessage_Hello{Hello: hello}})
	if msgs := drain(s1); len(msgs) != 0 {
		t.Errorf("a Hello naming another child was reconciled: %v", msgs)
	}
}

// A deposed parent leader's sessions stay open until its control loop polls
// leadership (here never: its interval is an hour), and whatever it sends from
// its stale state — an Assign of a shard its successor may have moved — reached
// the child (a candidate for observation 1, first bullet: the source region
// re-acquiring a shard at its old epoch). A session now sends nothing once its
// replica no longer leads in the session's term.
func TestDeposedParentSendsNothing(t *testing.T) {
	ds := startGroup(t, 3, func(c *Config) { c.Interval = time.Hour })
	var L *Daemon
	testutil.Until(t, "a leader", 20*time.Second, func() bool {
		for _, d := range ds {
			d.poke() // the loop runs only when poked
			d.mu.Lock()
			ok := d.leader
			d.mu.Unlock()
			if ok && d.IsLeader() {
				L = d
				return true
			}
		}
		return false
	})
	must(t, L, &fsm.PutShards{Shards: []interfaces.Shard{{ID: "j/0", Job: "j", Load: interfaces.Load{CPU: 1}}}})
	f := &fakeChild{id: "r1"}
	connectChild(t, f, L.GRPCAddr(), "L")
	defer f.cancel()
	testutil.Until(t, "r1's session", 10*time.Second, func() bool {
		L.mu.Lock()
		defer L.mu.Unlock()
		return L.sessions["r1"] != nil
	})
	testutil.Until(t, "j/0 placed on r1 and assigned", 10*time.Second, func() bool {
		if a, ok := L.Tier().FSM.Assignment("j/0"); !ok || a.Child != "r1" {
			_, _ = L.Tier().Assign(context.Background(), "j/0", "r1", "test") // or the round places it
			return false
		}
		L.sendAssign("r1", "j/0", 1)
		return len(f.records("assign")) > 0
	})
	_ = L.Tier().Raft().LeadershipTransfer().Error() // fails only if L lost leadership already
	testutil.Until(t, "L deposed in Raft", 10*time.Second, func() bool { return !L.IsLeader() })
	before := len(f.records("assign"))
	L.sendAssign("r1", "j/0", 1) // from its stale state: it still counts r1 the owner
	ended := false
	testutil.Until(t, "the deposed leader's session ends or its Assign arrives", 20*time.Second, func() bool {
		select {
		case <-f.ended:
			ended = true
		default:
		}
		return ended || len(f.records("assign")) > before
	})
	if n := len(f.records("assign")); n != before || !ended {
		t.Errorf("r1 got %d Assigns from the deposed leader (session ended: %v)", n-before, ended)
	}
}
