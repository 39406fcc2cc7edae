package sim

import (
	"context"
	"slices"
	"sort"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/tiers"
)

// Test-only policies, registered into tiers.Default so scenarios can name them
// without depending on the balancer's solvers:
//
//   - simtest-greedy places unplaced shards and evacuates failed or draining
//     children largest-first onto the child with the lowest dominant utilization
//     that fits, then makes up to 8 hot→cold moves that lower the larger of the
//     two children's dominant utilization.
//   - simtest-placeonly places and evacuates like simtest-greedy but never
//     rebalances.
func init() {
	tiers.MustRegister("simtest-greedy", func(interfaces.PolicyConfig) (interfaces.Policy, error) {
		return testGreedy{name: "simtest-greedy", rebalance: 8}, nil
	})
	tiers.MustRegister("simtest-placeonly", func(interfaces.PolicyConfig) (interfaces.Policy, error) {
		return testGreedy{name: "simtest-placeonly"}, nil
	})
}

type testGreedy struct {
	name      string
	rebalance int
}

func (p testGreedy) Name() string { return p.name }

func (p testGreedy) Plan(_ context.Context, v *interfaces.View) (interfaces.Plan, error) {
	nc := len(v.Children)
	load := make([][nres]float64, nc)
	cidx := map[interfaces.ChildID]int{}
	for i, c := range v.Children {
		cidx[c.ID] = i
	}
	owner := map[interfaces.ShardID]int{}
	epoch := map[interfaces.ShardID]interfaces.Epoch{}
	for _, a := range v.Assignments {
		owner[a.Shard] = cidx[a.Child]
		epoch[a.Shard] = a.Epoch
	}
	busy := map[interfaces.ShardID]bool{}
	for _, m := range v.InFlight {
		owner[m.Shard] = cidx[m.To]
		busy[m.Shard] = true
	}
	for _, s := range v.Shards {
		if c, ok := owner[s.ID]; ok {
			l := vec(s.Load)
			for r := range l {
				load[c][r] += l[r]
			}
		}
	}
	dom := func(c int, extra [nres]float64) float64 {
		best := 0.0
		cp := vec(v.Children[c].Capacity)
		for r := range cp {
			if cp[r] > 0 {
				if u := (load[c][r] + extra[r]) / cp[r]; u > best {
					best = u
				}
			}
		}
		return best
	}
	fits := func(c int, s interfaces.Shard) bool {
		ch := v.Children[c]
		if ch.State != interfaces.ChildActive {
			return false
		}
		if len(s.Constraints.Allowed) > 0 && !slices.Contains(s.Constraints.Allowed, ch.ID) {
			return false
		}
		if s.Constraints.Pinned != "" && s.Constraints.Pinned != ch.ID {
			return false
		}
		l, cp := vec(s.Load), vec(ch.Capacity)
		for r := range l {
			if l[r] > 0 && load[c][r]+l[r] > cp[r] {
				return false
			}
		}
		return true
	}
	var plan interfaces.Plan
	plan.Tier = v.Tier
	move := func(s interfaces.Shard, to int) {
		from := interfaces.ChildID("")
		if c, ok := owner[s.ID]; ok {
			from = v.Children[c].ID
			l := vec(s.Load)
			for r := range l {
				load[c][r] -= l[r]
			}
		}
		l := vec(s.Load)
		for r := range l {
			load[to][r] += l[r]
		}
		owner[s.ID] = to
		busy[s.ID] = true
		plan.Moves = append(plan.Moves, interfaces.Move{Shard: s.ID, From: from, To: v.Children[to].ID, Epoch: epoch[s.ID], Goal: "test", Reason: "test policy"})
	}
	// Emergency: unplaced or on a child that is not active.
	var todo []interfaces.Shard
	for _, s := range v.Shards {
		c, ok := owner[s.ID]
		if busy[s.ID] {
			continue
		}
		if !ok || v.Children[c].State != interfaces.ChildActive {
			todo = append(todo, s)
		}
	}
	size := func(s interfaces.Shard) float64 { l := vec(s.Load); return l[0] + l[2]*1e-9 + l[1]*1e-12 }
	sort.SliceStable(todo, func(a, b int) bool { return size(todo[a]) > size(todo[b]) })
	for _, s := range todo {
		best, bu := -1, 0.0
		for c := 0; c < nc; c++ {
			if !fits(c, s) {
				continue
			}
			if u := dom(c, vec(s.Load)); best < 0 || u < bu {
				best, bu = c, u
			}
		}
		if best >= 0 {
			move(s, best)
		}
	}
	// Rebalance: hot → cold.
	for k := 0; k < p.rebalance; k++ {
		hot, cold := -1, -1
		for c := 0; c < nc; c++ {
			if v.Children[c].State != interfaces.ChildActive {
				continue
			}
			if hot < 0 || dom(c, [nres]float64{}) > dom(hot, [nres]float64{}) {
				hot = c
			}
			if cold < 0 || dom(c, [nres]float64{}) < dom(cold, [nres]float64{}) {
				cold = c
			}
		}
		if hot < 0 || hot == cold {
			break
		}
		before := dom(hot, [nres]float64{})
		var bestS *interfaces.Shard
		bestAfter := before
		for i := range v.Shards {
			s := v.Shards[i]
			if owner[s.ID] != hot || busy[s.ID] || !fits(cold, s) {
				continue
			}
			l := vec(s.Load)
			var neg [nres]float64
			for r := range l {
				neg[r] = -l[r]
			}
			after := max(dom(hot, neg), dom(cold, l))
			if after < bestAfter-1e-9 {
				bestS, bestAfter = &v.Shards[i], after
			}
		}
		if bestS == nil {
			break
		}
		move(*bestS, cold)
	}
	return plan, nil
}
