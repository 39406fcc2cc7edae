package tierd

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/internal/testutil"
	"github.com/strata-sched/strata/tiers/control"
)

// A move the state machine would refuse (a non-finite delta, a reason or goal
// over the command's string limit) used to pass verification and make the
// whole ApplyPlan entry invalid: the good moves of the round were lost with it,
// every round, and the bad one was never counted as a rejection. It is rejected
// on its own now (invalid), and the rest of the plan commits.
func TestOneUncommittableMoveDoesNotSinkTheRound(t *testing.T) {
	for name, bad := range map[string]func(*interfaces.Move){
		"inf-delta":   func(m *interfaces.Move) { m.Delta = math.Inf(-1) },
		"long-reason": func(m *interfaces.Move) { m.Reason = strings.Repeat("x", fsm.MaxStringLen+1) },
		"long-goal":   func(m *interfaces.Move) { m.Goal = strings.Repeat("g", fsm.MaxStringLen+1) },
	} {
		t.Run(name, func(t *testing.T) {
			d, _ := revokeRegion(t, "h1", "h2")
			must(t, d, &fsm.PutShards{Shards: []interfaces.Shard{{ID: "j/1", Job: "j", Load: interfaces.Load{CPU: 1}}}})
			good := interfaces.Move{Shard: "j/0", To: "h1", Reason: "good"}
			poison := interfaces.Move{Shard: "j/1", To: "h2", Reason: "bad"}
			bad(&poison)
			d.decide.Lock()
			applied, rejected, err := d.commitMoves(context.Background(), []interfaces.Move{poison, good}, nil, nil, "policy test")
			d.decide.Unlock()
			if err != nil {
				t.Fatalf("commit: %v (the bad move sank the batch)", err)
			}
			if st, _ := d.Tier().FSM.Shard("j/0"); st.Owner != "h1" || len(applied) != 1 {
				t.Errorf("applied %v, j/0 on %q: want the good move committed", applied, st.Owner)
			}
			if st, _ := d.Tier().FSM.Shard("j/1"); st.Owner != "" {
				t.Errorf("j/1 placed on %q despite its bad move", st.Owner)
			}
			rej := d.LastRejections()
			if rejected != 1 || len(rej) != 1 || rej[0].Code != balancer.RejectInvalid || rej[0].Move.Shard != "j/1" {
				t.Errorf("rejected %d %+v: want the bad move rejected as invalid, with its reason", rejected, rej)
			}
		})
	}
}

// A round's first placements and its moves off live children commit in one
// entry: before, they were two (direct, then begun), and the second could fail
// after the first had committed, leaving the plan half applied.
func TestDirectAndBegunMovesCommitInOneEntry(t *testing.T) {
	d, _ := revokeRegion(t, "h1", "h2")
	must(t, d, &fsm.PutShards{Shards: []interfaces.Shard{{ID: "j/1", Job: "j", Load: interfaces.Load{CPU: 1}}}})
	must(t, d, &fsm.ApplyPlan{Tier: "region", Moves: []interfaces.Move{{Shard: "j/0", To: "h1"}}})
	st, _ := d.Tier().FSM.Shard("j/0")
	before := d.Tier().FSM.AppliedIndex()
	d.decide.Lock()
	applied, rejected, err := d.commitMoves(context.Background(), []interfaces.Move{
		{Shard: "j/0", From: "h1", To: "h2", Epoch: st.Epoch}, // begun: h1 is live
		{Shard: "j/1", To: "h2"},                              // direct: a first placement
	}, nil, nil, "policy test")
	d.decide.Unlock()
	if err != nil || rejected != 0 || len(applied) != 2 {
		t.Fatalf("applied %v, rejected %d, err %v", applied, rejected, err)
	}
	if n := d.Tier().FSM.AppliedIndex() - before; n != 1 {
		t.Errorf("the plan took %d log entries, want 1", n)
	}
	if st, _ := d.Tier().FSM.Shard("j/0"); st.InFlight == nil || st.InFlight.To != "h2" {
		t.Errorf("j/0: %+v, want a move to h2 in flight", st)
	}
	if st, _ := d.Tier().FSM.Shard("j/1"); st.Owner != "h2" {
		t.Errorf("j/1 on %q, want h2", st.Owner)
	}
}

// The tier-level rules in a policy's view (here an operator's pin, manual
// mode) are checked again when its moves commit: before, the commit checked
// only the shards' own constraints, and a policy or plugin that ignored
// view.Constraints broke them. Capacity limits are not: they are measured on
// the children's reported loads, the commit on declared ones (balancer.CommitRules), so
// j/3 past h2's limit commits (within h2's capacity).
func TestCommitChecksTheTiersRules(t *testing.T) {
	d, err := Start(Config{
		Tier: interfaces.TierRegion, Instance: "r", NodeID: "n1", DataDir: t.TempDir(),
		RaftAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", Bootstrap: true, Parent: []string{"127.0.0.1:1"},
		Interval: 50 * time.Millisecond, Integration: IntegrationManual,
		Constraints: []interfaces.Constraint{
			{Kind: interfaces.ConstraintPin, Shards: []interfaces.ShardID{"j/1"}, Children: []interfaces.ChildID{"h1"}, Reason: "operator pin"},
			{Kind: interfaces.ConstraintCapacity, Children: []interfaces.ChildID{"h2"}, Limit: interfaces.Load{CPU: 1.5}, Reason: "operator: h2 usable cpu 1.5"},
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	testutil.Until(t, "leader", 10*time.Second, func() bool { d.mu.Lock(); defer d.mu.Unlock(); return d.leader })
	for _, id := range []interfaces.ChildID{"h1", "h2"} {
		must(t, d, &fsm.PutChild{Child: interfaces.Child{ID: id, Tier: interfaces.TierHost, Capacity: interfaces.Load{CPU: 8}}})
	}
	must(t, d, &fsm.PutShards{Shards: []interfaces.Shard{
		{ID: "j/1", Job: "j", Load: interfaces.Load{CPU: 1}},
		{ID: "j/2", Job: "j", Load: interfaces.Load{CPU: 1}},
		{ID: "j/3", Job: "j", Load: interfaces.Load{CPU: 1}},
	}})
	d.decide.Lock()
	view, _ := d.baseView(time.Now())
	view.Constraints = append(view.Constraints, d.cooperate(view)...)
	applied, rejected, err := d.commitMoves(context.Background(), []interfaces.Move{
		{Shard: "j/1", To: "h2", Reason: "ignores the operator pin"},
		{Shard: "j/2", To: "h2", Reason: "within h2's limit"},
		{Shard: "j/3", To: "h2", Reason: "past h2's limit"},
	}, view.Constraints, view.Shards, "policy test")
	d.decide.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) != 2 || applied[0].Shard != "j/2" || applied[1].Shard != "j/3" || rejected != 1 {
		t.Errorf("applied %v, rejected %d: want j/2 and j/3 committed", applied, rejected)
	}
	if st, _ := d.Tier().FSM.Shard("j/1"); st.Owner != "" {
		t.Errorf("j/1 committed onto %s despite the operator's pin", st.Owner)
	}
	rej := d.LastRejections()
	if len(rej) != 1 || rej[0].Code != balancer.RejectConstraint || !strings.Contains(rej[0].Reason, "operator pin") {
		t.Errorf("rejections %+v: want the pin (constraint), naming the rule", rej)
	}
}

// An evacuation off a failed child that fits its target commits in an
// emergency round even when the plan lists rebalancing moves into the same
// target before it, which the round drops: the plan was verified whole before
// admission, and the dropped move's room refused the evacuation, every round
// (a review's probe).
func TestEvacuationNotBlockedByADroppedMove(t *testing.T) {
	d, _ := revokeRegion(t, "h1", "h2", "h3")
	must(t, d, &fsm.PutShards{Shards: []interfaces.Shard{
		{ID: "a", Job: "k", Load: interfaces.Load{CPU: 2}},
		{ID: "b", Job: "k", Load: interfaces.Load{CPU: 2}},
		{ID: "c", Job: "k", Load: interfaces.Load{CPU: 6}},
	}})
	must(t, d, &fsm.ApplyPlan{Tier: "region", Moves: []interfaces.Move{{Shard: "a", To: "h1"}, {Shard: "b", To: "h2"}, {Shard: "c", To: "h3"}}})
	must(t, d, &fsm.PutChild{Child: interfaces.Child{ID: "h2", Tier: interfaces.TierHost, Capacity: interfaces.Load{CPU: 8}, State: interfaces.ChildFailed}})
	ep := func(id interfaces.ShardID) interfaces.Epoch { st, _ := d.Tier().FSM.Shard(id); return st.Epoch }
	plan := interfaces.Plan{Moves: []interfaces.Move{
		{Shard: "a", From: "h1", To: "h3", Epoch: ep("a")}, // rebalancing: dropped in an emergency
		{Shard: "b", From: "h2", To: "h3", Epoch: ep("b")}, // evacuation: fits on h3 alone (6+2 = 8)
		{Shard: "c", From: "h3", To: "h1", Epoch: ep("c")}, // rebalancing: dropped
		{Shard: "zz", To: "h1"},                            // unknown: refused before admission
	}}
	applied, rejected := actOn(t, d, plan, control.Decision{Mode: control.ModeEmergency, Evacuate: []interfaces.ShardID{"b"}})
	if st, _ := d.Tier().FSM.Shard("b"); st.Owner != "h3" {
		t.Errorf("evacuation of b not committed: applied %v, rejected %d, rejections %+v", applied, rejected, d.LastRejections())
	}
	if rej := d.LastRejections(); rejected != 1 || len(rej) != 1 || rej[0].Code != balancer.RejectUnknownShard {
		t.Errorf("rejected %d, rejections %+v: want the unknown shard's", rejected, rej)
	}
}

// The round verifies the policy's plan before it admits it: moves the tier
// refuses (an unknown shard, a stale epoch) used to spend the round's move
// budget (dec.Admit ran first), and the valid move after them was dropped — a
// sloppy or hostile plugin listing junk first starved the tier of every
// rebalancing move.
func TestRejectedMovesSpendNoBudget(t *testing.T) {
	d, _ := revokeRegion(t, "h1", "h2")
	must(t, d, &fsm.PutShards{Shards: []interfaces.Shard{{ID: "j/1", Job: "j", Load: interfaces.Load{CPU: 1}}, {ID: "j/2", Job: "j", Load: interfaces.Load{CPU: 1}}}})
	must(t, d, &fsm.ApplyPlan{Tier: "region", Moves: []interfaces.Move{{Shard: "j/0", To: "h1"}, {Shard: "j/1", To: "h1"}, {Shard: "j/2", To: "h1"}}})
	st0, _ := d.Tier().FSM.Shard("j/0")
	st1, _ := d.Tier().FSM.Shard("j/1")
	st2, _ := d.Tier().FSM.Shard("j/2")
	plan := interfaces.Plan{Moves: []interfaces.Move{
		{Shard: "ghost", From: "h1", To: "h2", Epoch: st0.Epoch},   // unknown shard
		{Shard: "j/0", From: "h1", To: "h2", Epoch: st0.Epoch - 1}, // stale epoch
		{Shard: "j/1", From: "h1", To: "h2", Epoch: st1.Epoch},     // good
		{Shard: "j/2", From: "h1", To: "h2", Epoch: st2.Epoch},     // good, over the budget
	}}
	applied, rejected := actOn(t, d, plan, control.Decision{Mode: control.ModePeriodic, MaxMoves: 1})
	if len(applied) != 1 || applied[0].Shard != "j/1" {
		t.Errorf("applied %v: want the first valid move (budget 1)", applied)
	}
	if rejected != 2 {
		t.Errorf("%d rejected, want the 2 invalid moves", rejected)
	}
	if st, _ := d.Tier().FSM.Shard("j/1"); st.InFlight == nil || st.InFlight.To != "h2" {
		t.Errorf("j/1: %+v, want its move to h2 begun", st)
	}
	if st, _ := d.Tier().FSM.Shard("j/2"); st.InFlight != nil {
		t.Errorf("j/2 moved past the round's budget: %+v", st.InFlight)
	}
}

// actOn carries out plan as a round decided dec would, on the current view.
func actOn(t *testing.T, d *Daemon, plan interfaces.Plan, dec control.Decision) (applied []interfaces.Move, rejected int) {
	t.Helper()
	d.decide.Lock()
	defer d.decide.Unlock()
	sv, _ := d.baseView(time.Now())
	return actPlan(t, d, sv, plan, dec)
}
