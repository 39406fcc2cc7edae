package balancer

import (
	"strings"
	"testing"

	"github.com/strata-sched/strata/interfaces"
)

// A constraint naming a child the tier does not have (a shard pinned to
// "region-1" — the job-file help's own example — at a tier without it, an
// allowed list of children gone or not joined yet, a tier rule naming them)
// used to make FromView fail, and with it every solve of the tier: nothing
// placed, failover included, until the job was deleted. It makes that shard
// infeasible now, with the constraint and the missing child in the reason;
// every other shard is placed, and rules naming shards the view does not have
// are left out of it (as Verify leaves them out).
func TestUnknownChildMakesOneShardInfeasible(t *testing.T) {
	cases := []struct {
		name string
		edit func(v *interfaces.View)
		bad  interfaces.ShardID // "" when every shard is placed
		want []string           // in every child's reason
	}{
		{"shard pinned to a missing child", func(v *interfaces.View) {
			v.Shards[2].Constraints.Pinned = "region-1"
		}, "s2", []string{"pin", `"region-1"`, "a child of this tier"}},
		{"shard allowed only on missing children", func(v *interfaces.View) {
			v.Shards[2].Constraints.Allowed = []interfaces.ChildID{"gone-1", "gone-2"}
		}, "s2", []string{"allowed", `"gone-1", "gone-2"`, "a child of this tier"}},
		{"shard allowed on a missing child and h2", func(v *interfaces.View) {
			v.Shards[2].Constraints.Allowed = []interfaces.ChildID{"gone", "h2"}
		}, "", nil},
		{"tier pin to a missing child", func(v *interfaces.View) {
			v.Constraints = []interfaces.Constraint{{Kind: interfaces.ConstraintPin, Shards: []interfaces.ShardID{"s2"}, Children: []interfaces.ChildID{"region-1"}, Reason: "operator"}}
		}, "s2", []string{"pin", `"region-1"`, "operator", "a child of this tier"}},
		{"tier allowed rule of missing children", func(v *interfaces.View) {
			v.Constraints = []interfaces.Constraint{{Kind: interfaces.ConstraintAllowed, Shards: []interfaces.ShardID{"s2"}, Children: []interfaces.ChildID{"zz"}}}
		}, "s2", []string{"allowed", `"zz"`, "a child of this tier"}},
		{"rules naming missing shards and children", func(v *interfaces.View) {
			v.Constraints = []interfaces.Constraint{
				{Kind: interfaces.ConstraintAntiAffinity, Shards: []interfaces.ShardID{"s0", "deleted/1", "s1"}},
				{Kind: interfaces.ConstraintPin, Shards: []interfaces.ShardID{"deleted/2"}, Children: []interfaces.ChildID{"h0"}},
				{Kind: interfaces.ConstraintCapacity, Children: []interfaces.ChildID{"gone"}, Limit: interfaces.Load{CPU: 1}},
				{Kind: interfaces.ConstraintAvoid, Shards: []interfaces.ShardID{"s3", "deleted/3"}, Children: []interfaces.ChildID{"gone"}},
			}
		}, "", nil},
	}
	for _, tc := range cases {
		for _, solver := range SolverNames() {
			t.Run(tc.name+"/"+solver, func(t *testing.T) {
				v := smallView()
				v.Assignments = nil // every shard to place: a solver that gives up places nothing
				tc.edit(v)
				p, err := FromView(v, ViewOptions{})
				if err != nil {
					t.Fatalf("FromView: %v (one shard's constraint stops the tier)", err)
				}
				res, err := Solve(solver, p, Options{Seed: 1})
				if err != nil {
					t.Fatalf("solve: %v", err)
				}
				plan := res.Plan("region")
				placed := map[interfaces.ShardID]bool{}
				for _, m := range plan.Moves {
					placed[m.Shard] = true
				}
				for _, sh := range v.Shards {
					if sh.ID != tc.bad && !placed[sh.ID] {
						t.Errorf("shard %s not placed (plan %+v)", sh.ID, plan.Moves)
					}
				}
				if tc.bad == "" {
					if len(plan.Infeasible) != 0 {
						t.Errorf("infeasible %+v, want none", plan.Infeasible)
					}
					return
				}
				if placed[tc.bad] {
					t.Errorf("%s placed despite its unresolved constraint", tc.bad)
				}
				if len(plan.Infeasible) != 1 || plan.Infeasible[0].Shard != tc.bad {
					t.Fatalf("infeasible %+v, want %s only", plan.Infeasible, tc.bad)
				}
				for _, c := range v.Children {
					why := plan.Infeasible[0].Excluded[c.ID]
					for _, w := range tc.want {
						if !strings.Contains(why, w) {
							t.Errorf("reason on %s: %q, want it to contain %q", c.ID, why, w)
						}
					}
				}
			})
		}
	}
}

// A placed shard whose pin names a missing child stays where it runs
// (nothing is allowed, so nothing is better) and is reported infeasible; the
// other shards still move off a failed child (emergency re-placement).
func TestUnknownPinKeepsAPlacedShardAndFailoverWorks(t *testing.T) {
	for _, solver := range SolverNames() {
		t.Run(solver, func(t *testing.T) {
			v := smallView()
			v.Shards[3].Constraints.Pinned = "region-1"  // s3 on h1
			v.Children[0].State = interfaces.ChildFailed // s0, s1, s2 must leave h0
			p, err := FromView(v, ViewOptions{})
			if err != nil {
				t.Fatalf("FromView: %v", err)
			}
			res, err := Solve(solver, p, Options{Seed: 1})
			if err != nil {
				t.Fatalf("solve: %v", err)
			}
			to := map[interfaces.ShardID]interfaces.ChildID{}
			for _, m := range res.Plan("region").Moves {
				to[m.Shard] = m.To
			}
			for _, id := range []interfaces.ShardID{"s0", "s1", "s2"} {
				if to[id] == "" || to[id] == "h0" {
					t.Errorf("%s not moved off the failed h0 (moves %v)", id, to)
				}
			}
			if _, moved := to["s3"]; moved {
				t.Errorf("s3 moved to %s, want it kept on h1", to["s3"])
			}
		})
	}
}

// Verify treats the same constraints per move: a move of a shard pinned to a
// missing child is rejected (constraint, naming the pin), the plan's other
// moves are accepted, and rules naming missing shards or children are left
// out — no verification fails as a whole.
func TestVerifyRejectsOnlyTheMovesOfAnUnresolvedShard(t *testing.T) {
	v := smallView()
	v.Shards[2].Constraints.Pinned = "region-1"
	v.Constraints = []interfaces.Constraint{
		{Kind: interfaces.ConstraintPin, Shards: []interfaces.ShardID{"s3"}, Children: []interfaces.ChildID{"gone"}, Reason: "operator"},
		{Kind: interfaces.ConstraintAntiAffinity, Shards: []interfaces.ShardID{"s0", "deleted/1"}},
		{Kind: interfaces.ConstraintAllowed, Shards: []interfaces.ShardID{"deleted/2"}, Children: []interfaces.ChildID{"gone"}},
	}
	verdict, err := VerifyViewRules(v, []interfaces.Move{
		{Shard: "s2", From: "h0", To: "h1", Epoch: 1},
		{Shard: "s3", From: "h1", To: "h2", Epoch: 1},
		{Shard: "s1", From: "h0", To: "h2", Epoch: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(verdict.Accepted) != 1 || verdict.Accepted[0].Shard != "s1" || len(verdict.Rejected) != 2 {
		t.Fatalf("verdict %+v: want s1 accepted, s2 and s3 rejected", verdict)
	}
	for i, want := range []string{`pinned to "region-1"`, `pinned to "gone"`} {
		if r := verdict.Rejected[i]; r.Code != RejectConstraint || !strings.Contains(r.Reason, want) {
			t.Errorf("rejection %d: %s %q, want constraint naming %s", i, r.Code, r.Reason, want)
		}
	}
}
