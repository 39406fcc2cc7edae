package balancer

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// Result is what a solver returns.
type Result struct {
	// Solver is the name of the solver that produced the result.
	Solver string
	// Status is OK, Infeasible (some shards are left unplaced, and Proof says
	// why no assignment can place them all; see Infeasible) or Partial (the
	// plan is valid but the solve stopped short: a budget ended it, or it left
	// shards unplaced, listed in Infeasible, without a proof that they cannot
	// all be placed).
	Status interfaces.Status
	// Proof says why Status is Infeasible: the bound or exhaustive search
	// that shows some shard cannot be placed.
	Proof string
	// Assignment is the new child index of every shard (-1 = unplaced).
	Assignment []int32
	// Moves is the plan: one move per shard whose child changed, with the reason,
	// the goal or constraint that drove it, and its objective delta.
	Moves []interfaces.Move
	// Infeasible explains the shards that could not be placed (or could not leave
	// a child they must leave): for each child, the constraint that excluded it.
	Infeasible []interfaces.Infeasible
	// Summary gives per-resource quality, moves, bytes moved and solve time.
	Summary interfaces.Summary
	// Start and Objective are the objectives of p.Current and of Assignment.
	Start, Objective Objective
	// Iterations counts the solver's improvement steps (solver-specific).
	Iterations int
	// Optimal is true when the solver proved the assignment optimal (exact).
	Optimal bool
}

// Plan converts the result into the contract type a tier returns.
func (r *Result) Plan(tier string) interfaces.Plan {
	return interfaces.Plan{Tier: tier, Status: r.Status, Moves: r.Moves, Infeasible: r.Infeasible, Summary: r.Summary}
}

// Finish fills a Result for assign: the moves with their reasons and deltas, the
// per-resource summary (max/mean, max/LB, LB, moves, bytes, solve seconds from
// o.Now and startedAt when o.Now is set), the start and final objectives and the
// status: when a shard is unplaced or explained, Infeasible if
// provenUnplaceable proves that some shard must be (Proof says how), else
// Partial; else Partial when partial is true (a budget cut the solve short),
// else OK. infeasible lists the explanations the
// solver produced (see Explain). Every solver, including exact, ends with it so
// results look the same whatever produced them.
func Finish(p *Problem, o Options, solver string, assign []int32, startedAt time.Time, partial bool, infeasible []interfaces.Infeasible) (Result, error) {
	goals, err := prepare(p, &o)
	if err != nil {
		return Result{}, err
	}
	if err := checkAssignment(p, assign); err != nil {
		return Result{}, err
	}
	res := Result{Solver: solver, Assignment: assign, Infeasible: infeasible}
	res.Start = evaluate(p, goals, o.Latency, p.Current)
	res.Objective = evaluate(p, goals, o.Latency, assign)
	res.Moves = explainMoves(p, goals, o.Latency, assign)
	res.Summary = summarize(p, assign)
	res.Summary.Objective = res.Objective.Total()
	if o.Now != nil && !startedAt.IsZero() {
		res.Summary.SolveSeconds = o.Now().Sub(startedAt).Seconds()
	}
	var left []int
	for s, c := range assign {
		if c < 0 {
			left = append(left, s)
		}
	}
	if len(infeasible) > 0 {
		at := make(map[interfaces.ShardID]int, p.NumShards())
		for s, id := range p.ShardIDs {
			at[id] = s
		}
		for _, inf := range infeasible {
			if s, ok := at[inf.Shard]; ok {
				left = append(left, s)
			}
		}
	}
	switch {
	case len(left) > 0:
		// Infeasible only when proven (provenUnplaceable); else the search
		// stopped short of shards that might fit: Partial, with the shards
		// still explained in Infeasible.
		if ok, why := provenUnplaceable(p, left); ok {
			res.Status, res.Proof = interfaces.StatusInfeasible, why
		} else {
			res.Status = interfaces.StatusPartial
		}
	case partial:
		// Cut short: the plan is valid but may not be as good as it gets.
		res.Status = interfaces.StatusPartial
	default:
		res.Status = interfaces.StatusOK
	}
	return res, nil
}

// summarize computes the per-resource figures of assign.
func summarize(p *Problem, assign []int32) interfaces.Summary {
	R, M := p.NumResources(), p.NumChildren()
	load := childLoads(p, assign)
	sumLoad, sumCap := totals(p)
	lb := lowerBound(p)
	sum := interfaces.Summary{
		MaxOverMean: map[interfaces.Resource]float64{},
		MaxOverLB:   map[interfaces.Resource]float64{},
		LB:          map[interfaces.Resource]float64{},
	}
	for r := 0; r < R; r++ {
		mx := 0.0
		for c := 0; c < M; c++ {
			mx = math.Max(mx, util(load[c*R+r], p.Capacity[c*R+r]))
		}
		name := p.Resources[r]
		sum.LB[name] = lb[r]
		mean := util(sumLoad[r], sumCap[r])
		sum.MaxOverMean[name] = ratio(mx, mean)
		sum.MaxOverLB[name] = ratio(mx, lb[r])
	}
	for s, c := range assign {
		if c != p.Current[s] && c >= 0 {
			sum.Moves++
			sum.BytesMoved += p.Bytes(s)
		}
	}
	return sum
}

// ratio is a/b, with 0/0 = 1 (nothing to balance is perfectly balanced).
func ratio(a, b float64) float64 {
	if b == 0 {
		if a == 0 {
			return 1
		}
		return math.Inf(1)
	}
	return a / b
}

// explainMoves builds one move per shard whose child changed. The reason is the
// hard constraint that forced the shard off its start child when there is one;
// otherwise the most important goal whose level the move improves, measured as
// the marginal effect of the move in the final placement (the objective of assign
// minus that of assign with this one shard back where it was). Delta is that
// marginal change at the level of the driving goal (negative is better); moves
// that only help as part of a swap or a chain say so.
func explainMoves(p *Problem, goals []Goal, lm LatencyModel, assign []int32) []interfaces.Move {
	ev := newState(p, goals, lm, assign)
	n := 0
	for s, c := range assign {
		if c != p.Current[s] && c >= 0 {
			n++
		}
	}
	moves := make([]interfaces.Move, n)
	if p.origOrder == nil {
		k := 0
		for s, c := range assign {
			if c != p.Current[s] && c >= 0 {
				ev.explainMove(&moves[k], s, c)
				k++
			}
		}
	} else {
		// A renumbered problem lists its moves in the original problem's
		// order, so a plan that was in shard ID order stays so without a
		// sort. The shards are still explained in index order, reading every
		// per-shard array in sequence (in the original order, a million moves
		// missed the cache at each); at[s] is the place of shard s's move in
		// the plan (-1: s does not move).
		at := make([]int32, len(assign))
		for s, c := range assign {
			at[s] = -1
			if c != p.Current[s] && c >= 0 {
				at[s] = 0
			}
		}
		k := int32(0)
		for _, s := range p.origOrder {
			if at[s] >= 0 {
				at[s] = k
				k++
			}
		}
		for s, k := range at {
			if k >= 0 {
				ev.explainMove(&moves[k], s, assign[s])
			}
		}
	}
	sortMovesByShard(moves)
	return moves
}

// explainMove fills m for the move of shard s from its start child to c.
func (ev *state) explainMove(m *interfaces.Move, s int, c int32) {
	p := ev.p
	from := p.Current[s]
	m.Shard, m.To = p.ShardIDs[s], p.ChildIDs[c]
	if p.Epoch != nil {
		m.Epoch = p.Epoch[s]
	}
	if from >= 0 {
		m.From = p.ChildIDs[from]
	}
	// Marginal delta: undoing the move changes the objective by -delta.
	// Levels are computed only as far as the explanation needs.
	forced := ev.forcedReason(s, from)
	lvl, v, nz, nzV := ev.firstLevels(s, from)
	switch {
	case forced != "":
		m.Goal = forced
		m.Reason = forcedText(p, s, from, forced)
		m.Delta = -nzV // the first level the move changes (-0 when none)
	case v > levelTol:
		g := ev.levelGoal(lvl, s, from, c)
		m.Goal = g.Kind
		m.Delta = -v
		m.Reason = fmt.Sprintf("improves %s (priority %d) by %.4g", g.Kind, g.Priority, v)
	default:
		// The move alone does not improve any level: it is part of a swap or
		// chain that does as a whole.
		if nz >= 0 {
			m.Delta = -nzV
		}
		m.Goal = "swap"
		m.Reason = "part of a swap or chain of moves that improves the objective as a whole"
	}
}

// sortMovesByShard sorts moves by shard ID, stably: it sorts indices (ties by
// position) and then permutes, so each Move is copied once rather than at every
// step of a merge sort (plans of a million moves).
func sortMovesByShard(moves []interfaces.Move) {
	byShard := func(a, b interfaces.Move) int { return strings.Compare(string(a.Shard), string(b.Shard)) }
	if slices.IsSortedFunc(moves, byShard) {
		return
	}
	idx := make([]int32, len(moves))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int {
		if c := byShard(moves[a], moves[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	out := make([]interfaces.Move, len(moves))
	for i, j := range idx {
		out[i] = moves[j]
	}
	copy(moves, out)
}

func forcedText(p *Problem, s int, from int32, why string) string {
	switch why {
	case ConstraintUnplaced:
		return "placing an unplaced shard"
	case ConstraintDrain:
		return fmt.Sprintf("emptying %s child %q", p.ChildState[from], p.ChildIDs[from])
	case ConstraintPin:
		return fmt.Sprintf("shard is pinned to %q", p.ChildIDs[p.PinOf(s)])
	case ConstraintAllowed:
		return fmt.Sprintf("shard is not allowed on %q", p.ChildIDs[from])
	case ConstraintAntiAffinity:
		return fmt.Sprintf("too many shards of its anti-affinity group on %q", p.ChildIDs[from])
	case ConstraintCapacity:
		return fmt.Sprintf("child %q was above its usable capacity", p.ChildIDs[from])
	}
	return why
}
