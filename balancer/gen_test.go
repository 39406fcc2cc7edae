package balancer

import (
	"fmt"

	"github.com/strata-sched/strata/interfaces"
	"pgregory.net/rapid"
)

// genSpec bounds a generated problem.
type genSpec struct {
	maxShards, maxChildren int
	constraints            bool // pins, allowed lists, groups, locks, drains, budgets
}

// genProblem draws a small random problem, possibly with every kind of
// constraint, and a start assignment that may break some of them.
func genProblem(t *rapid.T, spec genSpec) *Problem {
	R := rapid.IntRange(1, 2).Draw(t, "R")
	M := rapid.IntRange(1, spec.maxChildren).Draw(t, "M")
	N := rapid.IntRange(0, spec.maxShards).Draw(t, "N")
	p := &Problem{
		Resources:  []interfaces.Resource{interfaces.CPU, interfaces.Mem}[:R],
		ChildIDs:   make([]interfaces.ChildID, M),
		Capacity:   make([]float64, M*R),
		ShardIDs:   make([]interfaces.ShardID, N),
		Load:       make([]float64, N*R),
		StateBytes: make([]int64, N),
		Epoch:      make([]interfaces.Epoch, N),
		Current:    make([]int32, N),
	}
	for c := 0; c < M; c++ {
		p.ChildIDs[c] = interfaces.ChildID(fmt.Sprintf("c%d", c))
		for r := 0; r < R; r++ {
			p.Capacity[c*R+r] = float64(rapid.IntRange(4, 20).Draw(t, "cap"))
		}
	}
	for s := 0; s < N; s++ {
		p.ShardIDs[s] = interfaces.ShardID(fmt.Sprintf("s%d", s))
		for r := 0; r < R; r++ {
			p.Load[s*R+r] = float64(rapid.IntRange(0, 40).Draw(t, "load")) / 8
		}
		p.StateBytes[s] = int64(rapid.IntRange(0, 100).Draw(t, "bytes"))
		p.Epoch[s] = interfaces.Epoch(rapid.IntRange(1, 5).Draw(t, "epoch"))
		p.Current[s] = int32(rapid.IntRange(-1, M-1).Draw(t, "current"))
	}
	if !spec.constraints {
		return p
	}
	if rapid.Bool().Draw(t, "headroom") {
		p.Headroom = 0.1
	}
	if M > 1 && rapid.Bool().Draw(t, "drain") {
		p.ChildState = make([]interfaces.ChildState, M)
		for c := 1; c < M; c++ { // child 0 stays active
			p.ChildState[c] = interfaces.ChildState(rapid.SampledFrom([]int{0, 0, 0, 1, 2}).Draw(t, "state"))
		}
	}
	if rapid.Bool().Draw(t, "pins") {
		p.Pinned = make([]int32, N)
		for s := range p.Pinned {
			p.Pinned[s] = -1
			if rapid.IntRange(0, 9).Draw(t, "pin?") == 0 {
				p.Pinned[s] = int32(rapid.IntRange(0, M-1).Draw(t, "pin"))
			}
		}
	}
	if rapid.Bool().Draw(t, "allowed") {
		p.Allowed = make([][]int32, N)
		for s := range p.Allowed {
			if rapid.IntRange(0, 4).Draw(t, "allowed?") == 0 {
				list := []int32{}
				for c := 0; c < M; c++ {
					if rapid.Bool().Draw(t, "allow") {
						list = append(list, int32(c))
					}
				}
				if p.Pinned != nil && p.Pinned[s] >= 0 && !containsSorted(list, p.Pinned[s]) {
					list = sortUnique(append(list, p.Pinned[s]))
				}
				p.Allowed[s] = list
			}
		}
	}
	if N > 1 && rapid.Bool().Draw(t, "groups") {
		G := rapid.IntRange(1, 2).Draw(t, "G")
		p.Groups = make([][]int32, N)
		p.GroupLimit = make([]int32, G)
		for g := range p.GroupLimit {
			p.GroupLimit[g] = int32(rapid.IntRange(1, 2).Draw(t, "limit"))
		}
		for s := range p.Groups {
			for g := 0; g < G; g++ {
				if rapid.IntRange(0, 2).Draw(t, "member?") == 0 {
					p.Groups[s] = append(p.Groups[s], int32(g))
				}
			}
		}
	}
	if rapid.Bool().Draw(t, "locks") {
		p.Locked = make([]bool, N)
		for s := range p.Locked {
			p.Locked[s] = p.Current[s] >= 0 && rapid.IntRange(0, 5).Draw(t, "lock?") == 0
		}
	}
	if rapid.Bool().Draw(t, "budget") {
		p.MaxMoves = rapid.IntRange(0, 4).Draw(t, "max_moves")
		p.MaxBytes = int64(rapid.IntRange(0, 300).Draw(t, "max_bytes"))
	}
	if rapid.Bool().Draw(t, "locality") {
		p.ShardDomain = make([]int32, N)
		p.ChildDomain = make([]int32, M)
		for s := range p.ShardDomain {
			p.ShardDomain[s] = int32(rapid.IntRange(-1, 1).Draw(t, "sdom"))
		}
		for c := range p.ChildDomain {
			p.ChildDomain[c] = int32(rapid.IntRange(0, 1).Draw(t, "cdom"))
		}
	}
	return p
}

// genGoals draws a random goal set: every kind at most once, random priorities
// and weights.
func genGoals(t *rapid.T) []Goal {
	if rapid.Bool().Draw(t, "default goals") {
		return nil
	}
	var gs []Goal
	for _, k := range goalKinds {
		if rapid.IntRange(0, 2).Draw(t, "use "+k) == 0 {
			continue
		}
		gs = append(gs, Goal{
			Kind:      k,
			Priority:  rapid.IntRange(0, 3).Draw(t, "prio"),
			Weight:    float64(rapid.IntRange(1, 4).Draw(t, "weight")),
			Threshold: float64(rapid.IntRange(1, 10).Draw(t, "threshold")) / 10,
		})
	}
	if len(gs) == 0 {
		gs = []Goal{{Kind: GoalBalanceMinMax, Priority: 1, Weight: 1}}
	}
	return gs
}

// genLatency draws a latency model for p: per-child service times and, for
// some shards, latency SLOs (the slo goal's inputs), or none.
func genLatency(t *rapid.T, p *Problem) LatencyModel {
	if !rapid.Bool().Draw(t, "latency model") {
		return LatencyModel{}
	}
	m := LatencyModel{ServiceTime: make([]float64, p.NumChildren()), SLO: make([]float64, p.NumShards())}
	for c := range m.ServiceTime {
		m.ServiceTime[c] = float64(rapid.IntRange(1, 20).Draw(t, "service ms")) / 1000
	}
	for s := range m.SLO {
		if rapid.Bool().Draw(t, "has slo") {
			m.SLO[s] = float64(rapid.IntRange(5, 500).Draw(t, "slo ms")) / 1000
		}
	}
	return m
}
