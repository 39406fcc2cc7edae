package sim

import "math"

// linHist is a weighted histogram with fixed-width bins over [0, max); larger
// values land in the last bin and are tracked exactly by maxSeen.
type linHist struct {
	width   float64
	bins    []float64
	total   float64
	maxSeen float64
}

func newLinHist(max, width float64) *linHist {
	return &linHist{width: width, bins: make([]float64, int(max/width)+1)}
}

func (h *linHist) add(x, w float64) {
	if x > h.maxSeen {
		h.maxSeen = x
	}
	i := int(x / h.width)
	if i >= len(h.bins) || i < 0 {
		i = len(h.bins) - 1
	}
	h.bins[i] += w
	h.total += w
}

// quantile returns the upper edge of the bin holding quantile q (the exact
// maximum for q = 1 or the overflow bin).
func (h *linHist) quantile(q float64) float64 {
	if h.total == 0 {
		return 0
	}
	if q >= 1 {
		return h.maxSeen
	}
	target, acc := q*h.total, 0.0
	for i, b := range h.bins {
		acc += b
		if acc >= target && b > 0 {
			if i == len(h.bins)-1 {
				return h.maxSeen
			}
			return math.Min(float64(i+1)*h.width, h.maxSeen)
		}
	}
	return h.maxSeen
}

// logHist is a weighted histogram with 16 bins per doubling, for latencies in
// milliseconds from 2^-10 ms up; resolution is about 4.4%.
type logHist struct {
	bins  [64 * 16]float64
	total float64
	max   float64
}

const logHistMinExp = -10

func (h *logHist) add(ms, w float64) {
	if w <= 0 {
		return
	}
	if ms > h.max {
		h.max = ms
	}
	i := 0
	if ms > 0 {
		i = int((math.Log2(ms) - logHistMinExp) * 16)
		if i < 0 {
			i = 0
		}
		if i >= len(h.bins) {
			i = len(h.bins) - 1
		}
	}
	h.bins[i] += w
	h.total += w
}

func (h *logHist) reset() {
	if h.total == 0 {
		return
	}
	clear(h.bins[:])
	h.total, h.max = 0, 0
}

// quantile returns the upper edge of the bin holding quantile q.
func (h *logHist) quantile(q float64) float64 {
	if h.total == 0 {
		return 0
	}
	target, acc := q*h.total, 0.0
	for i, b := range h.bins {
		acc += b
		if acc >= target && b > 0 {
			return math.Min(math.Exp2(float64(i+1)/16+logHistMinExp), h.max)
		}
	}
	return h.max
}
