package balancer

import (
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"
)

// The LP relaxation of the exact solver. For the shards still to place at a node
// (depth d) it solves, with gonum's simplex,
//
//	minimize   t
//	subject to Σ_j x_ij = 1                                  every remaining shard i
//	           Σ_i load_ik·x_ij − cap_jk·t ≤ −L_jk            every child j, resource k with cap_jk > 0
//	           Σ_i load_ik·x_ij ≤ limit_jk − L_jk             where the limit can bind
//	           Σ_{i∈g} x_ij ≤ max_g − count_gj                where the group limit can bind
//	           −Σ_i x_i,cur(i) ≤ budget − moves − placed      when the move budget can bind
//	           −Σ_i bytes_i·x_i,cur(i) ≤ …                    when the byte budget can bind
//	           x_ij ≥ 0 (only for j feasible for i), t ≥ 0
//
// where L is the load the node has already put on each child. Every assignment
// that completes the node is a feasible point of this LP, so its optimum is a lower
// bound on T. The LP is written directly in standard form (one slack per
// inequality), which keeps the rows independent as gonum requires.

// exactLPTol is the simplex's optimality tolerance; exactLPSlack is subtracted
// from the LP value before it is used as a bound, so that round-off in the simplex
// never makes the bound exceed the true relaxation optimum.
const (
	exactLPTol   = 1e-10
	exactLPSlack = 1e-7
)

// lpBound returns the LP bound at depth d, or ok=false when the LP could not be
// solved (numerical failure); an infeasible node gives +Inf.
func (s *exactSearch) lpBound(d int) (bound float64, ok bool) {
	r, m := s.r, s.m
	rem := s.order[d:]
	if len(rem) == 0 {
		return 0, false
	}
	// Variables: x for each feasible (shard, child) pair of the remaining shards.
	nx := 0
	varOf := make([]int, len(rem)*m) // index into vars, -1 when absent
	for a, i := range rem {
		n0 := nx
		for j := 0; j < m; j++ {
			varOf[a*m+j] = -1
			if !s.feasible[i][j] {
				continue
			}
			if s.groupFull(i, j, s.gcount) {
				continue
			}
			fits := true
			for k := 0; k < r; k++ {
				lim := s.limit[j*r+k]
				if exactOver(s.L[j*r+k]+s.load[i][k], lim) {
					fits = false
					break
				}
			}
			if !fits {
				continue
			}
			varOf[a*m+j] = nx
			nx++
		}
		if nx == n0 {
			return math.Inf(1), true // this shard fits nowhere: the node is infeasible
		}
	}
	tCol := nx

	// Inequality rows, each as (coefficients over x and t, right-hand side).
	type row struct {
		idx  []int
		coef []float64
		rhs  float64
	}
	var ineq []row
	// utilization rows
	for j := 0; j < m; j++ {
		for k := 0; k < r; k++ {
			cp := s.capa[j*r+k]
			if cp == 0 {
				continue
			}
			var rw row
			for a := range rem {
				if v := varOf[a*m+j]; v >= 0 {
					if w := s.load[rem[a]][k]; w > 0 {
						rw.idx = append(rw.idx, v)
						rw.coef = append(rw.coef, w)
					}
				}
			}
			if len(rw.idx) == 0 && s.L[j*r+k] == 0 {
				continue
			}
			rw.idx = append(rw.idx, tCol)
			rw.coef = append(rw.coef, -cp)
			rw.rhs = -s.L[j*r+k]
			ineq = append(ineq, rw)
		}
	}
	// limit rows, only when they can bind
	for j := 0; j < m; j++ {
		for k := 0; k < r; k++ {
			lim := s.limit[j*r+k]
			if math.IsInf(lim, 1) {
				continue
			}
			var rw row
			total := 0.0
			for a := range rem {
				if v := varOf[a*m+j]; v >= 0 {
					if w := s.load[rem[a]][k]; w > 0 {
						rw.idx = append(rw.idx, v)
						rw.coef = append(rw.coef, w)
						total += w
					}
				}
			}
			rw.rhs = math.Max(0, lim-s.L[j*r+k])
			if total <= rw.rhs {
				continue
			}
			ineq = append(ineq, rw)
		}
	}
	// anti-affinity rows, only when they can bind
	for g := range s.gmax {
		for j := 0; j < m; j++ {
			var rw row
			for a, i := range rem {
				if !slices.Contains(s.groups[i], g) {
					continue
				}
				if v := varOf[a*m+j]; v >= 0 {
					rw.idx = append(rw.idx, v)
					rw.coef = append(rw.coef, 1)
				}
			}
			rw.rhs = float64(s.gmax[g] - s.gcount[g*m+j])
			if float64(len(rw.idx)) <= rw.rhs {
				continue
			}
			ineq = append(ineq, rw)
		}
	}
	// move and byte budgets: every remaining shard that counts as a move unless it
	// stays on its current child costs (1 − x_i,cur).
	if s.in.MaxMoves >= 0 || s.in.MaxBytes >= 0 {
		var mv row
		var by row
		movers, moverBytes := 0, 0.0
		for a, i := range rem {
			c := s.cur[i]
			if c < 0 {
				if s.in.CountPlacements {
					mv.rhs--
					by.rhs -= float64(s.bytes[i])
				}
				continue
			}
			movers++
			moverBytes += float64(s.bytes[i])
			if v := varOf[a*m+c]; v >= 0 {
				mv.idx = append(mv.idx, v)
				mv.coef = append(mv.coef, -1)
				if s.bytes[i] > 0 {
					by.idx = append(by.idx, v)
					by.coef = append(by.coef, -float64(s.bytes[i]))
				}
			}
		}
		if s.in.MaxMoves >= 0 {
			mv.rhs += float64(s.in.MaxMoves-s.moves) - float64(movers)
			if mv.rhs < 0 {
				if len(mv.idx) == 0 {
					return math.Inf(1), true
				}
				ineq = append(ineq, mv)
			}
		}
		if s.in.MaxBytes >= 0 {
			by.rhs += float64(s.in.MaxBytes-s.bytesMv) - moverBytes
			if by.rhs < 0 {
				if len(by.idx) == 0 {
					return math.Inf(1), true
				}
				ineq = append(ineq, by)
			}
		}
	}

	hasT := false
	for _, rw := range ineq {
		for _, v := range rw.idx {
			hasT = hasT || v == tCol
		}
	}
	if !hasT {
		return 0, false // nothing to bound
	}

	nEq := len(rem)
	nRows := nEq + len(ineq)
	nCols := nx + 1 + len(ineq)
	A := mat.NewDense(nRows, nCols, nil)
	b := make([]float64, nRows)
	for a := range rem {
		for j := 0; j < m; j++ {
			if v := varOf[a*m+j]; v >= 0 {
				A.Set(a, v, 1)
			}
		}
		b[a] = 1
	}
	for q, rw := range ineq {
		for t, v := range rw.idx {
			A.Set(nEq+q, v, rw.coef[t])
		}
		A.Set(nEq+q, nx+1+q, 1)
		b[nEq+q] = rw.rhs
	}
	c := make([]float64, nCols)
	c[tCol] = 1

	val, err := safeSimplex(c, A, b)
	if err != nil {
		// Includes lp.ErrInfeasible: a simplex claim that no fractional completion
		// exists is not trusted (round-off); the search finds out by itself.
		return 0, false
	}
	return val - exactLPSlack, true
}

// safeSimplex runs gonum's simplex, turning a panic of the numeric routine into an
// error so that a numerically awkward LP can only cost a weaker bound.
func safeSimplex(c []float64, A mat.Matrix, b []float64) (val float64, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("exact: simplex failed: %v", p)
		}
	}()
	val, _, err = lp.Simplex(c, A, b, exactLPTol, nil)
	return val, err
}
