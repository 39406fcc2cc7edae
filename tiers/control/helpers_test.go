package control

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// tier builds a view of n children with capacity capCPU each and one shard per
// entry of loads, placed on owner[i] (child index, -1 unplaced).
func tier(n int, capCPU float64, loads []float64, owner []int) *interfaces.View {
	v := &interfaces.View{Tier: "region", Instance: "eu-1", Reports: map[interfaces.ChildID]interfaces.Report{}}
	for c := 0; c < n; c++ {
		v.Children = append(v.Children, interfaces.Child{ID: childID(c), Tier: interfaces.TierHost, Capacity: interfaces.Load{CPU: capCPU}})
	}
	for i, l := range loads {
		id := shardID(i)
		v.Shards = append(v.Shards, interfaces.Shard{ID: id, Job: "job", Load: interfaces.Load{CPU: l}, StateBytes: 100})
		if owner[i] >= 0 {
			v.Assignments = append(v.Assignments, interfaces.Assignment{Shard: id, Child: childID(owner[i]), Epoch: 1})
		}
	}
	return v
}

func childID(c int) interfaces.ChildID { return interfaces.ChildID(fmt.Sprintf("h%02d", c)) }
func shardID(i int) interfaces.ShardID { return interfaces.ShardID(fmt.Sprintf("s%03d", i)) }

func mustNew(t testing.TB, cfg Config) *Controller {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// owners returns each shard's child from the view's assignments.
func owners(v *interfaces.View) map[interfaces.ShardID]interfaces.ChildID {
	out := map[interfaces.ShardID]interfaces.ChildID{}
	for _, a := range v.Assignments {
		out[a.Shard] = a.Child
	}
	return out
}

// applyMoves commits moves into the view's assignments (instant landing).
func applyMoves(v *interfaces.View, moves []interfaces.Move) {
	idx := map[interfaces.ShardID]int{}
	for i, a := range v.Assignments {
		idx[a.Shard] = i
	}
	for _, m := range moves {
		if i, ok := idx[m.Shard]; ok {
			v.Assignments[i].Child = m.To
			v.Assignments[i].Epoch++
		} else {
			idx[m.Shard] = len(v.Assignments)
			v.Assignments = append(v.Assignments, interfaces.Assignment{Shard: m.Shard, Child: m.To, Epoch: 1})
		}
	}
}

// maxOverLB is the test's own measure of balance on CPU: the busiest active
// child's utilization over max(Σload/Σcap, largest shard / largest capacity).
func maxOverLB(v *interfaces.View) float64 {
	load := map[interfaces.ChildID]float64{}
	shard := map[interfaces.ShardID]float64{}
	maxShard := 0.0
	for _, s := range v.Shards {
		shard[s.ID] = s.Load.CPU
		maxShard = math.Max(maxShard, s.Load.CPU)
	}
	for _, a := range v.Assignments {
		load[a.Child] += shard[a.Shard]
	}
	var sumL, sumC, maxC, maxU float64
	for _, ch := range v.Children {
		if ch.State != interfaces.ChildActive {
			continue
		}
		sumL += load[ch.ID]
		sumC += ch.Capacity.CPU
		maxC = math.Max(maxC, ch.Capacity.CPU)
		maxU = math.Max(maxU, load[ch.ID]/ch.Capacity.CPU)
	}
	return maxU / math.Max(sumL/sumC, maxShard/maxC)
}

// toyPlan is a toy actuator: repeatedly move the shard from the hottest child to
// the coldest one that best evens the pair, while that strictly lowers the
// hottest child's load, up to limit moves, honouring the decision's
// constraints (allowed lists).
func toyPlan(v *interfaces.View, limit int) interfaces.Plan {
	allowed := map[interfaces.ShardID]map[interfaces.ChildID]bool{}
	for _, k := range v.Constraints {
		if k.Kind == interfaces.ConstraintAllowed {
			for _, s := range k.Shards {
				set := map[interfaces.ChildID]bool{}
				for _, c := range k.Children {
					set[c] = true
				}
				allowed[s] = set
			}
		}
	}
	own := owners(v)
	loadOf := map[interfaces.ShardID]float64{}
	for _, s := range v.Shards {
		loadOf[s.ID] = s.Load.CPU
	}
	load := map[interfaces.ChildID]float64{}
	for s, c := range own {
		load[c] += loadOf[s]
	}
	var plan interfaces.Plan
	moved := map[interfaces.ShardID]bool{}
	for len(plan.Moves) < limit {
		var hot, cold interfaces.ChildID
		for _, ch := range v.Children {
			if hot == "" || load[ch.ID] > load[hot] {
				hot = ch.ID
			}
			if cold == "" || load[ch.ID] < load[cold] {
				cold = ch.ID
			}
		}
		best, bestGap := interfaces.ShardID(""), load[hot]-load[cold]
		for _, s := range v.Shards {
			if own[s.ID] != hot || moved[s.ID] || (allowed[s.ID] != nil && !allowed[s.ID][cold]) {
				continue
			}
			if gap := math.Abs((load[hot] - loadOf[s.ID]) - (load[cold] + loadOf[s.ID])); gap < bestGap-1e-9 {
				best, bestGap = s.ID, gap
			}
		}
		if best == "" {
			break
		}
		moved[best] = true
		plan.Moves = append(plan.Moves, interfaces.Move{Shard: best, From: hot, To: cold, Epoch: 1})
		load[hot] -= loadOf[best]
		load[cold] += loadOf[best]
		own[best] = cold
	}
	return plan
}
