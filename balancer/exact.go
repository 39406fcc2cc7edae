package balancer

import (
	"fmt"

	"github.com/strata-sched/strata/interfaces"
)

// SolverExact is the name of the exact solver.
const SolverExact = "exact"

// Size limits of the exact solver: beyond them it returns an error instead of
// running out of memory or time (use "local").
const (
	ExactMaxShards   = 1000
	ExactMaxChildren = 100
)

func init() { RegisterSolver(SolverExact, func() Solver { return exactSolver{} }) }

// exactSolver is branch-and-bound for small instances (tens of shards, a few
// children).
type exactSolver struct{}

var _ Solver = exactSolver{}

func (exactSolver) Name() string { return SolverExact }

// Solve finds an assignment that minimizes, lexicographically,
//
//  1. the bottleneck T = max over children c and resources r of u_cr (the load of
//     c over its capacity; resources with capacity 0 take no load);
//  2. the number of moves (shards whose child changes, first placements
//     included, as the move budget counts them);
//  3. the state bytes those moves carry,
//
// over every assignment that meets all hard constraints (capacity within
// headroom, pins, allowed children, drained/failed children empty, anti-
// affinity limits, the move budget; in-flight shards stay where their move takes
// them). It does not optimize the other soft goals of o: Result.Objective still
// reports all of them, evaluated on the assignment found.
//
// The search is a depth-first branch-and-bound over shards (forced ones first,
// then largest first), children tried least-loaded first with the current child
// preferred; it prunes with the best of several lower bounds on T (per-resource
// water filling, the cost of the next shards, the wasted-space argument, and the
// Lagrangian dual of the LP relaxation re-solved at every node), breaks the
// symmetry of identical empty children and of identical shards, and skips states
// already explored. The LP relaxation is also solved once at the root with
// gonum's simplex (optimize/convex/lp) including capacity, anti-affinity and
// budget rows.
//
// Result.Optimal is true when the search finished: the assignment is a proven
// optimum of the objective above. When o.NodeLimit (default 2 000 000 nodes),
// o.TimeBudget or o.Deadline ends the search first, the result is the best
// assignment found, with Status Partial and Optimal false. Iterations is the
// number of search nodes. When no assignment meets every hard constraint (or none
// was found before a limit), the solver falls back to local search, which
// repairs what it can and explains in Result.Infeasible the shards it cannot
// place; Optimal is then false.
//
// Problems above ExactMaxShards shards or ExactMaxChildren children are refused
// with an error wrapping interfaces.ErrInvalid.
func (exactSolver) Solve(p *Problem, o Options) (Result, error) {
	if _, err := prepare(p, &o); err != nil {
		return Result{}, err
	}
	if p.NumShards() > ExactMaxShards {
		return Result{}, invalid("shards", fmt.Sprintf("the exact solver takes at most %d shards (use %q)", ExactMaxShards, SolverLocal), p.NumShards())
	}
	if p.NumChildren() > ExactMaxChildren {
		return Result{}, invalid("children", fmt.Sprintf("the exact solver takes at most %d children (use %q)", ExactMaxChildren, SolverLocal), p.NumChildren())
	}
	clk := newClock(&o)
	in, shards := exactFromProblem(p)
	stop := func() bool { return false }
	if o.Deadline != nil || o.TimeBudget > 0 {
		stop = clk.expired
	}
	out, err := solveExact(in, exactOptions{MaxNodes: int64(o.NodeLimit), Stop: stop})
	if err != nil {
		return Result{}, err
	}
	if out.Status == exactOptimal || out.Status == exactNotProven {
		assign := append([]int32(nil), p.Current...)
		for a, s := range shards {
			assign[s] = int32(out.Assign[a])
		}
		res, err := Finish(p, o, SolverExact, assign, clk.started, out.Status == exactNotProven, nil)
		if err != nil {
			return Result{}, err
		}
		res.Optimal = out.Status == exactOptimal
		res.Iterations = int(out.Nodes)
		return res, nil
	}
	// No complete feasible assignment (proven, or none found in the limits):
	// local search repairs what it can and explains the rest.
	res, err := Solve(SolverLocal, p, o)
	if err != nil {
		return Result{}, err
	}
	res.Solver = SolverExact
	res.Optimal = false
	res.Iterations = int(out.Nodes)
	// Every child gets a reason: one that would take the shard on its own is
	// excluded by the constraints acting together.
	why := ConstraintUnplaced + ": no complete assignment meets every hard constraint together (capacity, anti-affinity, move budget); proven by the exact search"
	if out.Status == exactUnknown {
		why = ConstraintUnplaced + ": the exact search found no complete assignment meeting every hard constraint within its limits"
	}
	if out.Status == exactInfeasible && len(res.Infeasible) > 0 {
		// Proven by the exhaustive search, whatever the bounds say.
		res.Status = interfaces.StatusInfeasible
		if res.Proof == "" {
			res.Proof = "the exact search proved that no assignment meets every hard constraint"
		}
	}
	for _, inf := range res.Infeasible {
		if inf.Excluded == nil {
			continue
		}
		for _, id := range p.ChildIDs {
			if _, ok := inf.Excluded[id]; !ok {
				inf.Excluded[id] = why
			}
		}
	}
	return res, nil
}

// exactFromProblem builds the exact core's instance from a valid Problem. The
// shards with an in-flight move (Locked) are not searched: their load and group
// membership become the base of their child. shards maps the instance's shard
// indexes to the problem's.
func exactFromProblem(p *Problem) (*exactInstance, []int) {
	R, M, N := p.NumResources(), p.NumChildren(), p.NumShards()
	G := len(p.GroupLimit)
	in := &exactInstance{M: M, R: R, MaxMoves: -1, MaxBytes: -1, CountPlacements: true}
	if p.MaxMoves > 0 {
		in.MaxMoves = p.MaxMoves
	}
	if p.MaxBytes > 0 {
		in.MaxBytes = p.MaxBytes
	}
	in.Cap = make([][]float64, M)
	in.Limit = make([][]float64, M)
	in.Base = make([][]float64, M)
	for c := 0; c < M; c++ {
		in.Cap[c] = append([]float64(nil), p.Capacity[c*R:(c+1)*R]...)
		in.Limit[c] = make([]float64, R)
		for r := 0; r < R; r++ {
			in.Limit[c][r] = p.Limit(c, r)
		}
		in.Base[c] = make([]float64, R)
	}
	in.GroupMax = make([]int, G)
	for g, k := range p.GroupLimit {
		in.GroupMax[g] = int(k)
	}
	if G > 0 {
		in.BaseGroups = make([][]int, G)
		for g := range in.BaseGroups {
			in.BaseGroups[g] = make([]int, M)
		}
		in.Groups = [][]int{}
	}
	var shards []int
	for s := 0; s < N; s++ {
		if p.IsLocked(s) {
			c := int(p.Current[s])
			for r := 0; r < R; r++ {
				in.Base[c][r] += p.Load[s*R+r]
			}
			if p.Groups != nil {
				for _, g := range p.Groups[s] {
					in.BaseGroups[g][c]++
				}
			}
			continue
		}
		shards = append(shards, s)
		in.Load = append(in.Load, append([]float64(nil), p.Load[s*R:(s+1)*R]...))
		allowed := make([]bool, M)
		for c := 0; c < M; c++ {
			allowed[c] = p.AllowedOn(s, c) && !p.Drained(c)
		}
		in.Allowed = append(in.Allowed, allowed)
		in.Current = append(in.Current, int(p.Current[s]))
		in.Bytes = append(in.Bytes, p.Bytes(s))
		if G > 0 {
			var gs []int
			if p.Groups != nil {
				for _, g := range p.Groups[s] {
					gs = append(gs, int(g))
				}
			}
			in.Groups = append(in.Groups, gs)
		}
	}
	in.N = len(shards)
	if in.N == 0 {
		in.Load, in.Allowed, in.Current, in.Bytes = [][]float64{}, [][]bool{}, []int{}, []int64{}
		if G > 0 {
			in.Groups = [][]int{}
		}
	}
	return in, shards
}
