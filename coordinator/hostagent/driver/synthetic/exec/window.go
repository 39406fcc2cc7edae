package exec

import (
	"math/bits"
	"time"
)

const (
	slots    = 4
	subBits  = 4 // 16 buckets per power of two
	sub      = 1 << subBits
	unitBits = 10 // latencies are bucketed in units of 1.024µs
	maxExp   = 30 // up to 2^30 units ≈ 18 minutes; longer goes to the last bucket
	buckets  = (maxExp-subBits+1)*sub + sub
)

// window is a sliding-window latency histogram: slots of slotDur, each with
// log-linear buckets. Slot i holds the items completed in slot number num[i].
type window struct {
	num    [slots]int64
	count  [slots]uint64
	missed [slots]uint64
	b      *[slots][buckets]uint32 // allocated on first record
}

// bucketOf maps a latency in ns to its bucket.
func bucketOf(ns int64) int {
	if ns < 0 {
		ns = 0
	}
	u := uint64(ns) >> unitBits
	if u < sub {
		return int(u)
	}
	e := bits.Len64(u) - 1 // ≥ subBits
	if e > maxExp {
		return buckets - 1
	}
	m := int(u>>(e-subBits)) & (sub - 1)
	return (e-subBits+1)*sub + m
}

// upperOf is the largest latency (ns) that falls into bucket i.
func upperOf(i int) time.Duration {
	if i < sub {
		return time.Duration((uint64(i)+1)<<unitBits - 1)
	}
	e := i/sub + subBits - 1
	m := uint64(i % sub)
	lo := (sub + m) << (e - subBits)
	hi := lo + 1<<(e-subBits)
	return time.Duration(hi<<unitBits - 1)
}

func (w *window) slot(now, slotDur int64) int {
	n := now / slotDur
	i := int(n % slots)
	if w.num[i] != n {
		w.num[i] = n
		w.count[i], w.missed[i] = 0, 0
		if w.b != nil {
			w.b[i] = [buckets]uint32{}
		}
	}
	return i
}

func (w *window) record(now, slotDur, lat int64, miss bool) {
	if w.b == nil {
		w.b = new([slots][buckets]uint32)
	}
	i := w.slot(now, slotDur)
	w.count[i]++
	if miss {
		w.missed[i]++
	}
	if b := &w.b[i][bucketOf(lat)]; *b < ^uint32(0) {
		*b++
	}
}

func (w *window) stats(now, slotDur int64) WindowStats {
	var ws WindowStats
	if w.b == nil {
		return ws
	}
	cur := now / slotDur
	var live [slots]bool
	for i := range slots {
		if w.num[i] > cur-slots && w.num[i] <= cur && w.count[i] > 0 {
			live[i] = true
			ws.Completed += w.count[i]
			ws.Missed += w.missed[i]
		}
	}
	if ws.Completed == 0 {
		return ws
	}
	// The rank-r item (1-based) for quantile q is ceil(q·n).
	r50 := (ws.Completed*50 + 99) / 100
	r99 := (ws.Completed*99 + 99) / 100
	var acc uint64
	for b := 0; b < buckets && ws.P99 == 0; b++ {
		for i := range slots {
			if live[i] {
				acc += uint64(w.b[i][b])
			}
		}
		if ws.P50 == 0 && acc >= r50 {
			ws.P50 = upperOf(b)
		}
		if acc >= r99 {
			ws.P99 = upperOf(b)
		}
	}
	return ws
}
