package exec

// minHeap is a binary min-heap. When at is set it is told each element's index
// after every change (-1 when the element leaves), so that an element can be
// fixed or removed by index in O(log n).
type minHeap[T any] struct {
	s    []T
	less func(a, b T) bool
	at   func(x T, i int)
}

func (h *minHeap[T]) swap(i, j int) {
	h.s[i], h.s[j] = h.s[j], h.s[i]
	if h.at != nil {
		h.at(h.s[i], i)
		h.at(h.s[j], j)
	}
}

func (h *minHeap[T]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(h.s[i], h.s[p]) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *minHeap[T]) down(i int) bool {
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

func (h *minHeap[T]) push(x T) {
	h.s = append(h.s, x)
	if h.at != nil {
		h.at(x, len(h.s)-1)
	}
	h.up(len(h.s) - 1)
}

// fix restores the order after the element at i changed.
func (h *minHeap[T]) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

// remove takes out the element at i and returns it.
func (h *minHeap[T]) remove(i int) T {
	n := len(h.s) - 1
	x := h.s[i]
	if i != n {
		h.swap(i, n)
	}
	var zero T
	h.s[n] = zero
	h.s = h.s[:n]
	if h.at != nil {
		h.at(x, -1)
	}
	if i != n {
		h.fix(i)
	}
	return x
}

// pop removes and returns the least element.
func (h *minHeap[T]) pop() T { return h.remove(0) }

// keep drops the elements keep rejects and restores the order.
func (h *minHeap[T]) keep(keep func(T) bool) {
	kept := h.s[:0]
	for _, x := range h.s {
		if keep(x) {
			kept = append(kept, x)
		} else if h.at != nil {
			h.at(x, -1)
		}
	}
	var zero T
	for i := len(kept); i < len(h.s); i++ {
		h.s[i] = zero
	}
	h.s = kept
	for i, x := range h.s {
		if h.at != nil {
			h.at(x, i)
		}
	}
	for i := len(h.s)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
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
