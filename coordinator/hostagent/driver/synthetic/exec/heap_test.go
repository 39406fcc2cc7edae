package exec

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMinHeapAgainstSort drives the heap with random pushes, pops, key
// changes (fix), removals by index and filters (keep), checking after every
// step that the index each element was told is where it is, that the least
// element is on top, and that pops come out in sorted order.
func TestMinHeapAgainstSort(t *testing.T) {
	type elem struct{ key, id, at int }
	rng := rand.New(rand.NewPCG(7, 11))
	h := minHeap[*elem]{
		less: func(a, b *elem) bool { return a.key < b.key || a.key == b.key && a.id < b.id },
		at:   func(e *elem, i int) { e.at = i },
	}
	var live []*elem
	check := func(step int) {
		t.Helper()
		if len(h.s) != len(live) {
			t.Fatalf("step %d: heap holds %d, want %d", step, len(h.s), len(live))
		}
		for i, e := range h.s {
			if e.at != i {
				t.Fatalf("step %d: element %d at %d was told %d", step, e.id, i, e.at)
			}
			if i > 0 && h.less(e, h.s[(i-1)/2]) {
				t.Fatalf("step %d: element %d below a greater parent", step, e.id)
			}
		}
	}
	next := 0
	for step := 0; step < 20000; step++ {
		switch op := rng.IntN(10); {
		case op < 4 || len(live) == 0:
			e := &elem{key: rng.IntN(50), id: next}
			next++
			h.push(e)
			live = append(live, e)
		case op < 6:
			want := slices.MinFunc(live, func(a, b *elem) int {
				if h.less(a, b) {
					return -1
				}
				return 1
			})
			if got := h.pop(); got != want || got.at != -1 {
				t.Fatalf("step %d: pop %d (at %d), want %d", step, got.id, got.at, want.id)
			}
			live = slices.DeleteFunc(live, func(e *elem) bool { return e == want })
		case op < 8:
			e := live[rng.IntN(len(live))]
			e.key = rng.IntN(50)
			h.fix(e.at)
		case op < 9:
			e := live[rng.IntN(len(live))]
			if got := h.remove(e.at); got != e || e.at != -1 {
				t.Fatalf("step %d: remove gave %d (at %d), want %d", step, got.id, e.at, e.id)
			}
			live = slices.DeleteFunc(live, func(x *elem) bool { return x == e })
		default:
			odd := func(e *elem) bool { return e.key%7 != 3 }
			var dropped []*elem
			for _, e := range live {
				if !odd(e) {
					dropped = append(dropped, e)
				}
			}
			h.keep(odd)
			live = slices.DeleteFunc(live, func(e *elem) bool { return !odd(e) })
			for _, e := range dropped {
				if e.at != -1 {
					t.Fatalf("step %d: dropped element %d still at %d", step, e.id, e.at)
				}
			}
		}
		check(step)
	}
}
