package balancer

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
)

// Helpers of the exact search that make it fast without changing what it proves:
// a good first incumbent (greedy, then a descent by moves and swaps), the
// wasted-space bound and a table of explored states.

// exactMaxSortedShards bounds the instance size for which the per-depth sorted
// loads of the wasted-space bound are precomputed (n² memory).
const exactMaxSortedShards = 512

// exactMaxMemo bounds the number of explored states remembered.
const exactMaxMemo = 1 << 20

// prepPrune precomputes the data of the wasted-space bound and the state table.
func (s *exactSearch) prepPrune() {
	if s.n <= exactMaxSortedShards {
		s.sortedRem = make([][][]float64, s.n+1)
		for d := 0; d <= s.n; d++ {
			s.sortedRem[d] = make([][]float64, s.r)
			for k := 0; k < s.r; k++ {
				var xs []float64
				for _, i := range s.order[d:] {
					if w := s.load[i][k]; w > 0 {
						xs = append(xs, w)
					}
				}
				sort.Float64s(xs)
				s.sortedRem[d][k] = xs
			}
		}
	}
	s.memo = map[string][]exactCost{}
	s.keyBuf = make([]byte, 0, 16+8*s.m*s.r+4*len(s.gcount)+s.m)
}

type exactCost struct {
	moves int
	bytes int64
}

// wasteInfeasible reports whether the remaining shards (depth ≥ d) cannot all be
// placed with every utilization at most tau, by the wasted-space argument applied
// to each resource: a shard's load of resource k can only go to a child whose
// room (tau·cap − load, within the limit) is at least that load, so, pouring the
// loads smallest first into the rooms smallest first, room too small for what is
// left is wasted; if load remains at the end, no placement exists.
func (s *exactSearch) wasteInfeasible(d int, tau float64) bool {
	if s.sortedRem == nil {
		return false
	}
	rooms := s.scratchU[:0]
	for k := 0; k < s.r; k++ {
		items := s.sortedRem[d][k]
		if len(items) == 0 {
			continue
		}
		rooms = rooms[:0]
		for j := 0; j < s.m; j++ {
			if !s.usable[d][j] {
				continue
			}
			cp := s.capa[j*s.r+k]
			lim := s.limit[j*s.r+k]
			room := math.Min(tau*cp, lim+1e-9*lim) - s.L[j*s.r+k]
			if room <= 0 {
				continue
			}
			p := len(rooms)
			rooms = append(rooms, room)
			for p > 0 && rooms[p-1] > room {
				rooms[p] = rooms[p-1]
				p--
			}
			rooms[p] = room
		}
		// tolerances relative to the loads' magnitude (bytes can be ~1e10)
		total := 0.0
		for _, w := range items {
			total += w
		}
		tol := 1e-9 * total
		p, pool := 0, 0.0
		for _, room := range rooms {
			for p < len(items) && items[p] <= room+tol {
				pool += items[p]
				p++
			}
			if pool <= room {
				pool = 0
			} else {
				pool -= room
			}
		}
		if p < len(items) || pool > tol {
			return true
		}
	}
	return false
}

// seen reports whether a state equal to the current node's (same depth, same load
// on every child, same group counts, same symmetry-breaking context) was explored
// before with no more moves and bytes; then every completion of this node is
// matched by one explored there, and the node can be skipped. Otherwise it
// records the node.
func (s *exactSearch) seen(d int) bool {
	if s.memo == nil {
		return false
	}
	b := s.keyBuf[:0]
	b = binary.LittleEndian.AppendUint32(b, uint32(d))
	lo := int32(-1)
	if d > 0 && s.sameNext[d-1] {
		lo = int32(s.assign[s.order[d-1]])
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(lo))
	for _, x := range s.L {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x+0)) // +0 folds -0 into 0
	}
	for _, c := range s.gcount {
		b = binary.LittleEndian.AppendUint32(b, uint32(c))
	}
	for j := 0; j < s.m; j++ {
		if s.count[j] == 0 {
			b = append(b, 0)
		} else {
			b = append(b, 1)
		}
	}
	s.keyBuf = b
	entries, ok := s.memo[string(b)]
	if ok {
		for _, e := range entries {
			if e.moves <= s.moves && e.bytes <= s.bytesMv {
				return true
			}
		}
	}
	if len(s.memo) >= exactMaxMemo && !ok {
		return false
	}
	// keep the Pareto front of (moves, bytes)
	kept := entries[:0]
	for _, e := range entries {
		if !(s.moves <= e.moves && s.bytesMv <= e.bytes) {
			kept = append(kept, e)
		}
	}
	s.memo[string(b)] = append(kept, exactCost{s.moves, s.bytesMv})
	return false
}

// improveIncumbents offers a greedy assignment (largest shard first onto the
// child where the bottleneck grows least) and improves it, and the seeded
// incumbent, by a descent of single moves and swaps off the busiest children.
func (s *exactSearch) improveIncumbents() {
	starts := [][]int{}
	if s.haveBest {
		starts = append(starts, append([]int(nil), s.best...))
	}
	if g := s.greedyAssign(); g != nil {
		starts = append(starts, g)
	}
	for _, a := range starts {
		s.descend(a)
	}
	// Perturbation restarts (iterated local search, seeded so the solver stays
	// deterministic): a few random feasible moves off the incumbent, then descend.
	if !s.haveBest || s.n < 2 || s.m < 2 {
		return
	}
	rng := rand.New(rand.NewPCG(uint64(s.n)*7919+uint64(s.m), 0xe8ac7))
	for round := 0; round < exactKicks; round++ {
		a := append([]int(nil), s.best...)
		st := s.newLS(a)
		for kick := 0; kick < 2+rng.IntN(3); kick++ {
			i, j := rng.IntN(s.n), rng.IntN(s.m)
			from := st.assign[i]
			if j == from || !s.feasible[i][j] || !st.groupOK(j, -1, i) || math.IsInf(st.after(j, -1, i), 1) {
				continue
			}
			dm0, db0 := st.costOf(i, from)
			dm1, db1 := st.costOf(i, j)
			if !st.budgetOK(dm1-dm0, db1-db0) {
				continue
			}
			st.move(i, j)
		}
		s.descend(st.assign)
	}
}

// exactKicks is the number of perturbation restarts tried for the first
// incumbent.
const exactKicks = 200

// lsState is a complete assignment with its loads, for the descent.
type lsState struct {
	s      *exactSearch
	assign []int
	L      []float64
	gc     []int
	moves  int
	bytes  int64
}

func (s *exactSearch) newLS(assign []int) *lsState {
	st := &lsState{s: s, assign: assign, L: append([]float64(nil), s.base...), gc: append([]int(nil), s.gbase...)}
	for i, j := range assign {
		for k := 0; k < s.r; k++ {
			st.L[j*s.r+k] += s.load[i][k]
		}
		for _, g := range s.groups[i] {
			st.gc[g*s.m+j]++
		}
		if s.isMove(i, j) {
			st.moves++
			st.bytes += s.bytes[i]
		}
	}
	return st
}

func (st *lsState) childMax(j int) float64 {
	s := st.s
	u := 0.0
	for k := 0; k < s.r; k++ {
		u = math.Max(u, s.util(j, k, st.L[j*s.r+k]))
	}
	return u
}

func (st *lsState) T() float64 {
	t := 0.0
	for j := 0; j < st.s.m; j++ {
		t = math.Max(t, st.childMax(j))
	}
	return t
}

// after returns child j's bottleneck if shard out leaves it and shard in joins it
// (either may be -1), or +Inf when a limit would be broken.
func (st *lsState) after(j, out, in int) float64 {
	s := st.s
	u := 0.0
	for k := 0; k < s.r; k++ {
		x := st.L[j*s.r+k]
		if out >= 0 {
			x -= s.load[out][k]
		}
		if in >= 0 {
			x += s.load[in][k]
		}
		lim := s.limit[j*s.r+k]
		if in >= 0 && exactOver(x, lim) {
			return math.Inf(1)
		}
		u = math.Max(u, s.util(j, k, x))
	}
	return u
}

// groupOK reports whether shard in may join child j when shard out leaves it.
func (st *lsState) groupOK(j, out, in int) bool {
	s := st.s
	for _, g := range s.groups[in] {
		c := st.gc[g*s.m+j]
		if out >= 0 && slices.Contains(s.groups[out], g) {
			c--
		}
		if c >= s.gmax[g] {
			return false
		}
	}
	return true
}

func (st *lsState) budgetOK(dm int, db int64) bool {
	in := st.s.in
	return (in.MaxMoves < 0 || st.moves+dm <= in.MaxMoves) && (in.MaxBytes < 0 || st.bytes+db <= in.MaxBytes)
}

func (st *lsState) costOf(i, j int) (int, int64) {
	if st.s.isMove(i, j) {
		return 1, st.s.bytes[i]
	}
	return 0, 0
}

func (st *lsState) move(i, j int) {
	s := st.s
	from := st.assign[i]
	m0, b0 := st.costOf(i, from)
	m1, b1 := st.costOf(i, j)
	st.moves += m1 - m0
	st.bytes += b1 - b0
	for k := 0; k < s.r; k++ {
		st.L[from*s.r+k] -= s.load[i][k]
		st.L[j*s.r+k] += s.load[i][k]
	}
	for _, g := range s.groups[i] {
		st.gc[g*s.m+from]--
		st.gc[g*s.m+j]++
	}
	st.assign[i] = j
}

// descend improves a feasible assignment until no single move or swap lowers the
// bottleneck of a busiest child, then offers it as an incumbent.
func (s *exactSearch) descend(assign []int) {
	st := s.newLS(assign)
	if !st.budgetOK(0, 0) {
		return
	}
	for iter := 0; iter < 50*s.n+100; iter++ {
		improved := false
		t := st.T()
		for b := 0; b < s.m && !improved; b++ {
			ub := st.childMax(b)
			if ub < t-exactEps {
				continue
			}
			for i := 0; i < s.n && !improved; i++ {
				if st.assign[i] != b {
					continue
				}
				for j := 0; j < s.m && !improved; j++ {
					if j == b || !s.feasible[i][j] {
						continue
					}
					// single move b → j
					if st.groupOK(j, -1, i) {
						dm0, db0 := st.costOf(i, b)
						dm1, db1 := st.costOf(i, j)
						if st.budgetOK(dm1-dm0, db1-db0) && math.Max(st.after(b, i, -1), st.after(j, -1, i)) < ub-exactEps {
							st.move(i, j)
							improved = true
							break
						}
					}
					// swap with a shard i2 on j
					for i2 := 0; i2 < s.n; i2++ {
						if st.assign[i2] != j || !s.feasible[i2][b] {
							continue
						}
						if !st.groupOK(j, i2, i) || !st.groupOK(b, i, i2) {
							continue
						}
						dmA0, dbA0 := st.costOf(i, b)
						dmA1, dbA1 := st.costOf(i, j)
						dmB0, dbB0 := st.costOf(i2, j)
						dmB1, dbB1 := st.costOf(i2, b)
						if !st.budgetOK(dmA1-dmA0+dmB1-dmB0, dbA1-dbA0+dbB1-dbB0) {
							continue
						}
						if math.Max(st.after(b, i, i2), st.after(j, i2, i)) < ub-exactEps {
							st.move(i, j)
							st.move(i2, b)
							improved = true
							break
						}
					}
				}
			}
		}
		if !improved {
			break
		}
	}
	s.record(st.assign, st.T(), st.moves, st.bytes)
}

// greedyAssign places every shard, largest first, on the feasible child where
// the bottleneck grows least; nil when it gets stuck or breaks a budget.
func (s *exactSearch) greedyAssign() []int {
	assign := make([]int, s.n)
	st := &lsState{s: s, assign: assign, L: append([]float64(nil), s.base...), gc: append([]int(nil), s.gbase...)}
	for _, i := range s.order {
		bj, bu := -1, math.Inf(1)
		for j := 0; j < s.m; j++ {
			if !s.feasible[i][j] || !st.groupOK(j, -1, i) {
				continue
			}
			u := st.after(j, -1, i)
			if u < bu-exactEps || (u <= bu+exactEps && bj >= 0 && s.cur[i] == j) {
				bj, bu = j, u
			}
		}
		if bj < 0 || math.IsInf(bu, 1) {
			return nil
		}
		assign[i] = bj
		for k := 0; k < s.r; k++ {
			st.L[bj*s.r+k] += s.load[i][k]
		}
		for _, g := range s.groups[i] {
			st.gc[g*s.m+bj]++
		}
		dm, db := st.costOf(i, bj)
		st.moves += dm
		st.bytes += db
	}
	if !st.budgetOK(0, 0) {
		return nil
	}
	return assign
}
