package tierd

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/interfaces"
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
			applied, rejected, err := d.commitMoves(context.Background(), []interfaces.Move{poison, good}, "policy test")
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
	}, "policy test")
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
