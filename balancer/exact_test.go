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
// limit, the result is consistent whatever the status: a feasible assignment no
// worse than the current one (which is feasible here), and bounds that never
// exceed it. The benchmark instance (20×4, seed 2) must be proven optimal.
func TestExactMediumInstances(t *testing.T) {
	for _, sz := range []struct{ n, m int }{{20, 3}, {20, 4}, {25, 4}, {30, 5}} {
		for seed := uint64(1); seed <= 3; seed++ {
			in := randomExactInstance(sz.n, sz.m, 2, seed)
			out, err := solveExact(in, exactOptions{MaxNodes: 5000})
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
