package balancer

import (
	"cmp"
	"slices"

	"github.com/strata-sched/strata/interfaces"
)

// Placing many shards visits them largest first. With the per-shard arrays in
// the problem's own order, every visit on a problem far larger than the cache
// misses it several times (its load row, current child, pin, state size,
// assignment, member position). The local solver therefore solves a copy of
// such a problem renumbered in that order, and maps the result back: on the
// global tier of `strata bench hierarchy` at a million shards that took its
// time from 2.14–2.31 s to 1.80–2.00 s, side by side (docs/benchmarks.md).
// The greedy solver gained nothing measurable from it (its placements are
// cheaper; 2.0–2.1 s either way at 1M × 10,000) and does not renumber.

// renumberMin is the smallest problem worth renumbering: below it the per-shard
// arrays stay in the cache. (A variable only so that tests can renumber small
// problems.)
var renumberMin = 1 << 16

// placementOrder returns every shard in the order the placer visits them
// (largest first, ties by index) and the size weights it sorted by, when p
// has at least renumberMin shards and at least a quarter of them are
// unplaced; else nil (not worth it). The copy renumbered in that order must
// size its shards with these weights: weights computed on the copy can
// differ in the last bits (the LB sums loads in shard order), and shards
// whose shares of two resources nearly tie would then come out of order.
func placementOrder(p *Problem, goals []Goal) ([]int32, []float64) {
	N := p.NumShards()
	if N < renumberMin {
		return nil, nil
	}
	unplaced := 0
	for _, c := range p.Current {
		if c < 0 {
			unplaced++
		}
	}
	if unplaced < N/4 {
		return nil, nil
	}
	w := sizeWeights(p, lbWeights(p, goals))
	ord := make([]int32, N)
	for s := range ord {
		ord[s] = int32(s)
	}
	sortBySize(ord, func(s int) float64 { return sizeOf(p, w, s) })
	return ord, w
}

// renumbered returns a copy of p whose shard i is p's shard ord[i] (every
// per-shard field permuted; children, groups and domains shared) that sizes
// its shards with sizeW (placementOrder's weights).
func (p *Problem) renumbered(ord []int32, sizeW []float64) *Problem {
	q := *p
	q.sizeW = sizeW
	R := p.NumResources()
	q.ShardIDs = gather(p.ShardIDs, ord)
	q.StateBytes = gather(p.StateBytes, ord)
	q.Epoch = gather(p.Epoch, ord)
	q.Current = gather(p.Current, ord)
	q.Locked = gather(p.Locked, ord)
	q.Pinned = gather(p.Pinned, ord)
	q.Allowed = gather(p.Allowed, ord)
	q.Unresolved = gather(p.Unresolved, ord)
	q.Groups = gather(p.Groups, ord)
	q.ShardDomain = gather(p.ShardDomain, ord)
	q.Avoid = gather(p.Avoid, ord)
	q.Load = make([]float64, len(p.Load))
	q.origOrder = make([]int32, len(ord))
	for i, s := range ord {
		copy(q.Load[i*R:i*R+R], p.Load[int(s)*R:int(s)*R+R])
		q.origOrder[s] = int32(i)
	}
	return &q
}

// gather returns xs[ord[0]], xs[ord[1]], ... (nil for nil).
func gather[T any](xs []T, ord []int32) []T {
	if xs == nil {
		return nil
	}
	out := make([]T, len(ord))
	for i, s := range ord {
		out[i] = xs[s]
	}
	return out
}

// inOriginalOrder maps a result on p.renumbered(ord) back to p: the assignment
// by p's shard index, infeasible shards in p's order. Moves are already in p's
// order (explainMoves follows origOrder) and sorted by shard ID; summary and
// objectives are totals.
func (r *Result) inOriginalOrder(p *Problem, ord []int32) {
	if r.Assignment != nil {
		a := make([]int32, len(r.Assignment))
		for i, s := range ord {
			a[s] = r.Assignment[i]
		}
		r.Assignment = a
	}
	if len(r.Infeasible) > 1 {
		pos := make(map[interfaces.ShardID]int32, len(r.Infeasible))
		for _, inf := range r.Infeasible {
			pos[inf.Shard] = -1
		}
		for s, id := range p.ShardIDs {
			if _, ok := pos[id]; ok {
				pos[id] = int32(s)
			}
		}
		slices.SortStableFunc(r.Infeasible, func(a, b interfaces.Infeasible) int { return cmp.Compare(pos[a.Shard], pos[b.Shard]) })
	}
}

// solveRenumbered runs solve on p renumbered by ord (placementOrder's) when
// ord is not nil, and maps the result back.
func solveRenumbered(p *Problem, ord []int32, sizeW []float64, solve func(*Problem) (Result, error)) (Result, error) {
	if ord == nil {
		return solve(p)
	}
	res, err := solve(p.renumbered(ord, sizeW))
	res.inOriginalOrder(p, ord)
	return res, err
}
