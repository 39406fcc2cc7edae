package sim

import (
	"math"
	"slices"
)

// maxUtilSamples is how many (host, tick) samples of one resource a run keeps
// for exact utilization quantiles (8 bytes each: 16 MiB). Far above the
// scenario library's runs (at most a few tens of thousands); a longer or wider
// run falls back to the histogram. A variable for tests.
var maxUtilSamples = 1 << 21

// utilDist is the distribution of host utilization over a run's live (host,
// tick) samples, for one resource. Its quantiles are exact — nearest rank over
// the samples — while the run has at most maxUtilSamples of them; past that
// the samples are dropped and the quantiles come from a histogram of
// 0.001-wide bins (the upper edge of the bin holding the rank: at most 0.001
// above the exact value). The maximum is always exact.
type utilDist struct {
	samples []float64
	sorted  bool
	over    bool // more than maxUtilSamples: hist only
	hist    *linHist
}

func newUtilDist() *utilDist { return &utilDist{hist: newLinHist(8, 0.001)} }

func (d *utilDist) add(x float64) {
	d.hist.add(x, 1)
	if d.over {
		return
	}
	if len(d.samples) >= maxUtilSamples {
		d.samples, d.over = nil, true
		return
	}
	d.samples = append(d.samples, x)
	d.sorted = false
}

// quantile returns the nearest-rank q-quantile of the samples (the sample of
// rank ⌈q·n⌉; the maximum for q ≥ 1), or the histogram's past
// maxUtilSamples; 0 without samples.
func (d *utilDist) quantile(q float64) float64 {
	if d.over || q >= 1 {
		return d.hist.quantile(q)
	}
	n := len(d.samples)
	if n == 0 {
		return 0
	}
	if !d.sorted {
		slices.Sort(d.samples)
		d.sorted = true
	}
	i := int(math.Ceil(q*float64(n))) - 1
	return d.samples[min(max(i, 0), n-1)]
}

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
