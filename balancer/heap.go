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

func (h *idxHeap) less(i, j int) bool {
	a, b := h.heap[i], h.heap[j]
	ka, kb := h.key[a], h.key[b]
	if ka != kb {
		return ka > kb
	}
	return a < b // deterministic ties: lower index first
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

// topK appends to out the (up to) k items with the largest keys, in decreasing
// order, without changing the heap. scratch is reused between calls.
func (h *idxHeap) topK(k int, out []int32, scratch *[]int32) []int32 {
	n := len(h.heap)
	if n == 0 || k <= 0 {
		return out
	}
	// Best-first search over heap positions with a small frontier kept sorted.
	front := (*scratch)[:0]
	front = append(front, 0)
	for len(out) < k && len(front) > 0 {
		// pick the frontier position with the largest key
		bi := 0
		for i := 1; i < len(front); i++ {
			if h.less(int(front[i]), int(front[bi])) {
				bi = i
			}
		}
		pos := int(front[bi])
		front[bi] = front[len(front)-1]
		front = front[:len(front)-1]
		out = append(out, h.heap[pos])
		if l := 2*pos + 1; l < n {
			front = append(front, int32(l))
		}
		if r := 2*pos + 2; r < n {
			front = append(front, int32(r))
		}
	}
	*scratch = front
	return out
}
