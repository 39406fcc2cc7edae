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
	verdict, err := balancer.VerifyView(v, plan.Moves)
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
