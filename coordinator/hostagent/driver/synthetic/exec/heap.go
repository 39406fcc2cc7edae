package exec

// shardHeap is a binary min-heap of shards that keeps each shard's index in the
// field idx points to (-1 when absent), so a shard can be fixed or removed in
// O(log n).
type shardHeap struct {
	s    []*shard
	less func(a, b *shard) bool
	idx  func(*shard) *int
}

func (h *shardHeap) swap(i, j int) {
	h.s[i], h.s[j] = h.s[j], h.s[i]
	*h.idx(h.s[i]) = i
	*h.idx(h.s[j]) = j
}

func (h *shardHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(h.s[i], h.s[p]) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *shardHeap) down(i int) bool {
	i0, n := i, len(h.s)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h.less(h.s[r], h.s[l]) {
			m = r
		}
		if !h.less(h.s[m], h.s[i]) {
			break
		}
		h.swap(i, m)
		i = m
	}
	return i > i0
}

func (h *shardHeap) push(s *shard) {
	h.s = append(h.s, s)
	*h.idx(s) = len(h.s) - 1
	h.up(len(h.s) - 1)
}

func (h *shardHeap) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h *shardHeap) remove(i int) {
	n := len(h.s) - 1
	s := h.s[i]
	if i != n {
		h.swap(i, n)
	}
	h.s[n] = nil
	h.s = h.s[:n]
	*h.idx(s) = -1
	if i != n {
		h.fix(i)
	}
}

// runHeap holds the running items by finish time (ties: shard order, then seq),
// at most one per core.
type runHeap struct{ j []job }

func (h *runHeap) less(a, b job) bool {
	if a.finish != b.finish {
		return a.finish < b.finish
	}
	if a.sh.ord != b.sh.ord {
		return a.sh.ord < b.sh.ord
	}
	return a.seq < b.seq
}

func (h *runHeap) push(j job) {
	h.j = append(h.j, j)
	i := len(h.j) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(h.j[i], h.j[p]) {
			break
		}
		h.j[i], h.j[p] = h.j[p], h.j[i]
		i = p
	}
}

func (h *runHeap) pop() job {
	top := h.j[0]
	n := len(h.j) - 1
	h.j[0] = h.j[n]
	h.j[n] = job{}
	h.j = h.j[:n]
	h.down(0)
	return top
}

func (h *runHeap) down(i int) {
	n := len(h.j)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.less(h.j[r], h.j[l]) {
			m = r
		}
		if !h.less(h.j[m], h.j[i]) {
			return
		}
		h.j[i], h.j[m] = h.j[m], h.j[i]
		i = m
	}
}

// removeShard drops every running item of s (at most one per core) and
// restores the heap.
func (h *runHeap) removeShard(s *shard) {
	kept := h.j[:0]
	for _, j := range h.j {
		if j.sh != s {
			kept = append(kept, j)
		}
	}
	for i := len(kept); i < len(h.j); i++ {
		h.j[i] = job{}
	}
	h.j = kept
	for i := len(h.j)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
	s.runningN = 0
}

// ring is a growable FIFO of arrival times.
type ring struct {
	b    []int64
	h, n int
}

func (r *ring) len() int { return r.n }

func (r *ring) head() int64 { return r.b[r.h] }

func (r *ring) push(v int64) {
	if r.n == len(r.b) {
		nb := make([]int64, max(8, 2*len(r.b)))
		for i := 0; i < r.n; i++ {
			nb[i] = r.b[(r.h+i)%len(r.b)]
		}
		r.b, r.h = nb, 0
	}
	r.b[(r.h+r.n)%len(r.b)] = v
	r.n++
}

func (r *ring) pop() int64 {
	v := r.b[r.h]
	r.h = (r.h + 1) % len(r.b)
	r.n--
	if r.n == 0 && len(r.b) > 1024 {
		r.b, r.h = nil, 0 // give back a burst's memory
	}
	return v
}
