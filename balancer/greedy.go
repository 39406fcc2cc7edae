package balancer

import (
	"github.com/strata-sched/strata/interfaces"
)

// SolverGreedy is the name of the greedy solver.
const SolverGreedy = "greedy"

func init() { RegisterSolver(SolverGreedy, func() Solver { return greedySolver{} }) }

// greedySolver is the baseline: largest shard first onto the least-utilized
// feasible child.
type greedySolver struct{}

var _ Solver = greedySolver{}

func (greedySolver) Name() string { return SolverGreedy }

// Solve places every shard from scratch, largest first (by shardSize: the
// largest share of a mean child's capacity at the LB the shard fills), each
// onto the feasible child with the lowest hotness (max over resources of
// utilization/LB); in-flight shards stay where they are.
// When the problem has a move budget, or the from-scratch placement would leave a
// shard unplaced that the current assignment places, it instead starts from the
// current assignment and applies the shards' forced moves and then the
// from-scratch destinations, largest shard first, as long as each stays feasible
// (budget included). It never moves a shard onto a child that breaks a hard
// constraint.
func (greedySolver) Solve(p *Problem, o Options) (Result, error) {
	goals, err := prepare(p, &o)
	if err != nil {
		return Result{}, err
	}
	clk := newClock(&o)
	N := p.NumShards()

	// Phase 1: from scratch.
	init := make([]int32, N)
	var order []int
	for s := range init {
		init[s] = -1
		if p.IsLocked(s) {
			init[s] = p.Current[s]
		} else {
			order = append(order, s)
		}
	}
	st := newState(p, goals, o.Latency, init)
	st.noBudget = true
	pl := newPlacer(st)
	sortBySize(order, pl.shardSize)
	var ch change
	lost := false
	for _, s := range order {
		dst := -1
		pl.coldFirst(func(c int) bool {
			if pl.cold.key[c] == negInf {
				return false
			}
			if pl.feasibleMove(&ch, s, c) {
				dst = c
				return false
			}
			return true
		})
		if dst >= 0 {
			pl.move(s, int32(dst))
		} else if p.Current[s] >= 0 {
			lost = true
		}
	}
	scratch := st.assign
	var infeasible []interfaces.Infeasible
	final := scratch
	if lost || p.MaxMoves > 0 || p.MaxBytes > 0 {
		// Phase 2: merge into the current assignment.
		st2 := newState(p, goals, o.Latency, p.Current)
		pl2 := newPlacer(st2)
		forced := pl2.forcedShards()
		isForced := make([]bool, N)
		for _, s := range forced {
			isForced[s] = true
			if !pl2.stillForced(s) {
				continue
			}
			if d := scratch[s]; d >= 0 && pl2.feasibleMove(&ch, s, int(d)) {
				pl2.move(s, d)
				continue
			}
			if d := pl2.bestDestination(s, 32); d >= 0 {
				pl2.move(s, int32(d))
				continue
			}
			inf, _ := st2.explain(s)
			infeasible = append(infeasible, inf)
		}
		for _, s := range order {
			if isForced[s] {
				continue
			}
			if d := scratch[s]; d >= 0 && d != st2.assign[s] && pl2.feasibleMove(&ch, s, int(d)) {
				pl2.move(s, d)
			}
		}
		// The later moves may have made room where a forced shard was:
		// explain only those still breaking a constraint.
		kept := infeasible[:0]
		for _, inf := range infeasible {
			if s, ok := shardIndex(p, inf.Shard); ok && pl2.stillForced(s) {
				kept = append(kept, inf)
			}
		}
		infeasible = kept
		final = st2.assign
	} else {
		for s, c := range final {
			if c < 0 {
				inf, _ := st.explain(s)
				infeasible = append(infeasible, inf)
			}
		}
	}
	return Finish(p, o, SolverGreedy, final, clk.started, false, infeasible)
}

// shardIndex finds shard id in p (a linear scan: for the few explained
// shards).
func shardIndex(p *Problem, id interfaces.ShardID) (int, bool) {
	for s, x := range p.ShardIDs {
		if x == id {
			return s, true
		}
	}
	return -1, false
}
