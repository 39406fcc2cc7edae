package balancer

import (
	"math"
)

// bruteResult is the best assignment found by enumerating all M^N of them.
type bruteResult struct {
	Feasible bool
	Assign   []int
	T        float64
	Moves    int
	Bytes    int64
}

// bruteForce enumerates every assignment of the instance (M^N of them; keep N ≤ 8,
// M ≤ 3) and returns the lexicographic best (T, moves, bytes) among those meeting
// every hard constraint. It is written independently of the branch-and-bound, from
// the definitions in exactInstance's documentation, to serve as its reference.
func bruteForce(in *exactInstance) bruteResult {
	n, m := in.N, in.M
	assign := make([]int, n)
	var best bruteResult
	limit := func(j, k int) float64 {
		if in.Cap[j][k] == 0 {
			return 0
		}
		if in.Limit == nil {
			return in.Cap[j][k]
		}
		return in.Limit[j][k]
	}
	for {
		if t, mv, by, ok := bruteEval(in, assign, limit); ok {
			better := !best.Feasible || t < best.T-exactEps ||
				(t <= best.T+exactEps && (mv < best.Moves || (mv == best.Moves && by < best.Bytes)))
			if better {
				best = bruteResult{Feasible: true, Assign: append([]int(nil), assign...), T: t, Moves: mv, Bytes: by}
			}
		}
		// next assignment in base-m counting
		p := 0
		for p < n {
			assign[p]++
			if assign[p] < m {
				break
			}
			assign[p] = 0
			p++
		}
		if p == n {
			break
		}
	}
	return best
}

// bruteEval checks every hard constraint of assign and returns its objective.
func bruteEval(in *exactInstance, assign []int, limit func(j, k int) float64) (t float64, moves int, bytes int64, ok bool) {
	n, m, r := in.N, in.M, in.R
	sum := make([][]float64, m)
	for j := range sum {
		sum[j] = make([]float64, r)
		if in.Base != nil {
			copy(sum[j], in.Base[j])
		}
	}
	gcount := map[[2]int]int{}
	for g, row := range in.BaseGroups {
		for j, c := range row {
			gcount[[2]int{g, j}] = c
		}
	}
	used := make([]bool, m)
	for i := 0; i < n; i++ {
		j := assign[i]
		used[j] = true
		if in.Allowed != nil && !in.Allowed[i][j] {
			return 0, 0, 0, false
		}
		for k := 0; k < r; k++ {
			sum[j][k] += in.Load[i][k]
		}
		if in.Groups != nil {
			for _, g := range in.Groups[i] {
				gcount[[2]int{g, j}]++
				if gcount[[2]int{g, j}] > in.GroupMax[g] {
					return 0, 0, 0, false
				}
			}
		}
		cur := -1
		if in.Current != nil {
			cur = in.Current[i]
		}
		if (cur >= 0 && cur != j) || (cur < 0 && in.CountPlacements) {
			moves++
			if in.Bytes != nil {
				bytes += in.Bytes[i]
			}
		}
	}
	if in.MaxMoves >= 0 && moves > in.MaxMoves {
		return 0, 0, 0, false
	}
	if in.MaxBytes >= 0 && bytes > in.MaxBytes {
		return 0, 0, 0, false
	}
	for j := 0; j < m; j++ {
		for k := 0; k < r; k++ {
			lim := limit(j, k)
			if used[j] && exactOver(sum[j][k], lim) {
				return 0, 0, 0, false
			}
			if in.Cap[j][k] > 0 {
				t = math.Max(t, sum[j][k]/in.Cap[j][k])
			}
		}
	}
	return t, moves, bytes, true
}
