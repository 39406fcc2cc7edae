package control_test

import (
	"context"
	"fmt"
	"time"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/tiers"
	"github.com/strata-sched/strata/tiers/control"
)

// Example shows one tier leader's loop driving a registered policy: each round
// Step → Apply → Plan → Admit → commit → Observe.
func Example() {
	ctl, err := control.New(control.DefaultConfig())
	if err != nil {
		panic(err)
	}
	policy, err := tiers.New("local", nil)
	if err != nil {
		panic(err)
	}
	v := &interfaces.View{Tier: "region", Instance: "eu-1"}
	for c := 0; c < 3; c++ {
		v.Children = append(v.Children, interfaces.Child{ID: interfaces.ChildID(fmt.Sprintf("h%d", c)), Tier: "host", Capacity: interfaces.Load{CPU: 8}})
	}
	for i := 0; i < 9; i++ { // every shard on h0
		id := interfaces.ShardID(fmt.Sprintf("s%d", i))
		v.Shards = append(v.Shards, interfaces.Shard{ID: id, Job: "j", Load: interfaces.Load{CPU: 0.5}})
		v.Assignments = append(v.Assignments, interfaces.Assignment{Shard: id, Child: "h0", Epoch: 1})
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for round := 0; round < 4; round++ {
		now = now.Add(time.Second)
		d, err := ctl.Step(control.Input{Now: now, View: v})
		if err != nil {
			panic(err)
		}
		var committed []interfaces.Move
		var solveErr error
		planned := 0
		if d.Solve() {
			view := d.Apply(v)
			plan, err := policy.Plan(context.Background(), view)
			if err != nil {
				solveErr = err // keep the last good assignment
			} else {
				planned = len(plan.Moves)
				committed, _ = d.Admit(view, plan)
				for _, m := range committed { // "commit": land the move
					for i := range v.Assignments {
						if v.Assignments[i].Shard == m.Shard {
							v.Assignments[i].Child, v.Assignments[i].Epoch = m.To, v.Assignments[i].Epoch+1
						}
					}
				}
			}
		}
		if err := ctl.Observe(control.RoundResult{Round: d.Round, SolveErr: solveErr, Planned: planned, Applied: committed}); err != nil {
			panic(err)
		}
		fmt.Printf("round %d: %s, budget %d, %d moves\n", d.Round, d.Mode, d.MaxMoves, len(committed))
	}
	// Output:
	// round 1: periodic, budget 8, 6 moves
	// round 2: hold, budget 0, 0 moves
	// round 3: hold, budget 0, 0 moves
	// round 4: hold, budget 0, 0 moves
}
