package balancer

import "math"

// The fast node bound of the exact solver: the Lagrangian (dual) bound of the LP
// relaxation restricted to the assignment and utilization rows.
//
// For weights γ_jk ≥ 0 over (child, resource) pairs with Σ γ_jk = 1, every
// completion of a node has
//
//	T ≥ Σ_jk γ_jk·U_jk ≥ g(γ) = Σ_jk γ_jk·L_jk/cap_jk + Σ_i min_j Σ_k γ_jk·load_ik/cap_jk
//
// where U is the completion's utilization, L the load the node already put on each
// child and i runs over the remaining shards (j over the children shard i may
// use). The first inequality holds because T is the largest U; the second because
// each shard's share of the weighted sum is at least its smallest possible one.
// So g(γ) is a valid lower bound for ANY γ, whatever the numerical quality of the
// procedure that chose γ: round-off can only make it weaker, never wrong. Once
// an incumbent exists, the minimum over j only runs over the children that can
// still take shard i without exceeding the incumbent (canTake): the bound then
// holds for every completion that could beat or tie the incumbent, which is all
// the pruning test needs.
//
// The best γ is the optimal dual of the LP relaxation (minimize t subject to the
// assignment and utilization rows), which a small dense simplex below finds; its
// result is then re-evaluated exactly through g. Nodes below the LP depth reuse
// their parent's γ, which costs one pass over the remaining shards.

// dualBound evaluates g(γ) at depth d (γ indexed [j*r+k], summing to 1 over
// pairs with capacity). It returns -Inf when γ is empty.
func (s *exactSearch) dualBound(d int, gamma []float64) float64 {
	if gamma == nil {
		return math.Inf(-1)
	}
	r := s.r
	v := 0.0
	for j := 0; j < s.m; j++ {
		for k := 0; k < r; k++ {
			if g := gamma[j*r+k]; g > 0 {
				v += g * s.L[j*r+k] / s.capa[j*r+k]
			}
		}
	}
	for _, i := range s.order[d:] {
		best := math.Inf(1)
		for j := 0; j < s.m; j++ {
			if !s.canTake(i, j) {
				continue
			}
			c := 0.0
			for k := 0; k < r; k++ {
				if g := gamma[j*r+k]; g > 0 {
					c += g * s.load[i][k] / s.capa[j*r+k]
				}
			}
			if c < best {
				best = c
			}
		}
		if math.IsInf(best, 1) {
			return math.Inf(1) // a shard with no child: the node is infeasible
		}
		v += best
	}
	return v
}

// canTake reports whether shard i can still join child j at the current node in
// a completion that could beat or tie the incumbent: it is feasible there, its
// groups are not full there, and adding it keeps the child within its limits
// and at or below the incumbent's bottleneck. Any such completion puts every
// remaining shard on a child where canTake held at this node (loads only grow),
// so restricting the relaxation to these pairs keeps it a valid bound for the
// completions that matter; the others are pruned anyway.
func (s *exactSearch) canTake(i, j int) bool {
	if !s.feasible[i][j] || s.groupFull(i, j, s.gcount) {
		return false
	}
	tau := math.Inf(1)
	if s.haveBest {
		tau = s.bestT + exactEps
	}
	for k := 0; k < s.r; k++ {
		x := s.L[j*s.r+k] + s.load[i][k]
		if exactOver(x, s.limit[j*s.r+k]) || s.util(j, k, x) > tau {
			return false
		}
	}
	return true
}

// exactSimplexMaxPivots bounds the pivots of one LP solve.
const exactSimplexMaxPivots = 2000

// dualWeights solves the LP relaxation at depth d with a dense tableau simplex
// and returns its optimal dual weights γ (nil when there is nothing to weigh).
//
// The LP is written as: maximize z subject to
//
//	Σ_j x_ij = 1                                   each remaining shard i
//	Σ_i load_ik·x_ij + cap_jk·z + s_jk = cap_jk·T0 − L_jk   each j, k with cap_jk > 0
//
// with t = T0 − z and T0 chosen so that the first feasible child of every shard
// is a feasible starting vertex. The dual prices of the utilization rows,
// scaled by cap_jk and normalized, are γ.
func (s *exactSearch) dualWeights(d int) []float64 {
	r, m := s.r, s.m
	rem := s.order[d:]
	// columns: x vars, then z, then one slack per util row, then rhs
	type xv struct{ i, j int }
	var xs []xv
	first := make([]int, len(rem)) // column of each shard's starting variable
	for a, i := range rem {
		first[a] = -1
		for j := 0; j < m; j++ {
			if s.canTake(i, j) {
				if first[a] < 0 {
					first[a] = len(xs)
				}
				xs = append(xs, xv{a, j})
			}
		}
		if first[a] < 0 {
			return nil
		}
	}
	var urows []int // j*r+k of each util row
	for j := 0; j < m; j++ {
		for k := 0; k < r; k++ {
			if s.capa[j*r+k] > 0 {
				urows = append(urows, j*r+k)
			}
		}
	}
	if len(urows) == 0 {
		return nil
	}
	nx, nE, nU := len(xs), len(rem), len(urows)
	zc := nx
	sc := nx + 1
	cols := nx + 1 + nU + 1
	rhs := cols - 1
	rows := nE + nU
	tab := make([]float64, (rows+1)*cols) // last row: objective (reduced costs)
	at := func(row, col int) *float64 { return &tab[row*cols+col] }

	// T0: utilization at the starting vertex, plus one.
	start := make([]float64, m*r)
	copy(start, s.L)
	for a, i := range rem {
		j := xs[first[a]].j
		for k := 0; k < r; k++ {
			start[j*r+k] += s.load[i][k]
		}
	}
	t0 := 0.0
	for _, jk := range urows {
		t0 = math.Max(t0, start[jk]/s.capa[jk])
	}
	t0++

	for c, v := range xs {
		*at(v.i, c) = 1
	}
	for a := range rem {
		*at(a, rhs) = 1
	}
	for q, jk := range urows {
		row := nE + q
		j, k := jk/r, jk%r
		for c, v := range xs {
			if v.j == j {
				*at(row, c) = s.load[rem[v.i]][k]
			}
		}
		*at(row, zc) = s.capa[jk]
		*at(row, sc+q) = 1
		*at(row, rhs) = s.capa[jk]*t0 - s.L[jk]
	}
	*at(rows, zc) = -1 // minimize −z
	basis := make([]int, rows)
	for q := range urows {
		basis[nE+q] = sc + q
	}
	// Make each shard's starting variable basic in its row.
	for a := range rem {
		basis[a] = first[a]
		pivot(tab, cols, rows, a, first[a])
	}

	// Primal simplex: Dantzig's rule, Bland's rule after degenerate stalls.
	bland := false
	stall := 0
	for it := 0; it < exactSimplexMaxPivots; it++ {
		enter := -1
		best := -1e-9
		for c := 0; c < rhs; c++ {
			rc := tab[rows*cols+c]
			if rc < best {
				if bland {
					enter = c
					break
				}
				best, enter = rc, c
			}
		}
		if enter < 0 {
			break // optimal
		}
		leave := -1
		ratio := math.Inf(1)
		for row := 0; row < rows; row++ {
			a := tab[row*cols+enter]
			if a <= 1e-9 {
				continue
			}
			q := tab[row*cols+rhs] / a
			if q < ratio-1e-12 || (q <= ratio+1e-12 && leave >= 0 && basis[row] < basis[leave]) {
				ratio, leave = q, row
			}
		}
		if leave < 0 {
			break // unbounded: cannot happen with a util row; keep current duals
		}
		if ratio <= 1e-12 {
			stall++
			if stall > 20 {
				bland = true
			}
		} else {
			stall = 0
		}
		basis[leave] = enter
		pivot(tab, cols, rows, leave, enter)
	}

	gamma := make([]float64, m*r)
	sum := 0.0
	for q, jk := range urows {
		// reduced cost of slack q = dual price of its row (≥ 0 at optimum)
		y := tab[rows*cols+sc+q]
		if y > 0 {
			gamma[jk] = y * s.capa[jk]
			sum += gamma[jk]
		}
	}
	if sum <= 0 {
		return nil
	}
	for jk := range gamma {
		gamma[jk] /= sum
	}
	return gamma
}

// pivot makes column col basic in row pr of the tableau (rows+1 rows, the last
// the objective).
func pivot(tab []float64, cols, rows, pr, col int) {
	prow := tab[pr*cols : (pr+1)*cols]
	p := prow[col]
	for c := range prow {
		prow[c] /= p
	}
	for row := 0; row <= rows; row++ {
		if row == pr {
			continue
		}
		rw := tab[row*cols : (row+1)*cols]
		f := rw[col]
		if f == 0 {
			continue
		}
		for c := range rw {
			rw[c] -= f * prow[c]
		}
		rw[col] = 0
	}
}
