package packtier

import (
	"context"
	"fmt"
	"sort"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/tiers"
)

// Name is the name the policy is registered under; a tier selects it with
// "policy: {name: pack}".
const Name = "pack"

// Pack is the policy. It has no configuration.
type Pack struct{}

var _ interfaces.Policy = Pack{}

func init() {
	// One call makes the policy selectable by name in every tier's config.
	tiers.MustRegister(Name, func(cfg interfaces.PolicyConfig) (interfaces.Policy, error) {
		if len(cfg) > 0 {
			return nil, fmt.Errorf("policy %s takes no configuration: %w", Name, interfaces.ErrInvalid)
		}
		return Pack{}, nil
	})
}

// Name returns "pack".
func (Pack) Name() string { return Name }

// Plan packs every shard that is not in flight onto the first active children
// that have room, largest shards first. It reads only the view: no clock, no
// global randomness, no I/O.
func (Pack) Plan(_ context.Context, v *interfaces.View) (interfaces.Plan, error) {
	plan := interfaces.Plan{Tier: v.Tier, Status: interfaces.StatusOK}
	owner := map[interfaces.ShardID]interfaces.Assignment{}
	for _, a := range v.Assignments {
		owner[a.Shard] = a
	}
	moving := map[interfaces.ShardID]bool{}
	used := map[interfaces.ChildID]interfaces.Load{}
	for _, m := range v.InFlight { // in-flight moves count as done
		moving[m.Shard] = true
	}
	shards := make([]interfaces.Shard, 0, len(v.Shards))
	for _, s := range v.Shards {
		if moving[s.ID] {
			a := owner[s.ID]
			used[a.Child] = used[a.Child].Add(s.Load)
			continue
		}
		shards = append(shards, s)
	}
	sort.SliceStable(shards, func(i, j int) bool { return shards[i].Load.CPU > shards[j].Load.CPU })
	for _, s := range shards {
		from := owner[s.ID]
		placed := false
		excluded := map[interfaces.ChildID]string{}
		for _, c := range v.Children {
			if c.State != interfaces.ChildActive {
				excluded[c.ID] = "child is " + c.State.String()
				continue
			}
			if !used[c.ID].Add(s.Load).Fits(c.Capacity) {
				excluded[c.ID] = "capacity"
				continue
			}
			used[c.ID] = used[c.ID].Add(s.Load)
			placed = true
			if c.ID != from.Child {
				plan.Moves = append(plan.Moves, interfaces.Move{
					Shard: s.ID, From: from.Child, To: c.ID, Epoch: from.Epoch,
					Reason: fmt.Sprintf("pack: first child with room for %s", s.ID), Goal: "pack",
				})
			}
			break
		}
		if !placed {
			plan.Status = interfaces.StatusInfeasible
			plan.Infeasible = append(plan.Infeasible, interfaces.Infeasible{Shard: s.ID, Excluded: excluded})
		}
	}
	plan.Moves = order(v, plan.Moves)
	return plan, nil
}

// order puts the moves in an order the tier can carry out one by one: the tier
// verifies (and commits) moves in plan order, so a move into a child must come
// after the moves that make room on it. A move whose target never gets room
// within this plan stays at the end; the tier rejects it with the reason and a
// later round tries again.
func order(v *interfaces.View, moves []interfaces.Move) []interfaces.Move {
	load := map[interfaces.ShardID]interfaces.Load{}
	for _, s := range v.Shards {
		load[s.ID] = s.Load
	}
	capacity := map[interfaces.ChildID]interfaces.Load{}
	for _, c := range v.Children {
		capacity[c.ID] = c.Capacity
	}
	used := map[interfaces.ChildID]interfaces.Load{}
	for _, a := range v.Assignments {
		used[a.Child] = used[a.Child].Add(load[a.Shard])
	}
	out := make([]interfaces.Move, 0, len(moves))
	left := append([]interfaces.Move(nil), moves...)
	for len(left) > 0 {
		progressed := false
		rest := left[:0]
		for _, m := range left {
			if used[m.To].Add(load[m.Shard]).Fits(capacity[m.To]) {
				used[m.To] = used[m.To].Add(load[m.Shard])
				if m.From != "" {
					used[m.From] = used[m.From].Sub(load[m.Shard])
				}
				out = append(out, m)
				progressed = true
				continue
			}
			rest = append(rest, m)
		}
		left = rest
		if !progressed {
			return append(out, left...)
		}
	}
	return out
}
