package balancer

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/strata-sched/strata/interfaces"
)

// bigConstrainedProblem is a problem big enough to be solved renumbered (the
// threshold is lowered for the test: the race detector makes a real one take a
// minute), with every kind of per-shard data set on some shards, most shards
// unplaced, and shard IDs that do not sort like their indices.
func bigConstrainedProblem(t *testing.T) *Problem {
	t.Helper()
	old := renumberMin
	renumberMin = 4000
	t.Cleanup(func() { renumberMin = old })
	N, M := renumberMin+1000, 40
	p, err := Generate(InstanceSpec{Shards: N, Hosts: M, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	p.Epoch = make([]interfaces.Epoch, N)
	p.Locked = make([]bool, N)
	p.Pinned = make([]int32, N)
	p.Allowed = make([][]int32, N)
	p.Groups = make([][]int32, N)
	p.GroupLimit, p.GroupNames = []int32{1}, []string{"g"}
	p.ShardDomain = make([]int32, N)
	p.ChildDomain = make([]int32, M)
	p.DomainNames = []string{"a", "b"}
	p.Avoid = make([][]int32, N)
	for c := range p.ChildDomain {
		p.ChildDomain[c] = int32(c % 2)
	}
	for s := 0; s < N; s++ {
		p.ShardIDs[s] = interfaces.ShardID("z" + strings.Repeat("x", s%3) + string(p.ShardIDs[s]))
		p.Epoch[s] = interfaces.Epoch(s%7 + 1)
		p.Pinned[s] = -1
		p.ShardDomain[s] = int32(s%3) - 1
		switch {
		case s%10 == 0: // placed and in flight
			p.Locked[s] = true
		case s%10 == 1: // placed, stays unless it should move
		default:
			p.Current[s] = -1
		}
		switch s % 97 {
		case 3:
			p.Pinned[s] = int32(s % M)
		case 5:
			p.Allowed[s] = []int32{int32(s % M), int32((s + 7) % M)}
			slices.Sort(p.Allowed[s])
		case 8:
			if s < 97*50 {
				p.Groups[s] = []int32{0} // at most one per child: 50 members, 40 children
			}
		case 9:
			p.Avoid[s] = []int32{int32(s % M)}
		}
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRenumberedSolveIsAPlanForTheOriginal: a big problem that is mostly
// placement is solved on a renumbered copy; the result must be a valid plan for
// the problem as given — every constraint read through the original indices,
// moves that name the right shard, source, destination and epoch, sorted by
// shard ID, infeasible shards in the problem's order.
func TestRenumberedSolveIsAPlanForTheOriginal(t *testing.T) {
	p := bigConstrainedProblem(t)
	goals := DefaultGoals()
	if ord, _ := placementOrder(p, goals); ord == nil {
		t.Fatal("the test problem is not renumbered: it tests nothing")
	}
	idx := make(map[interfaces.ShardID]int, p.NumShards())
	for s, id := range p.ShardIDs {
		idx[id] = s
	}
	for _, name := range []string{SolverLocal} { // greedy does not renumber
		o := Options{Seed: 3, Candidates: 2, TargetMaxOverLB: 1.05, Kicks: -1}
		res, err := Solve(name, p, o)
		if err != nil {
			t.Fatal(err)
		}
		checkResult(t, p, o, res)
		if len(res.Infeasible) == 0 {
			t.Errorf("%s: no infeasible shard; the anti-affinity group has more members than children", name)
		}
		last := -1
		for _, inf := range res.Infeasible {
			s := idx[inf.Shard]
			if s < last {
				t.Fatalf("%s: infeasible shards out of the problem's order", name)
			}
			last = s
		}
		if !slices.IsSortedFunc(res.Moves, func(a, b interfaces.Move) int { return strings.Compare(string(a.Shard), string(b.Shard)) }) {
			t.Errorf("%s: moves not sorted by shard ID", name)
		}
		for _, m := range res.Moves {
			s := idx[m.Shard]
			c := res.Assignment[s]
			from := interfaces.ChildID("")
			if p.Current[s] >= 0 {
				from = p.ChildIDs[p.Current[s]]
			}
			if c < 0 || m.To != p.ChildIDs[c] || m.From != from || m.Epoch != p.Epoch[s] {
				t.Fatalf("%s: move %+v, but shard %d is on %d (from %d) with epoch %d", name, m, s, c, p.Current[s], p.Epoch[s])
			}
		}
		for s := range p.Pinned {
			if c := res.Assignment[s]; c >= 0 && !p.IsLocked(s) && !p.AllowedOn(s, int(c)) {
				t.Fatalf("%s: shard %d on %d breaks its pin or allowed list", name, s, c)
			}
		}
	}
}

// TestForcedShardsLargestFirst: forcedShards lists the shards it forces
// largest first, ties by index, whatever pass found them (unplaced, over an
// anti-affinity limit, on a child above its capacity), on a problem and on
// its copy renumbered in placement order. (A version that skipped the sort on
// the renumbered copy, taking its index order for the size order, listed the
// shards of the later passes out of order here.)
func TestForcedShardsLargestFirst(t *testing.T) {
	p := bigConstrainedProblem(t)
	R := p.NumResources()
	for r := 0; r < R; r++ {
		p.Capacity[r] *= 0.02 // child 0 far above its capacity: the third pass
	}
	goals := DefaultGoals()
	ord, sizeW := placementOrder(p, goals)
	if ord == nil {
		t.Fatal("the test problem is not renumbered: it tests nothing")
	}
	for name, q := range map[string]*Problem{"problem": p, "renumbered copy": p.renumbered(ord, sizeW)} {
		pl := newPlacer(newState(q, goals, LatencyModel{}, q.Current))
		got := pl.forcedShards()
		want := slices.Clone(got)
		slices.SortFunc(want, func(a, b int) int {
			if c := cmp.Compare(pl.shardSize(b), pl.shardSize(a)); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
		if !slices.Equal(got, want) {
			i := 0
			for got[i] == want[i] {
				i++
			}
			t.Errorf("%s: forced shards out of order at position %d of %d: %d (size %v) where %d (size %v) belongs", name, i, len(got), got[i], pl.shardSize(got[i]), want[i], pl.shardSize(want[i]))
		}
		unplaced, other := 0, 0
		for _, s := range got {
			if q.Current[s] < 0 {
				unplaced++
			} else {
				other++
			}
		}
		if unplaced == 0 || other == 0 {
			t.Errorf("%s: %d unplaced and %d placed forced shards: the test needs both", name, unplaced, other)
		}
	}
}

// TestSortBySize: sortBySize gives the order of a full sort (size
// decreasing, ties by index) on lists already in order, in reverse order and
// shuffled, with many ties.
func TestSortBySize(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 2000; trial++ {
		n := rng.IntN(30)
		sizes := make([]float64, 40)
		for i := range sizes {
			sizes[i] = float64(rng.IntN(4))
		}
		size := func(s int) float64 { return sizes[s] }
		xs := make([]int32, n)
		for i, x := range rng.Perm(40)[:n] {
			xs[i] = int32(x)
		}
		want := bySizeReference(xs, sizes)
		for _, in := range [][]int32{xs, slices.Clone(want), reversed(want)} {
			got := slices.Clone(in)
			sortBySize(got, size)
			if !slices.Equal(got, want) {
				t.Fatalf("trial %d: sortBySize(%v) = %v, want %v (sizes %v)", trial, in, got, want, sizes)
			}
			if sortedBySize(in, size) != slices.Equal(in, want) {
				t.Fatalf("trial %d: sortedBySize(%v) = %v", trial, in, !slices.Equal(in, want))
			}
		}
	}
}

// TestRadixBySize: lists long enough for the radix sort (radixMin and
// more) come out in the comparison sort's order — size decreasing with
// cmp.Compare (NaN last, -0 equal to +0), ties by index — for int32 and int
// indices, from any input order, with many ties, zeros of both signs,
// negative sizes, infinities and NaN.
func TestRadixBySize(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	special := []float64{0, math.Copysign(0, -1), -1.5, math.Inf(1), math.Inf(-1), math.NaN(), 1e-300, 1e300}
	for trial := 0; trial < 40; trial++ {
		n := radixMin + rng.IntN(3*radixMin)
		sizes := make([]float64, n+rng.IntN(n))
		for i := range sizes {
			switch rng.IntN(4) {
			case 0:
				sizes[i] = special[rng.IntN(len(special))]
			case 1:
				sizes[i] = float64(rng.IntN(5)) // ties
			default:
				sizes[i] = rng.Float64() * math.Pow(10, float64(rng.IntN(20)-10))
			}
		}
		size := func(s int) float64 { return sizes[s] }
		xs := make([]int32, n)
		for i, x := range rng.Perm(len(sizes))[:n] {
			xs[i] = int32(x)
		}
		want := bySizeReference(xs, sizes)
		got := slices.Clone(xs)
		radixBySize(got, size)
		if !slices.Equal(got, want) {
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("trial %d: position %d: %d (size %v), want %d (size %v)", trial, i, got[i], sizes[got[i]], want[i], sizes[want[i]])
				}
			}
		}
		ints := make([]int, n)
		for i, x := range xs {
			ints[i] = int(x)
		}
		sortBySize(ints, size)
		for i := range ints {
			if int32(ints[i]) != want[i] {
				t.Fatalf("trial %d, int indices: position %d: %d, want %d", trial, i, ints[i], want[i])
			}
		}
	}
}

// bySizeReference is sortBySize's order written as its definition: size
// decreasing by cmp.Compare, ties by index.
func bySizeReference(xs []int32, sizes []float64) []int32 {
	want := slices.Clone(xs)
	slices.SortFunc(want, func(a, b int32) int {
		if c := cmp.Compare(sizes[b], sizes[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return want
}

func reversed(xs []int32) []int32 {
	out := slices.Clone(xs)
	slices.Reverse(out)
	return out
}

// TestShardSizeHasNoUnits: the order in which shards are placed (largest
// first) does not depend on the unit a resource is measured in — memory in
// KiB rather than bytes, cpu in 1/1024ths of a core or in units of 2⁻⁴⁰
// (powers of two, so that every product is exact) — and it weighs both
// resources: on a generated instance it is neither the memory order nor the
// cpu order. (Sizes that were load / LB compared bytes with cores: the order
// was the memory order, and cpu ×2⁴⁰ made it the cpu order.)
func TestShardSizeHasNoUnits(t *testing.T) {
	p, err := Generate(InstanceSpec{Shards: 3000, Hosts: 30, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	goals := DefaultGoals()
	R, N := p.NumResources(), p.NumShards()
	if R != 2 {
		t.Fatalf("%d resources, want 2", R)
	}
	order := func(q *Problem) []int {
		pl := newPlacer(newState(q, goals, LatencyModel{}, q.Current))
		xs := make([]int, N)
		for s := range xs {
			xs[s] = s
		}
		sortBySize(xs, pl.shardSize)
		return xs
	}
	base := order(p)
	for _, sc := range []struct {
		r int
		f float64
	}{{0, 1024}, {1, 1.0 / 1024}, {1, 1 << 20}, {0, 1 << 40}} {
		q := *p
		q.Load = slices.Clone(p.Load)
		q.Capacity = slices.Clone(p.Capacity)
		for i := sc.r; i < len(q.Load); i += R {
			q.Load[i] *= sc.f
		}
		for i := sc.r; i < len(q.Capacity); i += R {
			q.Capacity[i] *= sc.f
		}
		if got := order(&q); !slices.Equal(got, base) {
			t.Errorf("%s ×%g: the size order changed", p.Resources[sc.r], sc.f)
		}
	}
	for r := 0; r < R; r++ {
		by := slices.Clone(base)
		slices.SortStableFunc(by, func(a, b int) int {
			if c := cmp.Compare(p.Load[b*R+r], p.Load[a*R+r]); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
		if slices.Equal(by, base) {
			t.Errorf("the size order is the order of %s alone", p.Resources[r])
		}
	}
}

// TestRenumberedCopyIsInSizeOrder: the copy of a problem renumbered in
// placement order sizes its shards as the original does, so its shards are
// in size order by index — the order its placer visits them, without a sort.
// (Weights computed on the copy differ in the last bits: its LB sums loads in
// another order, and on these instances, whose shards' cpu and memory shares
// nearly tie, that put thousands of neighbours out of order.)
func TestRenumberedCopyIsInSizeOrder(t *testing.T) {
	old := renumberMin
	renumberMin = 1000
	t.Cleanup(func() { renumberMin = old })
	goals := DefaultGoals()
	for seed := uint64(1); seed <= 4; seed++ {
		p, err := Generate(InstanceSpec{Shards: 40000, Hosts: 200, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		for s := range p.Current {
			p.Current[s] = -1 // placing from nothing: renumbered
		}
		ord, sizeW := placementOrder(p, goals)
		if ord == nil {
			t.Fatal("not renumbered: the test tests nothing")
		}
		q := p.renumbered(ord, sizeW)
		pl := newPlacer(newState(q, goals, LatencyModel{}, q.Current))
		xs := make([]int32, q.NumShards())
		for s := range xs {
			xs[s] = int32(s)
		}
		if !sortedBySize(xs, pl.shardSize) {
			bad := 0
			for i := 1; i < len(xs); i++ {
				if pl.shardSize(i) > pl.shardSize(i-1) {
					bad++
				}
			}
			t.Errorf("seed %d: the renumbered copy is out of size order (%d neighbours)", seed, bad)
		}
	}
}
