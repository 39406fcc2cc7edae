package balancer

// idxHeap is an indexed binary max-heap over items 0..n-1 with float keys: the
// key of any item can be changed in O(log n). A min-heap stores negated keys.
type idxHeap struct {
	key  []float64 // by item
	heap []int32   // items in heap order
	pos  []int32   // position of each item in heap, -1 when absent
}

func newIdxHeap(keys []float64) *idxHeap {
	n := len(keys)
	h := &idxHeap{key: keys, heap: make([]int32, n), pos: make([]int32, n)}
	for i := range h.heap {
		h.heap[i] = int32(i)
		h.pos[i] = int32(i)
	}
	for i := n/2 - 1; i >= 0; i-- {
		h.down(i)
	}
	return h
}

// less reports whether the item at heap position i comes before the one at j.
func (h *idxHeap) less(i, j int) bool { return h.itemBefore(h.heap[i], h.heap[j]) }

// itemBefore reports whether item x comes before item y: larger key first,
// deterministic ties: lower index first.
func (h *idxHeap) itemBefore(x, y int32) bool {
	kx, ky := h.key[x], h.key[y]
	if kx != ky {
		return kx > ky
	}
	return x < y
}

func (h *idxHeap) swap(i, j int) {
	h.heap[i], h.heap[j] = h.heap[j], h.heap[i]
	h.pos[h.heap[i]] = int32(i)
	h.pos[h.heap[j]] = int32(j)
}

func (h *idxHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *idxHeap) down(i int) {
	n := len(h.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		best := l
		if r := l + 1; r < n && h.less(r, l) {
			best = r
		}
		if !h.less(best, i) {
			return
		}
		h.swap(i, best)
		i = best
	}
}

// set changes item x's key.
func (h *idxHeap) set(x int, k float64) {
	old := h.key[x]
	h.key[x] = k
	i := int(h.pos[x])
	if k > old {
		h.up(i)
	} else if k < old {
		h.down(i)
	}
}

// top returns the item with the largest key.
func (h *idxHeap) top() int { return int(h.heap[0]) }

// maxExcluding returns the largest key among items other than a and b (either may
// be -1), or def when there is none. It visits only the heap nodes that hold a or
// b and their children, so it costs O(1).
func (h *idxHeap) maxExcluding(a, b int, def float64) float64 {
	var stack [8]int
	sp := 0
	n := len(h.heap)
	if n == 0 {
		return def
	}
	stack[sp] = 0
	sp++
	best, found := def, false
	for sp > 0 {
		sp--
		i := stack[sp]
		x := int(h.heap[i])
		if x == a || x == b {
			for _, c := range [2]int{2*i + 1, 2*i + 2} {
				if c < n {
					stack[sp] = c
					sp++
				}
			}
			continue
		}
		if k := h.key[x]; !found || k > best {
			best, found = k, true
		}
	}
	return best
}

// bestFirst calls visit with items in decreasing key order (ties by lower
// index) until visit returns false or every item was visited, without changing
// the heap. front is scratch space reused between calls.
func (h *idxHeap) bestFirst(front *[]int32, visit func(x int) bool) {
	n := len(h.heap)
	if n == 0 {
		return
	}
	f := (*front)[:0]
	f = append(f, 0)
	// f is itself a binary max-heap of heap positions, ordered like h.
	for len(f) > 0 {
		pos := int(f[0])
		last := len(f) - 1
		f[0] = f[last]
		f = f[:last]
		h.siftFront(f, 0)
		if !visit(int(h.heap[pos])) {
			break
		}
		for _, c := range [2]int{2*pos + 1, 2*pos + 2} {
			if c < n {
				f = append(f, int32(c))
				// sift up
				i := len(f) - 1
				for i > 0 {
					p := (i - 1) / 2
					if !h.less(int(f[i]), int(f[p])) {
						break
					}
					f[i], f[p] = f[p], f[i]
					i = p
				}
			}
		}
	}
	*front = f
}

func (h *idxHeap) siftFront(f []int32, i int) {
	n := len(f)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		best := l
		if r := l + 1; r < n && h.less(int(f[r]), int(f[l])) {
			best = r
		}
		if !h.less(int(f[best]), int(f[i])) {
			return
		}
		f[i], f[best] = f[best], f[i]
		i = best
	}
}
