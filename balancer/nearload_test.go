package balancer

import (
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// TestNearLoadIsTheSortedWindow: nearLoad (and windowAround on the sorted
// list) picks exactly the shards (and order) that sorting by load (ties by
// index) and taking window either side of the first load ≥ target gives, on
// random lists with many ties.
func TestNearLoadIsTheSortedWindow(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const R = 2
	for trial := 0; trial < 3000; trial++ {
		n := 1 + rng.IntN(40)
		load := make([]float64, 200*R)
		for i := range load {
			load[i] = float64(rng.IntN(6)) // ties on purpose
		}
		list := make([]int32, n)
		for i, x := range rng.Perm(200)[:n] {
			list[i] = int32(x)
		}
		r := rng.IntN(R)
		target := float64(rng.IntN(8)) - 0.5*float64(rng.IntN(2))
		sorted := slices.Clone(list)
		slices.SortFunc(sorted, byLoadOn(load, R, r))
		i := sort.Search(len(sorted), func(i int) bool { return load[int(sorted[i])*R+r] >= target })
		lo, hi := max(i-window, 0), min(i+window, len(sorted))
		var buf [2 * window]int32
		got := nearLoad(list, load, R, r, target, &buf)
		if !slices.Equal(got, sorted[lo:hi]) {
			t.Fatalf("trial %d: list %v target %g: got %v, want %v", trial, list, target, got, sorted[lo:hi])
		}
		// windowAround, which the fast pass uses with many candidates, on
		// the sorted list: the same window.
		if got := windowAround(sorted, load, R, r, target); !slices.Equal(got, sorted[lo:hi]) {
			t.Fatalf("trial %d: list %v target %g: windowAround %v, want %v", trial, list, target, got, sorted[lo:hi])
		}
	}
}
