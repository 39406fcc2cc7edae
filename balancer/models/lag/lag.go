package lag

import (
	"fmt"
	"math"

	"github.com/strata-sched/strata/interfaces"
)

// Step advances a backlog by one step of dt seconds. input is the arrival
// rate and capacity the most the consumer can process (records/s); backlog is
// in records. The consumer processes
//
//	processed = min(capacity, input + backlog/dt)   (records/s)
//
// — all that arrives plus the backlog if it can, else its capacity — and
//
//	next = max(0, backlog + (input − processed)·dt).
//
// This is the simulator's per-tick shard step (sim/engine.go: in = rate·dt + b;
// proc = min(in, capRate·dt); b = in − proc) written once, for the simulator and
// the balancer's throughput (shortfall) goal to share. It never fails: a
// negative or NaN backlog, input or capacity counts as 0, an infinite capacity
// drains everything, dt ≤ 0 (or NaN) is no time at all (next = backlog,
// processed = 0), and a left-over of at most 1e-9 records counts as 0 (as in
// the simulator). Use Check first on untrusted values.
func Step(backlog, input, capacity, dt float64) (next, processed float64) {
	backlog, input, capacity = nonNeg(backlog), nonNeg(input), nonNeg(capacity)
	if !(dt > 0) {
		return backlog, 0
	}
	processed = math.Min(capacity, input+backlog/dt)
	next = backlog + (input-processed)*dt
	if next <= 1e-9 { // rounding left-overs, as the simulator counts them
		next = 0
	}
	return next, processed
}

// DrainTime is how long a backlog takes to drain, in seconds, when input keeps
// arriving at input and the consumer processes up to capacity: 0 with no
// backlog, backlog/(capacity − input) when capacity exceeds input, +Inf when
// it does not (the backlog never drains). Negative or NaN values count as 0.
func DrainTime(backlog, input, capacity float64) float64 {
	backlog, input, capacity = nonNeg(backlog), nonNeg(input), nonNeg(capacity)
	if backlog == 0 {
		return 0
	}
	if capacity <= input {
		return math.Inf(1)
	}
	return backlog / (capacity - input)
}

// Growth is the rate at which the backlog grows once it is non-zero,
// max(0, input − capacity) records/s: the per-child term of the balancer's
// shortfall goal (before its normalization by total load).
func Growth(input, capacity float64) float64 {
	return math.Max(0, nonNeg(input)-nonNeg(capacity))
}

// Check validates Step's arguments: backlog, input and capacity finite
// (capacity may be +Inf) and ≥ 0, dt finite and > 0.
func Check(backlog, input, capacity, dt float64) error {
	for _, f := range []struct {
		name string
		v    float64
		inf  bool
	}{{"backlog", backlog, false}, {"input", input, false}, {"capacity", capacity, true}} {
		if !(f.v >= 0) || (math.IsInf(f.v, 1) && !f.inf) {
			return fmt.Errorf("%s: must be finite and >= 0, got %v: %w", f.name, f.v, interfaces.ErrInvalid)
		}
	}
	if !(dt > 0) || math.IsInf(dt, 1) {
		return fmt.Errorf("dt: must be finite and > 0 seconds, got %v: %w", dt, interfaces.ErrInvalid)
	}
	return nil
}

func nonNeg(v float64) float64 {
	if !(v > 0) {
		return 0
	}
	return v
}
