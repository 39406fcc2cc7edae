package fsm

import (
	"math"
	"reflect"
	"testing"

	"pgregory.net/rapid"

	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/interfaces"
)

// The leader verifies a plan with VerifyPlan and commits the accepted moves with
// ApplyPlan. Properties: VerifyPlan agrees with balancer.VerifyView on the FSM's
// own View (the adapter reads the same state), and every accepted move applies
// without a rejection.
func TestVerifiedPlansApplyCleanly(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		f := New()
		genApply(rt, f, 1, rapid.IntRange(0, 50).Draw(rt, "len"))
		v := f.View("region", "r")
		var moves []interfaces.Move
		for i, n := 0, rapid.IntRange(1, 10).Draw(rt, "moves"); i < n; i++ {
			if c, ok := genSmart(rt, f).(*ApplyPlan); ok {
				moves = append(moves, c.Moves...)
				continue
			}
			if c, ok := genCommand(rt).(*ApplyPlan); ok {
				moves = append(moves, c.Moves...)
			}
		}
		got := f.VerifyPlan(moves)
		// The view knows nothing of quarantine: VerifyPlan rejects those
		// shards' moves itself and verifies the rest as if they were not there.
		q := f.Quarantined()
		var others []interfaces.Move
		for _, m := range moves {
			if q[m.Shard] == "" {
				others = append(others, m)
			}
		}
		want, err := balancer.VerifyView(v, others)
		if err != nil {
			rt.Fatal(err)
		}
		var rejected []balancer.Rejection
		for _, r := range got.Rejected {
			switch {
			case q[r.Move.Shard] == "":
				rejected = append(rejected, r)
			case r.Code != balancer.RejectConstraint:
				rt.Fatalf("quarantined %s's move rejected as %s", r.Move.Shard, r.Code)
			}
		}
		if len(got.Accepted)+len(got.Rejected) != len(moves) {
			rt.Fatalf("%d moves answered, %d in the plan", len(got.Accepted)+len(got.Rejected), len(moves))
		}
		if got := (balancer.Verdict{Accepted: got.Accepted, Rejected: rejected}); !reflect.DeepEqual(got, want) {
			rt.Fatalf("VerifyPlan and VerifyView disagree:\n fsm  %+v\n view %+v", got, want)
		}
		if len(got.Accepted) == 0 {
			return
		}
		r := applyAll(rt, f, 1000, &ApplyPlan{Tier: "region", Moves: got.Accepted})[0]
		for i, op := range r.Ops {
			if op.Err != nil {
				rt.Fatalf("verified move %d %+v was rejected at apply: %v", i, got.Accepted[i], op.Err)
			}
		}
		checkInvariants(rt, f)
	})
}

// TestVerifyRejectsQuarantinedShards: verification answers a quarantined
// shard's move as Apply does (refused), in plan order, and verifies the other
// moves as if it were not there. Before, VerifyPlan accepted it and the commit
// refused it (found by a property test of the plan applier, since removed,
// once its generator drew Quarantine).
func TestVerifyRejectsQuarantinedShards(t *testing.T) {
	f := fixture(t)
	mustApply(t, f, fixtureNext, &Quarantine{Shard: "s2", Reason: "doctor"})
	moves := []interfaces.Move{
		{Shard: "s4", To: "h3"},                       // target draining: rejected by Verify
		{Shard: "s2", To: "h2"},                       // quarantined
		{Shard: "s1", From: "h1", To: "h2", Epoch: 1}, // fine
	}
	for name, v := range map[string]balancer.Verdict{"VerifyPlan": f.VerifyPlan(moves)} {
		if len(v.Accepted) != 1 || v.Accepted[0].Shard != "s1" {
			t.Errorf("%s accepted %v, want s1's move only", name, v.Accepted)
		}
		if len(v.Rejected) != 2 || v.Rejected[0].Move.Shard != "s4" || v.Rejected[1].Move.Shard != "s2" || v.Rejected[1].Code != balancer.RejectConstraint {
			t.Errorf("%s rejected %+v, want s4 then s2 (constraint)", name, v.Rejected)
		}
	}
}

// TestVerifyAnswersEveryMoveWithAQuarantinedShard: merging the quarantined
// shards' rejections back in compared moves with ==, and a NaN Delta is not
// equal to itself: its rejection and every later one were lost (a review's
// probe).
func TestVerifyAnswersEveryMoveWithAQuarantinedShard(t *testing.T) {
	f := fixture(t)
	mustApply(t, f, fixtureNext, &Quarantine{Shard: "s2", Reason: "doctor"})
	moves := []interfaces.Move{
		{Shard: "s2", To: "h2"},                    // quarantined
		{Shard: "s4", To: "h1", Delta: math.NaN()}, // invalid (non-finite delta)
		{Shard: "s4", To: "h3"},                    // draining target
		{Shard: "s1", From: "h1", To: "h2", Epoch: 1},
	}
	v := f.VerifyPlan(moves)
	if n := len(v.Accepted) + len(v.Rejected); n != len(moves) {
		t.Errorf("verdict answers %d of %d moves: accepted %v rejected %+v", n, len(moves), v.Accepted, v.Rejected)
	}
}
