package tiers

import (
	"context"
	"fmt"
	"testing"

	"github.com/strata-sched/strata/interfaces"
)

func TestSpreadSpreadsEachJob(t *testing.T) {
	v := &interfaces.View{Tier: "region", Instance: "r", Seed: 3}
	for i := 0; i < 3; i++ {
		v.Children = append(v.Children, interfaces.Child{ID: interfaces.ChildID(fmt.Sprintf("rack-%d", i)), Tier: "rack", Capacity: interfaces.Load{CPU: 100}})
	}
	// Job "big" has heavy and light shards; a pure load balancer could stack its
	// shards on one rack. Job "small" has 2 shards.
	for i := 0; i < 9; i++ {
		load := 1.0
		if i < 3 {
			load = 10
		}
		v.Shards = append(v.Shards, interfaces.Shard{ID: interfaces.ShardID(fmt.Sprintf("big/%d", i)), Job: "big", Load: interfaces.Load{CPU: load}})
	}
	for i := 0; i < 2; i++ {
		v.Shards = append(v.Shards, interfaces.Shard{ID: interfaces.ShardID(fmt.Sprintf("small/%d", i)), Job: "small", Load: interfaces.Load{CPU: 20}})
	}
	p, err := New(SpreadName, nil)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := p.Plan(context.Background(), v)
	if err != nil {
		t.Fatal(err)
	}
	per := map[string]map[interfaces.ChildID]int{}
	placed := 0
	for _, m := range plan.Moves {
		job := "big"
		if m.Shard[:5] == "small" {
			job = "small"
		}
		if per[job] == nil {
			per[job] = map[interfaces.ChildID]int{}
		}
		per[job][m.To]++
		placed++
	}
	if placed != len(v.Shards) {
		t.Fatalf("%d of %d shards placed: %+v", placed, len(v.Shards), plan)
	}
	for c, n := range per["big"] {
		if n > 3 {
			t.Errorf("job big has %d shards on %s, want ≤ 3", n, c)
		}
	}
	for c, n := range per["small"] {
		if n > 1 {
			t.Errorf("job small has %d shards on %s, want ≤ 1", n, c)
		}
	}
	if len(v.Constraints) != 0 {
		t.Error("Plan modified the caller's view")
	}
	if _, err := New(SpreadName, interfaces.PolicyConfig{"slack": "-1"}); err == nil {
		t.Error("negative slack accepted")
	}
}
