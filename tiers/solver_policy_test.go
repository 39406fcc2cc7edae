package tiers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/strata-sched/strata/interfaces"
)

func smallView() *interfaces.View {
	v := &interfaces.View{Tier: interfaces.TierRegion, Instance: "eu-1", Seed: 7}
	for i := 0; i < 3; i++ {
		v.Children = append(v.Children, interfaces.Child{ID: interfaces.ChildID(fmt.Sprintf("h%d", i)), Tier: interfaces.TierHost, Capacity: interfaces.Load{CPU: 10, Mem: 100}})
	}
	for i := 0; i < 12; i++ {
		id := interfaces.ShardID(fmt.Sprintf("s%02d", i))
		v.Shards = append(v.Shards, interfaces.Shard{ID: id, Job: "j", Load: interfaces.Load{CPU: float64(1 + i%3), Mem: 5}})
		// everything starts on h0: overloaded on cpu (24 > 10)
		v.Assignments = append(v.Assignments, interfaces.Assignment{Shard: id, Child: "h0", Epoch: 1})
	}
	return v
}

func TestBuiltinPoliciesPlan(t *testing.T) {
	for _, name := range []string{"greedy", "local", "exact"} {
		t.Run(name, func(t *testing.T) {
			p, err := New(name, nil)
			if err != nil {
				t.Fatal(err)
			}
			v := smallView()
			plan, err := p.Plan(context.Background(), v)
			if err != nil {
				t.Fatal(err)
			}
			if plan.Tier != interfaces.TierRegion || len(plan.Moves) == 0 {
				t.Fatalf("plan for an overloaded child has no moves: %+v", plan)
			}
			// Apply the plan and check no child is over capacity.
			owner := map[interfaces.ShardID]interfaces.ChildID{}
			for _, a := range v.Assignments {
				owner[a.Shard] = a.Child
			}
			for _, m := range plan.Moves {
				if m.Reason == "" || m.From != owner[m.Shard] || m.Epoch != 1 {
					t.Errorf("move %+v: needs a reason, the current owner and epoch", m)
				}
				owner[m.Shard] = m.To
			}
			used := map[interfaces.ChildID]float64{}
			for _, s := range v.Shards {
				used[owner[s.ID]] += s.Load.CPU
			}
			for c, u := range used {
				if u > 10 {
					t.Errorf("child %s over capacity after %s: cpu %v > 10", c, name, u)
				}
			}
		})
	}
}

func TestSolverPolicyConfigErrors(t *testing.T) {
	tests := []struct {
		cfg  interfaces.PolicyConfig
		want string
	}{
		{interfaces.PolicyConfig{"bogus": "1"}, `unknown key "bogus"`},
		{interfaces.PolicyConfig{"headroom": "1.5"}, `key "headroom": must be in [0, 1) (got "1.5")`},
		{interfaces.PolicyConfig{"headroom": "x"}, `key "headroom"`},
		{interfaces.PolicyConfig{"max_iterations": "-3"}, `key "max_iterations": must be ≥ 0`},
		{interfaces.PolicyConfig{"kicks": "-2"}, `key "kicks": must be ≥ -1`},
	}
	for _, tt := range tests {
		_, err := New("local", tt.cfg)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, interfaces.ErrInvalid) {
			t.Errorf("cfg %v: got %v, want an ErrInvalid containing %q", tt.cfg, err, tt.want)
		}
	}
	if _, err := NewSolverPolicy("x", "no-such-solver", nil); !errors.Is(err, interfaces.ErrNotFound) {
		t.Errorf("unknown solver: got %v", err)
	}
}
