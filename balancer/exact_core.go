package balancer

import (
	"fmt"
	"math"
	"sort"

	"github.com/strata-sched/strata/interfaces"
)

// This file holds the exact solver's core: a branch-and-bound over a dense,
// Problem-independent instance. exact.go converts the balancer's Problem into an
// exactInstance and the outcome back into a Result.
//
// The objective is lexicographic:
//
//  1. T, the bottleneck: the largest utilization load/capacity over every child and
//     every resource with a capacity above zero (min-max);
//  2. the number of moves (shards placed now whose child changes);
//  3. the state bytes those moves carry.
//
// subject to the hard constraints: allowed children per shard (pinning, labels,
// drained or failed children are expressed as "not allowed"), per-resource limits
// (capacity less headroom), anti-affinity groups (at most GroupMax[g] shards of
// group g on one child) and a move budget (count and bytes).

// exactEps is the tolerance under which two utilizations are taken as equal.
const exactEps = 1e-9

// exactDefaultMaxNodes is the node limit when the caller gives none.
const exactDefaultMaxNodes = 2_000_000

// Size guards of the dense LPs (tableau entries).
const (
	exactMaxDualTableau = 1 << 21
	exactMaxLPEntries   = 1 << 18
)

// exactOver reports whether load x exceeds limit lim. The slack (relative
// 1e-10) absorbs the rounding of sums taken in different orders and is ten times
// tighter than CheckHard's, so what the search accepts CheckHard accepts too.
func exactOver(x, lim float64) bool { return x > lim*(1+1e-10) }

// exactInstance is the dense input of the exact core. Indexes: i shard (0..N-1),
// j child (0..M-1), k resource (0..R-1).
type exactInstance struct {
	N, M, R int
	// Load[i][k] is shard i's demand of resource k (≥ 0).
	Load [][]float64
	// Cap[j][k] is child j's capacity: the denominator of its utilization. A
	// resource with capacity 0 takes no load and does not count in T.
	Cap [][]float64
	// Limit[j][k] is the most load child j may carry of resource k (capacity less
	// headroom) once it receives a shard (Base alone may exceed it). +Inf means no
	// limit. Nil means Limit = Cap.
	Limit [][]float64
	// Allowed[i][j] says whether shard i may live on child j. Nil means everywhere.
	Allowed [][]bool
	// Current[i] is shard i's child now, or -1 when it is not placed. Nil means
	// nothing is placed.
	Current []int
	// Bytes[i] is the state a move of shard i carries. Nil means 0.
	Bytes []int64
	// Groups[i] lists shard i's anti-affinity groups. Nil means no groups.
	Groups [][]int
	// GroupMax[g] is the most shards of group g one child may hold.
	GroupMax []int
	// MaxMoves and MaxBytes bound the moves (and the bytes they carry); < 0 means
	// no bound.
	MaxMoves int
	MaxBytes int64
	// Base[j][k] is load already on child j that the search does not place (the
	// shards of in-flight moves); BaseGroups[g][j] counts their shards of group g.
	// Nil means none.
	Base       [][]float64
	BaseGroups [][]int
	// CountPlacements makes the first placement of an unplaced shard count as a
	// move (towards the objective and the budget, with its bytes).
	CountPlacements bool
}

// exactStatus is the outcome of a search.
type exactStatus uint8

const (
	// exactOptimal: Assign is a proven optimum.
	exactOptimal exactStatus = iota
	// exactNotProven: the node limit ended the search; Assign is the best found and
	// Bound a proven lower bound on T.
	exactNotProven
	// exactInfeasible: proven that no assignment meets the hard constraints.
	exactInfeasible
	// exactUnknown: the node limit ended the search before any feasible assignment
	// was found.
	exactUnknown
)

var exactStatusNames = [...]string{"optimal", "not_proven", "infeasible", "unknown"}

func (s exactStatus) String() string {
	if int(s) < len(exactStatusNames) {
		return exactStatusNames[s]
	}
	return "invalid"
}

// exactOptions tunes the search.
type exactOptions struct {
	// MaxNodes bounds the search tree; 0 means exactDefaultMaxNodes.
	MaxNodes int64
	// LPDepth says where gonum's LP relaxation (with the capacity, anti-affinity
	// and budget rows the dual bound leaves out) is solved: -1 never; 0 at the
	// root when those rows may bind below the incumbent (lpMayHelp); d ≥ 1 at the
	// root and at every node of depth ≤ d. The combinatorial bounds are used at
	// every node regardless.
	LPDepth int
	// DualDepth says where the dual (Lagrangian) bound re-solves its weights with
	// the package's own small simplex: at nodes of depth < DualDepth; 0 means the
	// default (every depth), -1 never (the bound is then not used at all). Deeper
	// nodes reuse their parent's weights.
	DualDepth int
	// DualGap, when > 0, skips re-solving the dual weights at nodes deeper than 2
	// whose bound is more than this fraction below the incumbent; ≤ 0 (the
	// default) re-solves everywhere, which measured as fast or faster on the
	// benchmark instances.
	DualGap float64
	// Stop, when set, is polled every 1024 nodes; true ends the search as the node
	// limit does.
	Stop func() bool
}

// exactOutcome is the result of a search.
type exactOutcome struct {
	Status exactStatus
	// Assign[i] is shard i's child (nil when no feasible assignment is known).
	Assign []int
	// T, Moves and Bytes are the objective of Assign.
	T     float64
	Moves int
	Bytes int64
	// Bound is a proven lower bound on the optimal T (equal to T when optimal).
	Bound float64
	// RootLP is the LP relaxation's value at the root, NaN when it was not solved
	// or failed; RootComb the combinatorial bound at the root.
	RootLP   float64
	RootComb float64
	// RootDual is the dual (Lagrangian) bound at the root, -Inf when not used.
	RootDual float64
	// Nodes is the number of search nodes visited.
	Nodes int64
	// NoChild lists shards with no allowed child that fits them alone (the reason
	// of an infeasible outcome found before searching).
	NoChild []int
}

// validate checks the instance's shape and numbers, naming the field and rule.
func (in *exactInstance) validate() error {
	if in.N < 0 || in.M <= 0 || in.R < 0 {
		return fmt.Errorf("exact: instance sizes n=%d m=%d r=%d: need n ≥ 0, m ≥ 1, r ≥ 0: %w", in.N, in.M, in.R, interfaces.ErrInvalid)
	}
	if len(in.Load) != in.N {
		return fmt.Errorf("exact: load: must have %d rows (got %d): %w", in.N, len(in.Load), interfaces.ErrInvalid)
	}
	for i, row := range in.Load {
		if len(row) != in.R {
			return fmt.Errorf("exact: load[%d]: must have %d resources (got %d): %w", i, in.R, len(row), interfaces.ErrInvalid)
		}
		for k, v := range row {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return fmt.Errorf("exact: load[%d][%d]: must be finite and ≥ 0 (got %v): %w", i, k, v, interfaces.ErrInvalid)
			}
		}
	}
	if len(in.Cap) != in.M {
		return fmt.Errorf("exact: cap: must have %d rows (got %d): %w", in.M, len(in.Cap), interfaces.ErrInvalid)
	}
	for j, row := range in.Cap {
		if len(row) != in.R {
			return fmt.Errorf("exact: cap[%d]: must have %d resources (got %d): %w", j, in.R, len(row), interfaces.ErrInvalid)
		}
		for k, v := range row {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return fmt.Errorf("exact: cap[%d][%d]: must be finite and ≥ 0 (got %v): %w", j, k, v, interfaces.ErrInvalid)
			}
		}
	}
	if in.Limit != nil {
		if len(in.Limit) != in.M {
			return fmt.Errorf("exact: limit: must have %d rows (got %d): %w", in.M, len(in.Limit), interfaces.ErrInvalid)
		}
		for j, row := range in.Limit {
			if len(row) != in.R {
				return fmt.Errorf("exact: limit[%d]: must have %d resources (got %d): %w", j, in.R, len(row), interfaces.ErrInvalid)
			}
			for k, v := range row {
				if math.IsNaN(v) || v < 0 {
					return fmt.Errorf("exact: limit[%d][%d]: must be ≥ 0 or +Inf (got %v): %w", j, k, v, interfaces.ErrInvalid)
				}
			}
		}
	}
	if in.Allowed != nil {
		if len(in.Allowed) != in.N {
			return fmt.Errorf("exact: allowed: must have %d rows (got %d): %w", in.N, len(in.Allowed), interfaces.ErrInvalid)
		}
		for i, row := range in.Allowed {
			if len(row) != in.M {
				return fmt.Errorf("exact: allowed[%d]: must have %d children (got %d): %w", i, in.M, len(row), interfaces.ErrInvalid)
			}
		}
	}
	if in.Current != nil {
		if len(in.Current) != in.N {
			return fmt.Errorf("exact: current: must have %d entries (got %d): %w", in.N, len(in.Current), interfaces.ErrInvalid)
		}
		for i, c := range in.Current {
			if c < -1 || c >= in.M {
				return fmt.Errorf("exact: current[%d]: must be -1 or a child index below %d (got %d): %w", i, in.M, c, interfaces.ErrInvalid)
			}
		}
	}
	if in.Bytes != nil {
		if len(in.Bytes) != in.N {
			return fmt.Errorf("exact: bytes: must have %d entries (got %d): %w", in.N, len(in.Bytes), interfaces.ErrInvalid)
		}
		for i, b := range in.Bytes {
			if b < 0 {
				return fmt.Errorf("exact: bytes[%d]: must be ≥ 0 (got %d): %w", i, b, interfaces.ErrInvalid)
			}
		}
	}
	if in.Groups != nil {
		if len(in.Groups) != in.N {
			return fmt.Errorf("exact: groups: must have %d entries (got %d): %w", in.N, len(in.Groups), interfaces.ErrInvalid)
		}
		for i, gs := range in.Groups {
			for _, g := range gs {
				if g < 0 || g >= len(in.GroupMax) {
					return fmt.Errorf("exact: groups[%d]: must hold group indexes below %d (got %d): %w", i, len(in.GroupMax), g, interfaces.ErrInvalid)
				}
			}
		}
	}
	if in.Base != nil {
		if len(in.Base) != in.M {
			return fmt.Errorf("exact: base: must have %d rows (got %d): %w", in.M, len(in.Base), interfaces.ErrInvalid)
		}
		for j, row := range in.Base {
			if len(row) != in.R {
				return fmt.Errorf("exact: base[%d]: must have %d resources (got %d): %w", j, in.R, len(row), interfaces.ErrInvalid)
			}
			for k, v := range row {
				if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
					return fmt.Errorf("exact: base[%d][%d]: must be finite and ≥ 0 (got %v): %w", j, k, v, interfaces.ErrInvalid)
				}
			}
		}
	}
	if in.BaseGroups != nil {
		if len(in.BaseGroups) != len(in.GroupMax) {
			return fmt.Errorf("exact: base_groups: must have %d rows (got %d): %w", len(in.GroupMax), len(in.BaseGroups), interfaces.ErrInvalid)
		}
		for g, row := range in.BaseGroups {
			if len(row) != in.M {
				return fmt.Errorf("exact: base_groups[%d]: must have %d children (got %d): %w", g, in.M, len(row), interfaces.ErrInvalid)
			}
			for j, c := range row {
				if c < 0 {
					return fmt.Errorf("exact: base_groups[%d][%d]: must be ≥ 0 (got %d): %w", g, j, c, interfaces.ErrInvalid)
				}
			}
		}
	}
	for g, mx := range in.GroupMax {
		if mx < 0 {
			return fmt.Errorf("exact: group_max[%d]: must be ≥ 0 (got %d): %w", g, mx, interfaces.ErrInvalid)
		}
	}
	return nil
}

// exactSearch is the state of one branch-and-bound run.
type exactSearch struct {
	in       *exactInstance
	n, m, r  int
	order    []int       // shards in branching order
	feasible [][]bool    // [i][j]: allowed and fits alone
	load     [][]float64 // [i][k]
	capa     []float64   // [j*r+k]
	limit    []float64   // [j*r+k]
	cur      []int       // [i]
	bytes    []int64     // [i]
	groups   [][]int     // [i]
	gmax     []int
	base     []float64 // [j*r+k]: load of shards outside the search
	gbase    []int     // [g*m+j]: their group counts

	// suffix data by depth d (shards order[d:] remain)
	remLoad [][]float64 // [d][k]
	usable  [][]bool    // [d][j]: some remaining shard may use j
	// symmetry
	class    []int // [j]: equivalence class of child j (children with equal data and nothing on them now)
	sameNext []bool

	// node state
	L       []float64 // [j*r+k] load on child j
	count   []int     // [j] shards on child j
	gcount  []int     // [g*m+j]
	assign  []int     // [i]
	moves   int
	bytesMv int64

	// incumbent
	best      []int
	bestT     float64
	bestMoves int
	bestBytes int64
	haveBest  bool

	rootBound float64
	nodes     int64
	maxNodes  int64
	aborted   bool
	lpDepth   int
	stop      func() bool

	scratchU []float64
	scratchC []float64
	scratchS []float64
	stayers  [][]int // [j]: scratch of forced()

	dualDepth int
	dualGap   float64     // re-solve the dual only when the bound is within this fraction of the incumbent
	gam       [][]float64 // [d]: dual weights in force at depth d

	sortedRem [][][]float64 // [d][k]: remaining positive loads of resource k, ascending
	memo      map[string][]exactCost
	keyBuf    []byte
}

// isMove reports whether putting shard i on child j counts as a move.
func (s *exactSearch) isMove(i, j int) bool {
	c := s.cur[i]
	if c < 0 {
		return s.in.CountPlacements
	}
	return c != j
}

// solveExact runs the branch-and-bound.
func solveExact(in *exactInstance, opt exactOptions) (exactOutcome, error) {
	if err := in.validate(); err != nil {
		return exactOutcome{}, err
	}
	s := newExactSearch(in, opt)
	out := exactOutcome{RootLP: math.NaN()}

	// Shards with no feasible child make the instance infeasible at once.
	for i := 0; i < s.n; i++ {
		ok := false
		for j := 0; j < s.m; j++ {
			ok = ok || s.feasible[i][j]
		}
		if !ok {
			out.NoChild = append(out.NoChild, i)
		}
	}
	if len(out.NoChild) > 0 {
		out.Status = exactInfeasible
		out.Bound = math.Inf(1)
		return out, nil
	}

	tp0 := 0.0
	for j := 0; j < s.m; j++ {
		for k := 0; k < s.r; k++ {
			tp0 = math.Max(tp0, s.util(j, k, s.base[j*s.r+k]))
		}
	}
	comb := s.combBound(0, tp0)
	out.RootComb = comb
	s.rootBound = comb
	if s.dualDepth > 0 {
		s.gam[0] = s.dualWeights(0)
		if v := s.dualBound(0, s.gam[0]); v > s.rootBound {
			s.rootBound = v
		}
	}
	out.RootDual = s.dualBound(0, s.gam[0])
	s.seedIncumbent()
	s.improveIncumbents()
	if s.lpDepth > 0 || (s.lpDepth == 0 && s.lpMayHelp()) {
		if v, ok := s.lpBound(0); ok {
			out.RootLP = v
			if v > s.rootBound {
				s.rootBound = v
			}
		}
	}
	s.dfs(0, tp0)

	out.Nodes = s.nodes
	switch {
	case s.haveBest && !s.aborted:
		out.Status = exactOptimal
	case s.haveBest:
		out.Status = exactNotProven
	case !s.aborted:
		out.Status = exactInfeasible
	default:
		out.Status = exactUnknown
	}
	if s.haveBest {
		out.Assign = append([]int(nil), s.best...)
		out.T, out.Moves, out.Bytes = s.bestT, s.bestMoves, s.bestBytes
	}
	switch out.Status {
	case exactOptimal:
		out.Bound = out.T
	case exactInfeasible:
		out.Bound = math.Inf(1)
	default:
		out.Bound = s.rootBound
	}
	return out, nil
}

func newExactSearch(in *exactInstance, opt exactOptions) *exactSearch {
	n, m, r := in.N, in.M, in.R
	s := &exactSearch{in: in, n: n, m: m, r: r, lpDepth: opt.LPDepth, maxNodes: opt.MaxNodes, dualDepth: opt.DualDepth, stop: opt.Stop, dualGap: opt.DualGap}
	if s.dualDepth == 0 {
		s.dualDepth = n + 1
	}
	// The LPs are dense: past these sizes they would cost too much memory/time.
	if (n+m*r+1)*(n*m+m*r+2) > exactMaxDualTableau {
		s.dualDepth = -1
	}
	if (n+2*m*r+1)*(n*m+2*m*r+2) > exactMaxLPEntries {
		s.lpDepth = -1
	}
	s.gam = make([][]float64, n+1)
	if s.maxNodes <= 0 {
		s.maxNodes = exactDefaultMaxNodes
	}
	s.load = in.Load
	s.capa = make([]float64, m*r)
	s.limit = make([]float64, m*r)
	for j := 0; j < m; j++ {
		for k := 0; k < r; k++ {
			s.capa[j*r+k] = in.Cap[j][k]
			if in.Limit != nil {
				s.limit[j*r+k] = in.Limit[j][k]
				if in.Cap[j][k] == 0 {
					s.limit[j*r+k] = 0
				}
			} else {
				s.limit[j*r+k] = in.Cap[j][k]
			}
		}
	}
	s.cur = make([]int, n)
	s.bytes = make([]int64, n)
	s.groups = make([][]int, n)
	for i := 0; i < n; i++ {
		s.cur[i] = -1
		if in.Current != nil {
			s.cur[i] = in.Current[i]
		}
		if in.Bytes != nil {
			s.bytes[i] = in.Bytes[i]
		}
		if in.Groups != nil {
			s.groups[i] = in.Groups[i]
		}
	}
	s.gmax = in.GroupMax
	s.base = make([]float64, m*r)
	s.gbase = make([]int, len(s.gmax)*m)
	for j := 0; j < m; j++ {
		for k := 0; k < r; k++ {
			if in.Base != nil {
				s.base[j*r+k] = in.Base[j][k]
			}
		}
		for g := range s.gmax {
			if in.BaseGroups != nil {
				s.gbase[g*m+j] = in.BaseGroups[g][j]
			}
		}
	}
	s.feasible = make([][]bool, n)
	for i := 0; i < n; i++ {
		s.feasible[i] = make([]bool, m)
		for j := 0; j < m; j++ {
			if in.Allowed != nil && !in.Allowed[i][j] {
				continue
			}
			if s.groupFull(i, j, s.gbase) {
				continue
			}
			fits := true
			for k := 0; k < r; k++ {
				if exactOver(s.base[j*r+k]+s.load[i][k], s.limit[j*r+k]) || (s.capa[j*r+k] == 0 && s.load[i][k] > 0) {
					fits = false
					break
				}
			}
			s.feasible[i][j] = fits
		}
	}

	// Branching order: forced shards (one feasible child) first, then by size
	// (largest normalized demand first), ties by index.
	avgCap := make([]float64, r)
	for k := 0; k < r; k++ {
		for j := 0; j < m; j++ {
			avgCap[k] += s.capa[j*r+k]
		}
		avgCap[k] /= float64(m)
	}
	size := make([]float64, n)
	nfeas := make([]int, n)
	for i := 0; i < n; i++ {
		for k := 0; k < r; k++ {
			if avgCap[k] > 0 {
				size[i] = math.Max(size[i], s.load[i][k]/avgCap[k])
			}
		}
		for j := 0; j < m; j++ {
			if s.feasible[i][j] {
				nfeas[i]++
			}
		}
	}
	s.order = make([]int, n)
	for i := range s.order {
		s.order[i] = i
	}
	sort.SliceStable(s.order, func(a, b int) bool {
		ia, ib := s.order[a], s.order[b]
		fa, fb := nfeas[ia] == 1, nfeas[ib] == 1
		if fa != fb {
			return fa
		}
		if size[ia] != size[ib] {
			return size[ia] > size[ib]
		}
		return ia < ib
	})

	// Suffix data.
	s.remLoad = make([][]float64, n+1)
	s.usable = make([][]bool, n+1)
	s.remLoad[n] = make([]float64, r)
	s.usable[n] = make([]bool, m)
	for d := n - 1; d >= 0; d-- {
		i := s.order[d]
		s.remLoad[d] = make([]float64, r)
		s.usable[d] = make([]bool, m)
		for k := 0; k < r; k++ {
			s.remLoad[d][k] = s.remLoad[d+1][k] + s.load[i][k]
		}
		for j := 0; j < m; j++ {
			s.usable[d][j] = s.usable[d+1][j] || s.feasible[i][j]
		}
	}

	// Child symmetry: children with equal capacity, limit and feasibility column
	// and no shard on them now are interchangeable.
	s.class = make([]int, m)
	occupied := make([]bool, m)
	for i := 0; i < n; i++ {
		if s.cur[i] >= 0 {
			occupied[s.cur[i]] = true
		}
	}
	for j := 0; j < m; j++ {
		s.class[j] = j
		if occupied[j] {
			continue
		}
		for j2 := 0; j2 < j; j2++ {
			if occupied[j2] || s.class[j2] != j2 {
				continue
			}
			if s.sameChild(j, j2) {
				s.class[j] = j2
				break
			}
		}
	}
	// Shard symmetry: consecutive shards in the order that are identical in every
	// respect take non-decreasing children.
	s.sameNext = make([]bool, n)
	for d := 0; d+1 < n; d++ {
		s.sameNext[d] = s.sameShard(s.order[d], s.order[d+1])
	}

	s.L = append([]float64(nil), s.base...)
	s.count = make([]int, m)
	s.gcount = append([]int(nil), s.gbase...)
	s.assign = make([]int, n)
	for i := range s.assign {
		s.assign[i] = -1
	}
	s.scratchU = make([]float64, m)
	s.scratchC = make([]float64, m)
	s.stayers = make([][]int, m)
	s.prepPrune()
	return s
}

func (s *exactSearch) sameChild(a, b int) bool {
	for k := 0; k < s.r; k++ {
		if s.capa[a*s.r+k] != s.capa[b*s.r+k] || s.limit[a*s.r+k] != s.limit[b*s.r+k] || s.base[a*s.r+k] != s.base[b*s.r+k] {
			return false
		}
	}
	for g := range s.gmax {
		if s.gbase[g*s.m+a] != s.gbase[g*s.m+b] {
			return false
		}
	}
	for i := 0; i < s.n; i++ {
		if s.feasible[i][a] != s.feasible[i][b] {
			return false
		}
	}
	return true
}

func (s *exactSearch) sameShard(a, b int) bool {
	if s.cur[a] != s.cur[b] || s.bytes[a] != s.bytes[b] || len(s.groups[a]) != len(s.groups[b]) {
		return false
	}
	for x, g := range s.groups[a] {
		if s.groups[b][x] != g {
			return false
		}
	}
	for k := 0; k < s.r; k++ {
		if s.load[a][k] != s.load[b][k] {
			return false
		}
	}
	for j := 0; j < s.m; j++ {
		if s.feasible[a][j] != s.feasible[b][j] {
			return false
		}
	}
	return true
}

// groupFull reports whether one of shard i's groups is at its limit on child j
// given the counts gc ([g*m+j]; nil means all zero).
func (s *exactSearch) groupFull(i, j int, gc []int) bool {
	for _, g := range s.groups[i] {
		c := 0
		if gc != nil {
			c = gc[g*s.m+j]
		}
		if c >= s.gmax[g] {
			return true
		}
	}
	return false
}

// util returns child j's utilization of resource k given load x.
func (s *exactSearch) util(j, k int, x float64) float64 {
	c := s.capa[j*s.r+k]
	if c == 0 {
		return 0
	}
	return x / c
}

// combBound is a lower bound on T for any completion of the node at depth d whose
// partial bottleneck is tp: per resource, the level to which the remaining load
// fills the children that may still take it, poured like water.
func (s *exactSearch) combBound(d int, tp float64) float64 {
	b := tp
	// Every remaining shard lands somewhere: on its best child it lifts that
	// child's bottleneck to at least this.
	for _, i := range s.order[d:] {
		best := math.Inf(1)
		for j := 0; j < s.m && best > b; j++ {
			if !s.feasible[i][j] {
				continue
			}
			u := 0.0
			for k := 0; k < s.r; k++ {
				u = math.Max(u, s.util(j, k, s.L[j*s.r+k]+s.load[i][k]))
			}
			best = math.Min(best, u)
		}
		if best > b {
			b = best
		}
	}
	for k := 0; k < s.r; k++ {
		rem := s.remLoad[d][k]
		if rem <= 0 {
			continue
		}
		// children that may take load of k, sorted by current utilization
		u, c := s.scratchU[:0], s.scratchC[:0]
		for j := 0; j < s.m; j++ {
			cp := s.capa[j*s.r+k]
			if !s.usable[d][j] || cp == 0 {
				continue
			}
			x := s.L[j*s.r+k] / cp
			// insertion sort (m is small)
			p := len(u)
			u, c = append(u, x), append(c, cp)
			for p > 0 && u[p-1] > x {
				u[p], c[p] = u[p-1], c[p-1]
				p--
			}
			u[p], c[p] = x, cp
		}
		if len(u) == 0 {
			return math.Inf(1)
		}
		var sumC, sumL float64
		lvl := math.Inf(1)
		for p := range u {
			sumC += c[p]
			sumL += u[p] * c[p]
			lvl = (rem + sumL) / sumC
			if p+1 == len(u) || lvl <= u[p+1] {
				break
			}
		}
		if lvl > b {
			b = lvl
		}
	}
	return b
}

// better reports whether (t, mv, by) beats the incumbent.
func (s *exactSearch) better(t float64, mv int, by int64) bool {
	if !s.haveBest {
		return true
	}
	if t < s.bestT-exactEps {
		return true
	}
	if t > s.bestT+exactEps {
		return false
	}
	if mv != s.bestMoves {
		return mv < s.bestMoves
	}
	return by < s.bestBytes
}

// record offers a complete assignment as the incumbent.
func (s *exactSearch) record(assign []int, t float64, mv int, by int64) {
	if !s.better(t, mv, by) {
		return
	}
	if s.best == nil {
		s.best = make([]int, s.n)
	}
	copy(s.best, assign)
	s.bestT, s.bestMoves, s.bestBytes, s.haveBest = t, mv, by, true
}

// seedIncumbent offers the current assignment, with unplaced shards added on the
// least-utilized feasible child, as a first incumbent when it is feasible.
func (s *exactSearch) seedIncumbent() {
	L := append([]float64(nil), s.base...)
	gc := append([]int(nil), s.gbase...)
	assign := make([]int, s.n)
	mv, by := 0, int64(0)
	put := func(i, j int) bool {
		for k := 0; k < s.r; k++ {
			if exactOver(L[j*s.r+k]+s.load[i][k], s.limit[j*s.r+k]) {
				return false
			}
		}
		if s.groupFull(i, j, gc) {
			return false
		}
		for k := 0; k < s.r; k++ {
			L[j*s.r+k] += s.load[i][k]
		}
		for _, g := range s.groups[i] {
			gc[g*s.m+j]++
		}
		assign[i] = j
		if s.isMove(i, j) {
			mv++
			by += s.bytes[i]
		}
		return true
	}
	for _, i := range s.order {
		if j := s.cur[i]; j >= 0 {
			if !s.feasible[i][j] || !put(i, j) {
				return
			}
		}
	}
	for _, i := range s.order {
		if s.cur[i] >= 0 {
			continue
		}
		bj, bu := -1, math.Inf(1)
		for j := 0; j < s.m; j++ {
			if !s.feasible[i][j] {
				continue
			}
			u := 0.0
			for k := 0; k < s.r; k++ {
				u = math.Max(u, s.util(j, k, L[j*s.r+k]+s.load[i][k]))
			}
			if u < bu {
				bj, bu = j, u
			}
		}
		if bj < 0 || !put(i, bj) {
			return
		}
	}
	if (s.in.MaxMoves >= 0 && mv > s.in.MaxMoves) || (s.in.MaxBytes >= 0 && by > s.in.MaxBytes) {
		return
	}
	t := 0.0
	for j := 0; j < s.m; j++ {
		for k := 0; k < s.r; k++ {
			t = math.Max(t, s.util(j, k, L[j*s.r+k]))
		}
	}
	s.record(assign, t, mv, by)
}

// forced counts the remaining shards (depth ≥ d) that must move: with hard set,
// those that cannot stay on their current child (not feasible or over its limit
// given the node's loads); otherwise also those whose staying would lift T above
// the incumbent's.
func (s *exactSearch) forced(d int, hard bool) (int, int64) {
	mv, by := 0, int64(0)
	for e := d; e < s.n; e++ {
		i := s.order[e]
		j := s.cur[i]
		if j < 0 {
			if s.in.CountPlacements {
				mv++
				by += s.bytes[i]
			}
			continue
		}
		must := !s.feasible[i][j]
		if !must {
			must = s.groupFull(i, j, s.gcount)
		}
		for k := 0; k < s.r && !must; k++ {
			x := s.L[j*s.r+k] + s.load[i][k]
			lim := s.limit[j*s.r+k]
			if exactOver(x, lim) {
				must = true
			} else if !hard && s.util(j, k, x) > s.bestT+exactEps {
				must = true
			}
		}
		if must {
			mv++
			by += s.bytes[i]
		} else {
			s.stayers[j] = append(s.stayers[j], i)
		}
	}
	// The shards that may stay on their current child must also fit there
	// together: at least as many of them as the fewest (the largest first)
	// whose departure makes the rest fit, on some resource, must leave.
	for j := 0; j < s.m; j++ {
		st := s.stayers[j]
		if len(st) == 0 {
			continue
		}
		extra := 0
		for k := 0; k < s.r; k++ {
			xs := s.scratchS[:0]
			sum := s.L[j*s.r+k]
			for _, i := range st {
				if w := s.load[i][k]; w > 0 {
					xs = append(xs, w)
					sum += w
				}
			}
			over := func(x float64) bool {
				return exactOver(x, s.limit[j*s.r+k]) || (!hard && s.util(j, k, x) > s.bestT+exactEps)
			}
			if !over(sum) {
				continue
			}
			sort.Sort(sort.Reverse(sort.Float64Slice(xs)))
			c := 0
			for c < len(xs) && over(sum) {
				sum -= xs[c]
				c++
			}
			if c > extra {
				extra = c
			}
			s.scratchS = xs
		}
		mv += extra
		s.stayers[j] = st[:0]
	}
	return mv, by
}

// lpMayHelp reports whether the full LP relaxation at the root can be stronger
// than the dual bound, which has only the assignment and utilization rows: when
// the incumbent is not yet proven optimal and there are anti-affinity groups, a
// move budget, or a limit below the incumbent's utilization.
func (s *exactSearch) lpMayHelp() bool {
	if s.haveBest && s.rootBound >= s.bestT-exactEps {
		return false
	}
	if s.in.MaxMoves >= 0 || s.in.MaxBytes >= 0 {
		return true
	}
	for _, gs := range s.groups {
		if len(gs) > 0 {
			return true
		}
	}
	t := math.Inf(1)
	if s.haveBest {
		t = s.bestT
	}
	for jk, lim := range s.limit {
		if lim < t*s.capa[jk] {
			return true
		}
	}
	return false
}

// prune reports whether a node at depth d whose completions all have T ≥ lb can
// be skipped: it cannot beat the incumbent's T, nor tie it with fewer moves or
// bytes.
func (s *exactSearch) prune(d int, lb float64) bool {
	if !s.haveBest {
		return math.IsInf(lb, 1)
	}
	if lb > s.bestT+exactEps {
		return true
	}
	if lb >= s.bestT-exactEps {
		// Only a tie on T is possible: moves and bytes decide.
		fm, fb := s.forced(d, false)
		if s.moves+fm > s.bestMoves || (s.moves+fm == s.bestMoves && s.bytesMv+fb >= s.bestBytes) {
			return true
		}
	}
	return false
}

type exactCand struct {
	j   int
	u   float64
	key float64
	cur bool
}

// dfs explores the node at depth d whose partial bottleneck is tp.
func (s *exactSearch) dfs(d int, tp float64) {
	if s.aborted {
		return
	}
	s.nodes++
	if s.nodes > s.maxNodes || (s.stop != nil && s.nodes&1023 == 0 && s.stop()) {
		s.aborted = true
		return
	}
	if d == s.n {
		s.record(s.assign, tp, s.moves, s.bytesMv)
		return
	}
	// Budget: shards that cannot stay must move.
	if s.in.MaxMoves >= 0 || s.in.MaxBytes >= 0 {
		fm, fb := s.forced(d, true)
		if (s.in.MaxMoves >= 0 && s.moves+fm > s.in.MaxMoves) || (s.in.MaxBytes >= 0 && s.bytesMv+fb > s.in.MaxBytes) {
			return
		}
	}
	// Bounds, cheapest first; each may prune.
	lb := s.combBound(d, tp)
	if s.prune(d, lb) || (s.haveBest && s.wasteInfeasible(d, s.bestT+exactEps)) {
		return
	}
	if d > 0 && s.dualDepth > 0 {
		s.gam[d] = s.gam[d-1]
		if v := s.dualBound(d, s.gam[d]); v > lb {
			lb = v
			if s.prune(d, lb) {
				return
			}
		}
	}
	if s.seen(d) {
		return
	}
	if d > 0 && d < s.dualDepth && (s.dualGap <= 0 || !s.haveBest || d <= 2 || lb >= s.bestT*(1-s.dualGap)) {
		if g := s.dualWeights(d); g != nil {
			s.gam[d] = g
			if v := s.dualBound(d, g); v > lb {
				lb = v
				if s.prune(d, lb) {
					return
				}
			}
		}
	}
	if d > 0 && d <= s.lpDepth {
		if v, ok := s.lpBound(d); ok && v > lb {
			lb = v
			if s.prune(d, lb) {
				return
			}
		}
	}

	i := s.order[d]
	var cands [16]exactCand
	cs := cands[:0]
	lo := 0
	if d > 0 && s.sameNext[d-1] {
		lo = s.assign[s.order[d-1]]
	}
	for j := lo; j < s.m; j++ {
		if !s.feasible[i][j] {
			continue
		}
		if s.groupFull(i, j, s.gcount) {
			continue
		}
		if s.count[j] == 0 && s.class[j] != j {
			// an interchangeable child of lower index that is still empty comes first
			skip := false
			for j2 := s.class[j]; j2 < j; j2++ {
				if s.class[j2] == s.class[j] && s.count[j2] == 0 {
					skip = true
					break
				}
			}
			if skip {
				continue
			}
		}
		u := tp
		ok := true
		for k := 0; k < s.r; k++ {
			x := s.L[j*s.r+k] + s.load[i][k]
			lim := s.limit[j*s.r+k]
			if exactOver(x, lim) {
				ok = false
				break
			}
			u = math.Max(u, s.util(j, k, x))
		}
		if !ok || (s.haveBest && u > s.bestT+exactEps) {
			continue
		}
		cs = append(cs, exactCand{j: j, u: u, key: math.Max(u, s.rootBound), cur: s.cur[i] == j})
	}
	sort.Slice(cs, func(a, b int) bool {
		ca, cb := cs[a], cs[b]
		if ca.key != cb.key {
			return ca.key < cb.key
		}
		if ca.cur != cb.cur {
			return ca.cur
		}
		if ca.u != cb.u {
			return ca.u < cb.u
		}
		return ca.j < cb.j
	})
	for _, c := range cs {
		if s.haveBest && c.u > s.bestT+exactEps {
			continue // the incumbent improved while exploring a sibling
		}
		j := c.j
		mv := s.isMove(i, j)
		if mv {
			if s.in.MaxMoves >= 0 && s.moves+1 > s.in.MaxMoves {
				continue
			}
			if s.in.MaxBytes >= 0 && s.bytesMv+s.bytes[i] > s.in.MaxBytes {
				continue
			}
			s.moves++
			s.bytesMv += s.bytes[i]
		}
		for k := 0; k < s.r; k++ {
			s.L[j*s.r+k] += s.load[i][k]
		}
		s.count[j]++
		for _, g := range s.groups[i] {
			s.gcount[g*s.m+j]++
		}
		s.assign[i] = j

		s.dfs(d+1, c.u)

		s.assign[i] = -1
		for _, g := range s.groups[i] {
			s.gcount[g*s.m+j]--
		}
		s.count[j]--
		for k := 0; k < s.r; k++ {
			s.L[j*s.r+k] -= s.load[i][k]
		}
		if mv {
			s.moves--
			s.bytesMv -= s.bytes[i]
		}
		if s.aborted {
			return
		}
	}
}
