package balancer

import "github.com/strata-sched/strata/interfaces"

// SolverFFD is the name of the first-fit-decreasing solver.
const SolverFFD = "ffd"

func init() { RegisterSolver(SolverFFD, func() Solver { return ffdSolver{} }) }

// ffdSolver is first-fit decreasing, the packing baseline a Kubernetes-style
// scheduler amounts to: it places everything it can and balances nothing.
type ffdSolver struct{}

var _ Solver = ffdSolver{}

func (ffdSolver) Name() string { return SolverFFD }

// Solve keeps every shard that breaks no hard constraint where it is, and
// places the others largest first (ffdSize: the largest share of the active
// capacity of a resource) on the first child in index order where it fits
// (capacity, pin, allowed, anti-affinity, drain, move budget).
func (ffdSolver) Solve(p *Problem, o Options) (Result, error) {
	goals, err := prepare(p, &o)
	if err != nil {
		return Result{}, err
	}
	clk := newClock(&o)
	assign := firstFitDecreasing(p, goals, o.Latency, p.Current)
	st := newState(p, goals, o.Latency, assign)
	pl := newPlacer(st)
	var infeasible []interfaces.Infeasible
	for s := range assign {
		if !p.IsLocked(s) && pl.stillForced(s) {
			inf, _ := st.explain(s)
			infeasible = append(infeasible, inf)
		}
	}
	return Finish(p, o, SolverFFD, assign, clk.started, false, infeasible)
}

// ffdSize is shard s's first-fit-decreasing size: max over r of its load over
// the active capacity of r (sumCap).
func ffdSize(p *Problem, sumCap []float64, s int) float64 {
	R := p.NumResources()
	v := 0.0
	for r := 0; r < R; r++ {
		if sumCap[r] > 0 {
			v = max(v, p.Load[s*R+r]/sumCap[r])
		}
	}
	return v
}

// firstFitDecreasing starts from start, takes the shards that break a hard
// constraint there off their children, and places them largest first
// (ffdSize) on the first child in index order where each fits. It returns the
// new assignment (shards that fit nowhere are -1, or stay where they were
// when that is where they must stay: a locked shard).
func firstFitDecreasing(p *Problem, goals []Goal, lm LatencyModel, start []int32) []int32 {
	st := newState(p, goals, lm, start)
	pl := newPlacer(st)
	forced := pl.forcedShards()
	for _, s := range forced {
		pl.move(s, -1)
	}
	_, sumCap := totals(p)
	sortBySize(forced, func(s int) float64 { return ffdSize(p, sumCap, s) })
	var ch change
	for _, s := range forced {
		for c := 0; c < st.M; c++ {
			if pl.feasibleMove(&ch, s, c) {
				pl.move(s, int32(c))
				break
			}
		}
	}
	return st.assign
}
