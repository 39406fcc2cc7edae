package fsm

import (
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
		want, err := balancer.VerifyView(v, moves)
		if err != nil {
			rt.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
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
