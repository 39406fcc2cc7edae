package fsm

import (
	"fmt"
	"reflect"
	"testing"

	"pgregory.net/rapid"

	"github.com/strata-sched/strata/interfaces"
)

// overCap reports whether load exceeds capacity in some dimension (with
// balancer.Verify's rounding tolerance).
func overCap(load, capacity interfaces.Load) bool {
	for _, r := range interfaces.UnionNames(load, capacity) {
		if l, c := load.Get(r), capacity.Get(r); l > c*(1+1e-9)+1e-9 {
			return true
		}
	}
	return false
}

// drawPlanMove draws a move a planner could send: mostly from the shard's owner
// and epoch as the FSM shows them now (stale when an earlier round has not been
// applied yet), sometimes one epoch ahead (a planner that assumed its previous
// plan landed), sometimes a first placement.
func drawPlanMove(t *rapid.T, f *FSM) (interfaces.Move, bool) {
	v := f.View("t", "i")
	if len(v.Children) == 0 || len(v.Shards) == 0 {
		return interfaces.Move{}, false
	}
	s := rapid.SampledFrom(v.Shards).Draw(t, "pm.shard")
	to := rapid.SampledFrom(v.Children).Draw(t, "pm.to").ID
	st, _ := f.Shard(s.ID)
	m := interfaces.Move{Shard: s.ID, From: st.Owner, To: to, Epoch: st.Epoch, Reason: "p"}
	switch rapid.IntRange(0, 5).Draw(t, "pm.kind") {
	case 0:
		m.Epoch++
	case 1:
		m.From = ""
	}
	if m.From == "" && rapid.Bool().Draw(t, "pm.noepoch") {
		m.Epoch = 0 // a first placement need not carry an epoch
	}
	return m, true
}

// The plan applier verifies a round while earlier rounds are still being
// committed (VerifyPlanPending), and any of those rounds may be lost (leadership
// change) or be applied before the applier retires it. Property: whichever rounds
// are lost and however far application has got when each round is verified, every
// accepted move of a round that is applied applies without a rejection (no shard
// is moved twice from the same owner and epoch, no move relies on one that did
// not land), and no child that was within its capacity goes over it, after any
// applied entry.
func TestVerifyPlanPendingOverlappingRounds(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		// A small, crowded tier (the names genCommand uses), then random commands.
		f := New()
		var setup []Command
		for i := range 4 {
			setup = append(setup, &PutChild{Child: interfaces.Child{ID: interfaces.ChildID(fmt.Sprintf("c%d", i)), Tier: "host",
				Capacity: cpu(float64(rapid.IntRange(1, 6).Draw(rt, "cap")))}})
		}
		for i := range 8 {
			id := interfaces.ShardID(fmt.Sprintf("s%d", i))
			setup = append(setup, &PutShards{Shards: []interfaces.Shard{{ID: id, Job: "j", Load: cpu(float64(rapid.IntRange(1, 2).Draw(rt, "load")))}}},
				&Assign{Shard: id, Child: interfaces.ChildID(fmt.Sprintf("c%d", rapid.IntRange(0, 3).Draw(rt, "on")))})
			if rapid.IntRange(0, 3).Draw(rt, "unassigned") == 0 {
				setup = append(setup, &Unassign{Shard: id, Epoch: 1})
			}
		}
		applyAll(rt, f, 1, setup...)
		genApply(rt, f, 100, rapid.IntRange(0, 10).Draw(rt, "len"))
		within := map[interfaces.ChildID]bool{}
		for _, c := range f.Children() {
			within[c.Child.ID] = !overCap(c.Used, c.Child.Capacity)
		}
		begin := rapid.Bool().Draw(rt, "begin")
		type round struct {
			pending []Pending
			lost    bool
		}
		var rounds []*round
		idx := uint64(10_000)
		resolve := func(k int) {
			r := rounds[k]
			if r.lost || len(r.pending) == 0 {
				return
			}
			var moves []interfaces.Move
			for _, p := range r.pending {
				moves = append(moves, p.Move)
			}
			idx++
			res := applyAll(rt, f, idx, &ApplyPlan{Tier: "t", Begin: begin, Moves: moves})[0]
			for i, op := range res.Ops {
				if op.Err != nil {
					rt.Fatalf("round %d: accepted move %+v was rejected at apply: %v", k, moves[i], op.Err)
				}
			}
			for _, c := range f.Children() {
				if within[c.Child.ID] && overCap(c.Used, c.Child.Capacity) {
					rt.Fatalf("round %d: child %q carries %v over its capacity %v", k, c.Child.ID, c.Used, c.Child.Capacity)
				}
			}
			checkInvariants(rt, f)
		}
		applied, retired := 0, 0
		for k, n := 0, rapid.IntRange(1, 6).Draw(rt, "rounds"); k < n; k++ {
			// Application has got this far (raft applies in order); the applier
			// has retired a prefix of the applied rounds.
			for to := rapid.IntRange(applied, k).Draw(rt, "applied"); applied < to; applied++ {
				resolve(applied)
			}
			retired = rapid.IntRange(retired, applied).Draw(rt, "retired")
			var pending []Pending
			for _, r := range rounds[retired:] {
				pending = append(pending, r.pending...)
			}
			var moves []interfaces.Move
			for i, nm := 0, rapid.IntRange(1, 8).Draw(rt, "moves"); i < nm; i++ {
				if m, ok := drawPlanMove(rt, f); ok {
					moves = append(moves, m)
				}
			}
			v, _ := f.VerifyPlanPending(pending, moves)
			r := &round{lost: rapid.IntRange(0, 3).Draw(rt, "lost") == 0}
			for _, m := range v.Accepted {
				st, _ := f.Shard(m.Shard)
				r.pending = append(r.pending, Pending{Move: m, Load: st.Spec.Load})
			}
			rounds = append(rounds, r)
		}
		for ; applied < len(rounds); applied++ {
			resolve(applied)
		}
	})
}

// Without pending moves VerifyPlanPending is VerifyPlan; a pending move that has
// not been applied blocks further moves of its shard and counts on its target,
// and stops counting once the shard's epoch has passed it.
func TestVerifyPlanPendingCases(t *testing.T) {
	f := New()
	applyAll(t, f, 1,
		&PutChild{Child: interfaces.Child{ID: "a", Tier: "host", Capacity: cpu(10)}},
		&PutChild{Child: interfaces.Child{ID: "b", Tier: "host", Capacity: cpu(3)}},
		&PutChild{Child: interfaces.Child{ID: "c", Tier: "host", Capacity: cpu(10)}},
		&PutShards{Shards: []interfaces.Shard{{ID: "s1", Job: "j", Load: cpu(2)}, {ID: "s2", Job: "j", Load: cpu(2)}, {ID: "s3", Job: "j", Load: cpu(1)}}},
		&Assign{Shard: "s1", Child: "a"}, &Assign{Shard: "s2", Child: "a"}, &Assign{Shard: "s3", Child: "a"})
	mv := func(s interfaces.ShardID, from, to interfaces.ChildID, e interfaces.Epoch) interfaces.Move {
		return interfaces.Move{Shard: s, From: from, To: to, Epoch: e}
	}
	p1 := Pending{Move: mv("s1", "a", "b", 1), Load: cpu(2)}
	// s1 → b is pending: a second move of s1 from the same owner and epoch is
	// refused, and b (capacity 3) has room for s3 (1) but not for s2 (2).
	v, acc := f.VerifyPlanPending([]Pending{p1}, []interfaces.Move{mv("s1", "a", "b", 1), mv("s2", "a", "b", 1), mv("s3", "a", "b", 1)})
	if len(v.Accepted) != 1 || v.Accepted[0].Shard != "s3" || len(v.Rejected) != 2 ||
		v.Rejected[0].Code.String() != "in_flight" || v.Rejected[1].Code.String() != "capacity" {
		t.Fatalf("with s1→b pending: %+v", v)
	}
	// The accepted move comes back as pending, with the shard's load.
	if len(acc) != 1 || !reflect.DeepEqual(acc[0].Move, v.Accepted[0]) || !reflect.DeepEqual(acc[0].Load, cpu(1)) {
		t.Fatalf("accepted as pending: %+v", acc)
	}
	// Without it, both fit one at a time.
	if v, _ := f.VerifyPlanPending(nil, []interfaces.Move{mv("s2", "a", "b", 1)}); len(v.Accepted) != 1 {
		t.Fatalf("without pending: %+v", v)
	}
	// Once s1's move is applied (epoch 2) the state counts it and the pending
	// entry no longer does: s1 may move on from b, and b has 1 cpu left.
	applyAll(t, f, 10, &ApplyPlan{Tier: "t", Moves: []interfaces.Move{p1.Move}})
	v, _ = f.VerifyPlanPending([]Pending{p1}, []interfaces.Move{mv("s1", "b", "a", 2), mv("s3", "a", "b", 1)})
	if len(v.Accepted) != 2 {
		t.Fatalf("after s1's move applied: %+v", v)
	}
	// A pending move that can never land (its epoch is gone) counts nowhere.
	lost := Pending{Move: mv("s1", "a", "b", 1), Load: cpu(2)}
	v, _ = f.VerifyPlanPending([]Pending{lost}, []interfaces.Move{mv("s3", "a", "b", 1)})
	if len(v.Accepted) != 1 {
		t.Fatalf("with a stale pending move: %+v", v)
	}
	// A pending move blocked by another writer's in-flight move at its epoch may
	// still land after that move is aborted: it keeps counting on its target (b
	// has 1 cpu left, s2 needs 2, so s3 no longer fits), and its shard reads as in
	// flight.
	applyAll(t, f, 11, &BeginMove{Move: mv("s2", "a", "c", 1)})
	blocked := Pending{Move: mv("s2", "a", "b", 1), Load: cpu(2)}
	v, _ = f.VerifyPlanPending([]Pending{blocked}, []interfaces.Move{mv("s3", "a", "b", 1), mv("s2", "a", "c", 1)})
	if len(v.Accepted) != 0 || len(v.Rejected) != 2 || v.Rejected[0].Code.String() != "capacity" || v.Rejected[1].Code.String() != "in_flight" {
		t.Fatalf("with a blocked pending move: %+v", v)
	}
	// A pending first placement blocks another placement of its shard.
	applyAll(t, f, 12, &PutShards{Shards: []interfaces.Shard{{ID: "s4", Job: "j", Load: cpu(1)}}})
	first := Pending{Move: interfaces.Move{Shard: "s4", To: "b"}, Load: cpu(1)}
	v, _ = f.VerifyPlanPending([]Pending{first}, []interfaces.Move{{Shard: "s4", To: "c"}})
	if len(v.Accepted) != 0 || v.Rejected[0].Code.String() != "in_flight" {
		t.Fatalf("second first placement while one is pending: %+v", v)
	}
}
