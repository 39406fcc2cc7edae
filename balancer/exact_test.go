package balancer

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/strata-sched/strata/interfaces"
	"pgregory.net/rapid"
)

// genExactInstance draws a small instance with integer loads and capacities (so
// that equal objectives are equal in floating point) and every kind of hard
// constraint: limits below capacity, allowed children, pins, anti-affinity groups,
// move and byte budgets, unplaced shards.
func genExactInstance(t *rapid.T, minN, maxN, maxM int) *exactInstance {
	n := rapid.IntRange(minN, maxN).Draw(t, "n")
	m := rapid.IntRange(1, maxM).Draw(t, "m")
	r := rapid.IntRange(1, 3).Draw(t, "r")
	in := &exactInstance{N: n, M: m, R: r, MaxMoves: -1, MaxBytes: -1}
	in.Cap = make([][]float64, m)
	for j := range in.Cap {
		in.Cap[j] = make([]float64, r)
		for k := range in.Cap[j] {
			in.Cap[j][k] = float64(rapid.IntRange(0, 40).Draw(t, "cap"))
		}
		in.Cap[j][0] = math.Max(in.Cap[j][0], 1) // at least one dimension above zero
	}
	if rapid.Bool().Draw(t, "limits") {
		in.Limit = make([][]float64, m)
		for j := range in.Limit {
			in.Limit[j] = make([]float64, r)
			for k := range in.Limit[j] {
				switch rapid.IntRange(0, 3).Draw(t, "limitKind") {
				case 0:
					in.Limit[j][k] = math.Inf(1)
				case 1:
					in.Limit[j][k] = in.Cap[j][k]
				default:
					in.Limit[j][k] = math.Floor(in.Cap[j][k] * 0.8)
				}
			}
		}
	}
	in.Load = make([][]float64, n)
	for i := range in.Load {
		in.Load[i] = make([]float64, r)
		for k := range in.Load[i] {
			in.Load[i][k] = float64(rapid.IntRange(0, 20).Draw(t, "load"))
		}
	}
	if rapid.Bool().Draw(t, "hasAllowed") {
		in.Allowed = make([][]bool, n)
		for i := range in.Allowed {
			in.Allowed[i] = make([]bool, m)
			pin := rapid.IntRange(-1, m-1).Draw(t, "pin")
			for j := range in.Allowed[i] {
				if pin >= 0 {
					in.Allowed[i][j] = j == pin
				} else {
					in.Allowed[i][j] = rapid.IntRange(0, 4).Draw(t, "allowed") > 0
				}
			}
		}
	}
	in.Current = make([]int, n)
	in.Bytes = make([]int64, n)
	for i := 0; i < n; i++ {
		in.Current[i] = rapid.IntRange(-1, m-1).Draw(t, "current")
		in.Bytes[i] = int64(rapid.IntRange(0, 9).Draw(t, "bytes"))
	}
	if ng := rapid.IntRange(0, 2).Draw(t, "groups"); ng > 0 {
		in.GroupMax = make([]int, ng)
		for g := range in.GroupMax {
			in.GroupMax[g] = rapid.IntRange(1, 3).Draw(t, "groupMax")
		}
		in.Groups = make([][]int, n)
		for i := range in.Groups {
			for g := 0; g < ng; g++ {
				if rapid.IntRange(0, 2).Draw(t, "inGroup") == 0 {
					in.Groups[i] = append(in.Groups[i], g)
				}
			}
		}
	}
	if rapid.Bool().Draw(t, "moveBudget") {
		in.MaxMoves = rapid.IntRange(0, n).Draw(t, "maxMoves")
	}
	if rapid.Bool().Draw(t, "byteBudget") {
		in.MaxBytes = int64(rapid.IntRange(0, 30).Draw(t, "maxBytes"))
	}
	if rapid.IntRange(0, 3).Draw(t, "hasBase") == 0 {
		in.Base = make([][]float64, m)
		for j := range in.Base {
			in.Base[j] = make([]float64, r)
			for k := range in.Base[j] {
				in.Base[j][k] = float64(rapid.IntRange(0, 15).Draw(t, "base"))
			}
		}
		if len(in.GroupMax) > 0 {
			in.BaseGroups = make([][]int, len(in.GroupMax))
			for g := range in.BaseGroups {
				in.BaseGroups[g] = make([]int, m)
				for j := range in.BaseGroups[g] {
					in.BaseGroups[g][j] = rapid.IntRange(0, 1).Draw(t, "baseGroup")
				}
			}
		}
	}
	in.CountPlacements = rapid.Bool().Draw(t, "countPlacements")
	return in
}

// TestExactMatchesBruteForce: on every generated small instance, the exact solver
// (with the LP never, at the root, and at every node) finds the same lexicographic
// optimum (T, moves, bytes) as enumerating all assignments, its assignment meets
// every hard constraint, and the root bounds never exceed the optimum.
func TestExactMatchesBruteForce(t *testing.T) {
	t.Run("any", func(t *testing.T) { rapid.Check(t, checkExactVsBrute(0)) })
	t.Run("large", func(t *testing.T) { rapid.Check(t, checkExactVsBrute(6)) })
}

// checkExactVsBrute compares on instances of at least minN shards.
func checkExactVsBrute(minN int) func(*rapid.T) {
	return func(t *rapid.T) {
		in := genExactInstance(t, minN, 8, 3)
		want := bruteForce(in)
		for _, opt := range []exactOptions{{LPDepth: -1, DualDepth: -1}, {}, {LPDepth: in.N, DualDepth: 1}} {
			lpDepth := opt.LPDepth
			got, err := solveExact(in, opt)
			if err != nil {
				t.Fatalf("lpDepth %d: %v", lpDepth, err)
			}
			if !want.Feasible {
				if got.Status != exactInfeasible {
					t.Fatalf("lpDepth %d: brute force finds no feasible assignment, exact says %v with %v", lpDepth, got.Status, got.Assign)
				}
				continue
			}
			if got.Status != exactOptimal {
				t.Fatalf("lpDepth %d: status %v, want optimal (brute force: %+v)", lpDepth, got.Status, want)
			}
			if math.Abs(got.T-want.T) > 1e-9 || got.Moves != want.Moves || got.Bytes != want.Bytes {
				t.Fatalf("lpDepth %d: exact (T=%v moves=%d bytes=%d %v) ≠ brute force (T=%v moves=%d bytes=%d %v)",
					lpDepth, got.T, got.Moves, got.Bytes, got.Assign, want.T, want.Moves, want.Bytes, want.Assign)
			}
			limit := func(j, k int) float64 {
				if in.Cap[j][k] == 0 {
					return 0
				}
				if in.Limit == nil {
					return in.Cap[j][k]
				}
				return in.Limit[j][k]
			}
			tt, mv, by, ok := bruteEval(in, got.Assign, limit)
			if !ok || math.Abs(tt-got.T) > 1e-9 || mv != got.Moves || by != got.Bytes {
				t.Fatalf("lpDepth %d: exact's assignment %v re-evaluates to ok=%v T=%v moves=%d bytes=%d, reported T=%v moves=%d bytes=%d",
					lpDepth, got.Assign, ok, tt, mv, by, got.T, got.Moves, got.Bytes)
			}
			if got.RootComb > want.T+1e-9 {
				t.Fatalf("combinatorial root bound %v exceeds the optimum %v", got.RootComb, want.T)
			}
			if lpDepth >= 0 && !math.IsNaN(got.RootLP) && got.RootLP > want.T+1e-6 {
				t.Fatalf("LP root bound %v exceeds the optimum %v", got.RootLP, want.T)
			}
			if got.RootDual > want.T+1e-9 {
				t.Fatalf("dual root bound %v exceeds the optimum %v", got.RootDual, want.T)
			}
		}
	}
}

// TestExactLPBoundBelowOptimum checks the LP relaxation on its own, on instances
// without move budgets (where it is solved most often): it is solved, it is at
// least the plain average-load bound Σload/Σcap of each resource when every
// child may take every shard, and it never exceeds the optimum.
func TestExactLPBoundBelowOptimum(t *testing.T) {
	solved := 0
	rapid.Check(t, func(t *rapid.T) {
		in := genExactInstance(t, 0, 7, 3)
		in.Allowed, in.Limit, in.Groups, in.GroupMax = nil, nil, nil, nil
		in.MaxMoves, in.MaxBytes = -1, -1
		want := bruteForce(in)
		s := newExactSearch(in, exactOptions{})
		v, ok := s.lpBound(0)
		if !ok {
			// nothing to bound: every load is zero or every shard is unplaceable
			return
		}
		solved++
		if want.Feasible && v > want.T+1e-6 {
			t.Fatalf("LP bound %v exceeds the optimum %v", v, want.T)
		}
		for k := 0; k < in.R; k++ {
			var sl, sc float64
			for i := 0; i < in.N; i++ {
				sl += in.Load[i][k]
			}
			for j := 0; j < in.M; j++ {
				sc += in.Cap[j][k]
			}
			if sc > 0 && v < sl/sc-1e-6 {
				t.Fatalf("LP bound %v below the average-load bound %v of resource %d", v, sl/sc, k)
			}
		}
	})
	if solved == 0 {
		t.Fatal("the LP was never solved")
	}
}

func TestExactValidate(t *testing.T) {
	base := func() *exactInstance {
		return &exactInstance{N: 1, M: 1, R: 1, Load: [][]float64{{1}}, Cap: [][]float64{{2}}, MaxMoves: -1, MaxBytes: -1}
	}
	cases := []struct {
		name  string
		edit  func(in *exactInstance)
		field string
	}{
		{"negative load", func(in *exactInstance) { in.Load[0][0] = -1 }, "load[0][0]"},
		{"NaN capacity", func(in *exactInstance) { in.Cap[0][0] = math.NaN() }, "cap[0][0]"},
		{"no children", func(in *exactInstance) { in.M = 0; in.Cap = nil }, "sizes"},
		{"current out of range", func(in *exactInstance) { in.Current = []int{3} }, "current[0]"},
		{"group out of range", func(in *exactInstance) { in.Groups = [][]int{{0}} }, "groups[0]"},
		{"short allowed row", func(in *exactInstance) { in.Allowed = [][]bool{{}} }, "allowed[0]"},
		{"negative bytes", func(in *exactInstance) { in.Bytes = []int64{-5} }, "bytes[0]"},
	}
	for _, c := range cases {
		in := base()
		c.edit(in)
		_, err := solveExact(in, exactOptions{})
		if err == nil || !errors.Is(err, interfaces.ErrInvalid) {
			t.Errorf("%s: got %v, want an error wrapping ErrInvalid", c.name, err)
			continue
		}
		if !contains(err.Error(), c.field) {
			t.Errorf("%s: error %q does not name %q", c.name, err, c.field)
		}
	}
	if _, err := solveExact(base(), exactOptions{}); err != nil {
		t.Errorf("valid instance: %v", err)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestExactNoChild: a shard that fits on no allowed child makes the outcome
// infeasible before any search, naming the shard.
func TestExactNoChild(t *testing.T) {
	in := &exactInstance{N: 2, M: 2, R: 1, MaxMoves: -1, MaxBytes: -1,
		Load:    [][]float64{{1}, {5}},
		Cap:     [][]float64{{4}, {10}},
		Allowed: [][]bool{{true, true}, {true, false}},
	}
	out, err := solveExact(in, exactOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != exactInfeasible || len(out.NoChild) != 1 || out.NoChild[0] != 1 {
		t.Fatalf("got status %v no-child %v, want infeasible with shard 1", out.Status, out.NoChild)
	}
}

// TestExactNodeLimit: a search cut by the node limit says so, keeps a feasible
// incumbent and a bound below it; the full search proves an optimum at least as
// good.
func TestExactNodeLimit(t *testing.T) {
	in := randomExactInstance(20, 4, 2, 2)
	out, err := solveExact(in, exactOptions{MaxNodes: 50})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != exactNotProven {
		t.Fatalf("status %v after %d nodes, want not_proven", out.Status, out.Nodes)
	}
	if out.Assign == nil || out.Bound > out.T+1e-9 {
		t.Fatalf("incumbent %v with T=%v, bound %v", out.Assign, out.T, out.Bound)
	}
	full, err := solveExact(in, exactOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if full.Status != exactOptimal {
		t.Fatalf("full search: status %v after %d nodes", full.Status, full.Nodes)
	}
	if full.T > out.T+1e-9 || full.Bound < out.Bound-1e-9 {
		t.Fatalf("full search T=%v (bound %v) worse than the cut one T=%v (bound %v)", full.T, full.Bound, out.T, out.Bound)
	}
}

// TestExactSymmetricChildren: many identical empty children must not blow the
// search up, and the optimum spreads equal shards one per child.
func TestExactSymmetricChildren(t *testing.T) {
	const n, m = 12, 6
	in := &exactInstance{N: n, M: m, R: 1, MaxMoves: -1, MaxBytes: -1}
	for i := 0; i < n; i++ {
		in.Load = append(in.Load, []float64{float64(1 + i%3)})
	}
	for j := 0; j < m; j++ {
		in.Cap = append(in.Cap, []float64{10})
	}
	out, err := solveExact(in, exactOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// 24 units over 6 children of 10: {3,1} on four children and {2,2} on two
	if out.Status != exactOptimal || math.Abs(out.T-0.4) > 1e-9 {
		t.Fatalf("status %v T=%v nodes=%d, want optimal T=0.4", out.Status, out.T, out.Nodes)
	}
	if out.Nodes > 10000 {
		t.Fatalf("%d nodes for a symmetric instance: symmetry breaking is not working", out.Nodes)
	}
}

// TestExactMediumInstances: on 20-30 shards × 3-5 children, within a small node
// limit (larger runs are in BenchmarkExactSizes), the result is consistent whatever the status: a feasible assignment no
// worse than the current one (which is feasible here), and bounds that never
// exceed it. The benchmark instance (20×4, seed 2) must be proven optimal.
func TestExactMediumInstances(t *testing.T) {
	for _, sz := range []struct{ n, m int }{{20, 3}, {25, 4}, {30, 5}} {
		for seed := uint64(1); seed <= 2; seed++ {
			in := randomExactInstance(sz.n, sz.m, 2, seed)
			out, err := solveExact(in, exactOptions{MaxNodes: 300})
			if err != nil {
				t.Fatal(err)
			}
			if out.Status != exactOptimal && out.Status != exactNotProven {
				t.Errorf("%d×%d seed %d: status %v", sz.n, sz.m, seed, out.Status)
				continue
			}
			curT := 0.0
			sum := make([][]float64, in.M)
			for j := range sum {
				sum[j] = make([]float64, in.R)
			}
			for i, j := range in.Current {
				for k := 0; k < in.R; k++ {
					sum[j][k] += in.Load[i][k]
				}
			}
			for j := range sum {
				for k := range sum[j] {
					curT = math.Max(curT, sum[j][k]/in.Cap[j][k])
				}
			}
			tt, _, _, ok := bruteEval(in, out.Assign, func(j, k int) float64 { return in.Cap[j][k] })
			if !ok || math.Abs(tt-out.T) > 1e-9 {
				t.Errorf("%d×%d seed %d: assignment re-evaluates to ok=%v T=%v, reported %v", sz.n, sz.m, seed, ok, tt, out.T)
			}
			if out.T > curT+1e-9 {
				t.Errorf("%d×%d seed %d: T=%v worse than the current assignment's %v", sz.n, sz.m, seed, out.T, curT)
			}
			for name, b := range map[string]float64{"bound": out.Bound, "comb": out.RootComb, "dual": out.RootDual} {
				if b > out.T+1e-9 {
					t.Errorf("%d×%d seed %d: %s %v above T=%v", sz.n, sz.m, seed, name, b, out.T)
				}
			}
			if !math.IsNaN(out.RootLP) && out.RootLP > out.T+1e-6 {
				t.Errorf("%d×%d seed %d: LP bound %v above T=%v", sz.n, sz.m, seed, out.RootLP, out.T)
			}
		}
	}
	out, err := solveExact(randomExactInstance(20, 4, 2, 2), exactOptions{})
	if err != nil || out.Status != exactOptimal {
		t.Fatalf("20×4 seed 2: %v, status %v after %d nodes", err, out.Status, out.Nodes)
	}
}

// randomExactInstance builds a reproducible instance: Zipf-like skewed loads
// (largest/smallest ≈ 20×), capacities varying ±20%, every shard on a random
// child, no limit beyond capacity.
func randomExactInstance(n, m, r int, seed uint64) *exactInstance {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	in := &exactInstance{N: n, M: m, R: r, MaxMoves: -1, MaxBytes: -1}
	total := make([]float64, r)
	for i := 0; i < n; i++ {
		row := make([]float64, r)
		for k := range row {
			// 1/(rank)^1 over ranks 1..20 gives a 20× spread
			row[k] = math.Round(100/float64(1+rng.IntN(20))) + float64(rng.IntN(3))
			total[k] += row[k]
		}
		in.Load = append(in.Load, row)
		in.Current = append(in.Current, rng.IntN(m))
		in.Bytes = append(in.Bytes, int64(1+rng.IntN(100)))
	}
	for j := 0; j < m; j++ {
		row := make([]float64, r)
		for k := range row {
			// room for everything with ~40% to spare, ±20% per child
			row[k] = math.Round(total[k] * 1.4 / float64(m) * (0.8 + 0.4*rng.Float64()))
		}
		in.Cap = append(in.Cap, row)
	}
	return in
}

func BenchmarkExact20x4(b *testing.B) {
	in := randomExactInstance(20, 4, 2, 2)
	var nodes int64
	for i := 0; i < b.N; i++ {
		out, err := solveExact(in, exactOptions{})
		if err != nil || out.Status != exactOptimal {
			b.Fatalf("%v %v", err, out.Status)
		}
		nodes = out.Nodes
	}
	b.ReportMetric(float64(nodes), "nodes/op")
}

// BenchmarkExactSizes runs the search on 20-30 shards × 3-5 children (two
// resources, seeds 1-3) with a node limit of 200 000 and reports the nodes and
// whether the optimum was proven (1) or not (0).
func BenchmarkExactSizes(b *testing.B) {
	for _, sz := range []struct{ n, m int }{{20, 3}, {20, 4}, {25, 4}, {30, 5}} {
		for seed := uint64(1); seed <= 3; seed++ {
			b.Run(fmt.Sprintf("%dx%d/seed%d", sz.n, sz.m, seed), func(b *testing.B) {
				in := randomExactInstance(sz.n, sz.m, 2, seed)
				var out exactOutcome
				for i := 0; i < b.N; i++ {
					var err error
					out, err = solveExact(in, exactOptions{MaxNodes: 200_000})
					if err != nil {
						b.Fatal(err)
					}
				}
				proven := 0.0
				if out.Status == exactOptimal {
					proven = 1
				}
				b.ReportMetric(float64(out.Nodes), "nodes/op")
				b.ReportMetric(proven, "proven")
				b.ReportMetric(out.T/out.Bound, "T/bound")
			})
		}
	}
}

// problemObjective is the exact solver's objective of a complete assignment,
// computed from the Problem directly: the bottleneck utilization, the moves and
// their bytes (as CheckHard counts them).
func problemObjective(p *Problem, assign []int32) (t float64, moves int, bytes int64) {
	R := p.NumResources()
	load := childLoads(p, assign)
	for c := 0; c < p.NumChildren(); c++ {
		for r := 0; r < R; r++ {
			t = math.Max(t, util(load[c*R+r], p.Capacity[c*R+r]))
		}
	}
	for s, c := range assign {
		if c >= 0 && c != p.Current[s] {
			moves++
			bytes += p.Bytes(s)
		}
	}
	return t, moves, bytes
}

// bruteForceProblem enumerates every assignment of the shards that are not in
// flight and returns the lexicographic best (T, moves, bytes) among those
// CheckHard accepts; ok is false when there is none.
func bruteForceProblem(p *Problem) (best []int32, t float64, moves int, bytes int64, ok bool) {
	N, M := p.NumShards(), p.NumChildren()
	assign := append([]int32(nil), p.Current...)
	var free []int
	for s := 0; s < N; s++ {
		if !p.IsLocked(s) {
			free = append(free, s)
			assign[s] = 0
		}
	}
	for {
		if len(CheckHard(p, assign)) == 0 {
			tt, mv, by := problemObjective(p, assign)
			if !ok || tt < t-exactEps || (tt <= t+exactEps && (mv < moves || (mv == moves && by < bytes))) {
				best, t, moves, bytes, ok = append([]int32(nil), assign...), tt, mv, by, true
			}
		}
		x := 0
		for x < len(free) {
			s := free[x]
			assign[s]++
			if int(assign[s]) < M {
				break
			}
			assign[s] = 0
			x++
		}
		if x == len(free) {
			return
		}
	}
}

// startClean reports whether the shards in flight alone break no hard
// constraint (so that "feasible" means the same to CheckHard and to the search).
func startClean(p *Problem) bool {
	a := make([]int32, p.NumShards())
	for s := range a {
		a[s] = -1
		if p.IsLocked(s) {
			a[s] = p.Current[s]
		}
	}
	for _, v := range CheckHard(p, a) {
		if v.Constraint != ConstraintUnplaced {
			return false
		}
	}
	return true
}

// TestExactSolverMatchesBruteForce: through the registered solver and the
// Problem type (pins, allowed lists, drained and failed children, anti-affinity
// groups, in-flight shards, headroom, move budgets, unplaced shards), exact
// proves the same optimum as enumerating every assignment CheckHard accepts, and
// is not marked optimal when there is none.
func TestExactSolverMatchesBruteForce(t *testing.T) {
	compared, infeasible := 0, 0
	rapid.Check(t, func(t *rapid.T) {
		p := genProblem(t, genSpec{maxShards: 7, maxChildren: 3, constraints: true})
		if !startClean(p) {
			return
		}
		res, err := Solve(SolverExact, p, Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, bt, bm, bb, ok := bruteForceProblem(p)
		if !ok {
			infeasible++
			if res.Optimal {
				t.Fatalf("no assignment is feasible, but exact claims an optimum %v", res.Assignment)
			}
			return
		}
		compared++
		if !res.Optimal || res.Status != interfaces.StatusOK {
			t.Fatalf("feasible problem: exact status %v optimal=%v", res.Status, res.Optimal)
		}
		if v := CheckHard(p, res.Assignment); len(v) > 0 {
			t.Fatalf("exact's assignment breaks %v", v)
		}
		et, em, eb := problemObjective(p, res.Assignment)
		if math.Abs(et-bt) > 1e-9 || em != bm || eb != bb {
			t.Fatalf("exact (T=%v moves=%d bytes=%d) ≠ brute force (T=%v moves=%d bytes=%d)", et, em, eb, bt, bm, bb)
		}
		if res.Summary.Moves != em || res.Summary.BytesMoved != eb {
			t.Fatalf("summary says %d moves / %d bytes, assignment has %d / %d", res.Summary.Moves, res.Summary.BytesMoved, em, eb)
		}
	})
	if compared < 20 {
		t.Fatalf("only %d feasible problems compared (%d infeasible): the generator is too tight", compared, infeasible)
	}
}

// seededProblem draws a small problem from a seed, with the same kinds of
// constraints as genProblem (headroom, drained and failed children, pins,
// allowed lists, anti-affinity groups, in-flight shards, move budgets, unplaced
// shards), so that a fixed corpus can be replayed exactly.
func seededProblem(seed uint64, R, maxShards, maxChildren int) *Problem {
	rng := rand.New(rand.NewPCG(seed, 0xe7ac7))
	M := 1 + rng.IntN(maxChildren)
	N := rng.IntN(maxShards + 1)
	p := &Problem{
		Resources:  []interfaces.Resource{interfaces.CPU, interfaces.Mem}[:R],
		ChildIDs:   make([]interfaces.ChildID, M),
		Capacity:   make([]float64, M*R),
		ShardIDs:   make([]interfaces.ShardID, N),
		Load:       make([]float64, N*R),
		StateBytes: make([]int64, N),
		Current:    make([]int32, N),
	}
	for c := 0; c < M; c++ {
		p.ChildIDs[c] = interfaces.ChildID(fmt.Sprintf("c%d", c))
		for r := 0; r < R; r++ {
			p.Capacity[c*R+r] = float64(4 + rng.IntN(17))
		}
	}
	for s := 0; s < N; s++ {
		p.ShardIDs[s] = interfaces.ShardID(fmt.Sprintf("s%d", s))
		for r := 0; r < R; r++ {
			p.Load[s*R+r] = float64(rng.IntN(41)) / 8
		}
		p.StateBytes[s] = int64(rng.IntN(101))
		p.Current[s] = int32(rng.IntN(M+1) - 1)
	}
	if rng.IntN(2) == 0 {
		p.Headroom = 0.1
	}
	if M > 1 && rng.IntN(2) == 0 {
		p.ChildState = make([]interfaces.ChildState, M)
		for c := 1; c < M; c++ {
			p.ChildState[c] = interfaces.ChildState([]int{0, 0, 0, 1, 2}[rng.IntN(5)])
		}
	}
	if rng.IntN(2) == 0 {
		p.Pinned = make([]int32, N)
		for s := range p.Pinned {
			p.Pinned[s] = -1
			if rng.IntN(10) == 0 {
				p.Pinned[s] = int32(rng.IntN(M))
			}
		}
	}
	if rng.IntN(2) == 0 {
		p.Allowed = make([][]int32, N)
		for s := range p.Allowed {
			if rng.IntN(5) == 0 {
				list := []int32{}
				for c := 0; c < M; c++ {
					if rng.IntN(2) == 0 || (p.Pinned != nil && p.Pinned[s] == int32(c)) {
						list = append(list, int32(c))
					}
				}
				p.Allowed[s] = list
			}
		}
	}
	if N > 1 && rng.IntN(2) == 0 {
		G := 1 + rng.IntN(2)
		p.Groups = make([][]int32, N)
		p.GroupLimit = make([]int32, G)
		for g := range p.GroupLimit {
			p.GroupLimit[g] = int32(1 + rng.IntN(2))
		}
		for s := range p.Groups {
			for g := 0; g < G; g++ {
				if rng.IntN(3) == 0 {
					p.Groups[s] = append(p.Groups[s], int32(g))
				}
			}
		}
	}
	if rng.IntN(2) == 0 {
		p.Locked = make([]bool, N)
		for s := range p.Locked {
			p.Locked[s] = p.Current[s] >= 0 && rng.IntN(6) == 0
		}
	}
	if rng.IntN(2) == 0 {
		p.MaxMoves = rng.IntN(5)
		p.MaxBytes = int64(rng.IntN(301))
	}
	return p
}

// localCorpus is the seeds of TestLocalWithin2PercentOfExact: the first 500,
// plus the seeds up to 5000 on which local search failed when the test was
// written (kept so that the check stays visible while the run stays short).
func localCorpus() []uint64 {
	var seeds []uint64
	for seed := uint64(1); seed <= 500; seed++ {
		seeds = append(seeds, seed)
	}
	return append(seeds, 873, 1330, 2732, 3492, 3771, 4381, 4684)
}

// TestLocalWithin2PercentOfExact: on a fixed corpus of small generated problems
// (one resource, so that local search's min-max balance goal and exact's
// bottleneck are the same number; exact's result proven optimal), local search
// ends feasible and within 2% of exact's optimum. "feasible_start" keeps the
// problems whose current assignment already meets every hard constraint;
// "any_start" keeps all, including starts local search must repair first
// (unplaced shards, drained children, broken anti-affinity, ...).
func TestLocalWithin2PercentOfExact(t *testing.T) {
	for _, anyStart := range []bool{false, true} {
		name := "feasible_start"
		if anyStart {
			name = "any_start"
		}
		t.Run(name, func(t *testing.T) {
			compared, worst, failed := 0, 1.0, 0
			for _, seed := range localCorpus() {
				p := seededProblem(seed, 1, 8, 3)
				if !startClean(p) || (!anyStart && len(CheckHard(p, p.Current)) > 0) {
					continue
				}
				o := Options{Goals: []Goal{{Kind: GoalBalanceMinMax, Priority: 1}, {Kind: GoalMigration, Priority: 2}}, Seed: 1}
				ex, err := Solve(SolverExact, p, o)
				if err != nil {
					t.Fatal(err)
				}
				if !ex.Optimal {
					continue // nothing feasible to compare with
				}
				if v := CheckHard(p, ex.Assignment); len(v) > 0 {
					t.Fatalf("seed %d: exact's optimum breaks %v", seed, v)
				}
				lo, err := Solve(SolverLocal, p, o)
				if err != nil {
					t.Fatal(err)
				}
				compared++
				et, _, _ := problemObjective(p, ex.Assignment)
				lt, _, _ := problemObjective(p, lo.Assignment)
				if v := CheckHard(p, lo.Assignment); len(v) > 0 {
					failed++
					if failed <= 10 {
						t.Errorf("seed %d: local left %v where exact found a feasible optimum (T=%v, %v; current %v)", seed, v, et, ex.Assignment, p.Current)
					}
					continue
				}
				if et > 0 && lt/et > worst {
					worst = lt / et
				}
				if lt > et*1.02+1e-12 {
					failed++
					if failed <= 10 {
						// confirm the optimum independently before blaming local search
						_, bt, _, _, _ := bruteForceProblem(p)
						t.Errorf("seed %d: local T=%v is %.1f%% above exact's optimum %v (brute force %v; local %v, exact %v, current %v)", seed, lt, 100*(lt/et-1), et, bt, lo.Assignment, ex.Assignment, p.Current)
					}
				}
			}
			if compared < 100 {
				t.Fatalf("only %d problems compared", compared)
			}
			if failed > 0 {
				t.Errorf("%s: local failed on %d of %d problems", name, failed, compared)
			}
			t.Logf("%s: %d problems compared; worst feasible local/exact = %.4f; failures %d", name, compared, worst, failed)
		})
	}
}

// TestExactSolverLimits: a node limit or a deadline ends the search with a valid,
// unproven plan (Status Partial), and oversized problems are refused with an
// error naming the limit.
func TestExactSolverLimits(t *testing.T) {
	in := randomExactInstance(20, 4, 2, 3)
	p := &Problem{Resources: []interfaces.Resource{interfaces.CPU, interfaces.Mem}}
	for j := 0; j < in.M; j++ {
		p.ChildIDs = append(p.ChildIDs, interfaces.ChildID(fmt.Sprintf("c%d", j)))
		p.Capacity = append(p.Capacity, in.Cap[j]...)
	}
	for i := 0; i < in.N; i++ {
		p.ShardIDs = append(p.ShardIDs, interfaces.ShardID(fmt.Sprintf("s%d", i)))
		p.Load = append(p.Load, in.Load[i]...)
		p.Current = append(p.Current, int32(in.Current[i]))
	}
	polls := 0
	for name, o := range map[string]Options{
		"node limit": {NodeLimit: 100},
		"deadline":   {Deadline: func() bool { polls++; return polls > 2 }},
	} {
		res, err := Solve(SolverExact, p, o)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.Optimal || res.Status != interfaces.StatusPartial {
			t.Errorf("%s: optimal=%v status %v, want an unproven partial result", name, res.Optimal, res.Status)
		}
		if v := CheckHard(p, res.Assignment); len(v) > 0 {
			t.Errorf("%s: %v", name, v)
		}
		st, _, _ := problemObjective(p, p.Current)
		if et, _, _ := problemObjective(p, res.Assignment); et > st+1e-9 {
			t.Errorf("%s: T=%v worse than the start's %v", name, et, st)
		}
	}
	if polls < 3 {
		t.Errorf("the deadline was polled %d times", polls)
	}

	big := &Problem{Resources: []interfaces.Resource{interfaces.CPU}, ChildIDs: []interfaces.ChildID{"a"}, Capacity: []float64{1}}
	for s := 0; s <= ExactMaxShards; s++ {
		big.ShardIDs = append(big.ShardIDs, interfaces.ShardID(fmt.Sprintf("s%d", s)))
		big.Load = append(big.Load, 0)
		big.Current = append(big.Current, 0)
	}
	_, err := Solve(SolverExact, big, Options{})
	if !errors.Is(err, interfaces.ErrInvalid) || !contains(err.Error(), "at most 1000 shards") {
		t.Errorf("oversized problem: got %v", err)
	}
}

// BenchmarkExactSolver20x4 runs the registered solver end to end (conversion,
// search, explanations) on the `strata bench balance` instance with 20 shards on
// 4 hosts, seeds 1-3, and reports nodes and whether the optimum was proven.
func BenchmarkExactSolver20x4(b *testing.B) {
	for seed := uint64(1); seed <= 3; seed++ {
		b.Run(fmt.Sprintf("seed%d", seed), func(b *testing.B) {
			p, err := Generate(InstanceSpec{Shards: 20, Hosts: 4, Seed: seed})
			if err != nil {
				b.Fatal(err)
			}
			var res Result
			for i := 0; i < b.N; i++ {
				if res, err = Solve(SolverExact, p, Options{}); err != nil {
					b.Fatal(err)
				}
			}
			proven := 0.0
			if res.Optimal {
				proven = 1
			}
			b.ReportMetric(float64(res.Iterations), "nodes/op")
			b.ReportMetric(proven, "proven")
		})
	}
}
