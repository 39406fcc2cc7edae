package packtier

import (
	"context"
	"fmt"
	"testing"

	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/tiers"
)

func view(shards int) *interfaces.View {
	v := &interfaces.View{Tier: "rack", Instance: "r1"}
	for i := 0; i < 4; i++ {
		v.Children = append(v.Children, interfaces.Child{ID: interfaces.ChildID(fmt.Sprintf("h%d", i)), Tier: "host", Capacity: interfaces.Load{CPU: 10}})
	}
	for i := 0; i < shards; i++ {
		id := interfaces.ShardID(fmt.Sprintf("s%d", i))
		v.Shards = append(v.Shards, interfaces.Shard{ID: id, Job: "j", Load: interfaces.Load{CPU: 3}})
		// spread over every host: pack should gather them
		v.Assignments = append(v.Assignments, interfaces.Assignment{Shard: id, Child: v.Children[i%4].ID, Epoch: 1})
	}
	return v
}

func TestPackGathersShards(t *testing.T) {
	p, err := tiers.New(Name, nil) // selected by name, as a config does
	if err != nil {
		t.Fatal(err)
	}
	v := view(6) // 18 cpu: fits on two hosts of 10 (3 shards each)
	plan, err := p.Plan(context.Background(), v)
	if err != nil {
		t.Fatal(err)
	}
	// The plan passes the same verification as a built-in policy's.
	verdict, err := balancer.VerifyViewRules(v, plan.Moves)
	if err != nil {
		t.Fatal(err)
	}
	if len(verdict.Rejected) != 0 {
		t.Fatalf("rejected: %v", verdict.Rejected)
	}
	on := map[interfaces.ChildID]int{}
	owner := map[interfaces.ShardID]interfaces.ChildID{}
	for _, a := range v.Assignments {
		owner[a.Shard] = a.Child
	}
	for _, m := range plan.Moves {
		owner[m.Shard] = m.To
	}
	for _, c := range owner {
		on[c]++
	}
	if len(on) != 2 || on["h2"] != 0 || on["h3"] != 0 {
		t.Errorf("shards per host after packing: %v, want everything on h0 and h1", on)
	}
}

func TestPackSaysWhatDoesNotFit(t *testing.T) {
	plan, err := Pack{}.Plan(context.Background(), view(14)) // 42 cpu > 40
	if err != nil {
		t.Fatal(err)
	}
	if plan.Status != interfaces.StatusInfeasible || len(plan.Infeasible) == 0 || plan.Infeasible[0].Excluded["h0"] != "capacity" {
		t.Errorf("want an infeasible result naming capacity: %+v", plan)
	}
	if _, err := tiers.New(Name, interfaces.PolicyConfig{"x": "1"}); err == nil {
		t.Error("a config key was accepted")
	}
}

// verifyPlan plans v with pack and checks the plan passes all the tier checks
// at commit (balancer.VerifyViewRules: v.Constraints included).
func verifyPlan(t *testing.T, v *interfaces.View) interfaces.Plan {
	t.Helper()
	plan, err := Pack{}.Plan(context.Background(), v)
	if err != nil {
		t.Fatal(err)
	}
	verdict, err := balancer.VerifyViewRules(v, plan.Moves)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range verdict.Rejected {
		t.Errorf("pack's plan is refused by the tier: %v", r.Err())
	}
	return plan
}

// The tier's view lists an in-flight shard's assignment on its source; its
// load counts on its target. Pack charged it to the source, saw the target
// empty and filled it past its capacity.
func TestPackCountsInFlightOnTheTarget(t *testing.T) {
	v := &interfaces.View{Tier: "rack", Instance: "r1",
		Children:    []interfaces.Child{{ID: "h0", Tier: "host", Capacity: interfaces.Load{CPU: 10}}, {ID: "h1", Tier: "host", Capacity: interfaces.Load{CPU: 10}}},
		Shards:      []interfaces.Shard{{ID: "a", Job: "j", Load: interfaces.Load{CPU: 6}}, {ID: "b", Job: "j", Load: interfaces.Load{CPU: 6}}},
		Assignments: []interfaces.Assignment{{Shard: "a", Child: "h1", Epoch: 2}, {Shard: "b", Child: "h1", Epoch: 2}},
		InFlight:    []interfaces.Move{{Shard: "a", From: "h1", To: "h0", Epoch: 2}},
	}
	if plan := verifyPlan(t, v); len(plan.Moves) != 0 {
		t.Errorf("moves %+v: b has room where it is, h0 is full with a", plan.Moves)
	}
}

// Pack ignored the shards' own constraints and the tier's: a pinned shard
// was "moved" every round and rejected, and an operator's rules were broken.
func TestPackKeepsConstraints(t *testing.T) {
	t.Run("shard pin", func(t *testing.T) {
		v := view(2)
		v.Shards[1].Constraints.Pinned = "h1" // s1 is on h1 and must stay there
		if plan := verifyPlan(t, v); len(plan.Moves) != 0 {
			t.Errorf("moves %+v: s0 on h0 and s1 pinned on h1 are packed as they can be", plan.Moves)
		}
	})
	t.Run("shard allowed and anti-affinity", func(t *testing.T) {
		v := view(3)
		for i := range v.Shards {
			v.Shards[i].Constraints.AntiAffinity = "g"
		}
		v.Shards[2].Constraints.Allowed = []interfaces.ChildID{"h2", "h3"}
		plan := verifyPlan(t, v)
		if len(plan.Moves) != 0 {
			t.Errorf("moves %+v: one shard of the group per host already", plan.Moves)
		}
	})
	t.Run("tier rules", func(t *testing.T) {
		v := view(6) // pack alone puts s0-s2 on h0, s3-s5 on h1
		v.Constraints = []interfaces.Constraint{
			{Kind: interfaces.ConstraintPin, Shards: []interfaces.ShardID{"s0"}, Children: []interfaces.ChildID{"h3"}, Reason: "operator pin"},
			{Kind: interfaces.ConstraintCapacity, Children: []interfaces.ChildID{"h1"}, Limit: interfaces.Load{CPU: 3}, Reason: "h1 usable cpu 3"},
			{Kind: interfaces.ConstraintAllowed, Shards: []interfaces.ShardID{"s5"}, Children: []interfaces.ChildID{"h2", "h3"}},
			{Kind: interfaces.ConstraintAntiAffinity, Shards: []interfaces.ShardID{"s1", "s2"}},
		}
		plan := verifyPlan(t, v)
		owner := map[interfaces.ShardID]interfaces.ChildID{}
		for _, a := range v.Assignments {
			owner[a.Shard] = a.Child
		}
		for _, m := range plan.Moves {
			owner[m.Shard] = m.To
		}
		if owner["s0"] != "h3" || owner["s1"] == owner["s2"] || (owner["s5"] != "h2" && owner["s5"] != "h3") {
			t.Errorf("placement %v breaks the tier's rules", owner)
		}
		n := 0
		for _, c := range owner {
			if c == "h1" {
				n++
			}
		}
		if n > 1 {
			t.Errorf("%d shards of cpu 3 on h1, whose usable cpu is 3", n)
		}
	})
}
