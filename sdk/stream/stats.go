package stream

import (
	"slices"
	"time"
)

// Stats are a shard's counters since its task started.
type Stats struct {
	Processed uint64
	Busy      time.Duration
	// Lag is the records of the partition not yet delivered to the task
	// (the broker's pending count after the last record processed).
	Lag uint64
	// CPU, TrueRate, InputRate and LatencyP99 are over the interval of
	// the last Load call (peek: since it).
	CPU        float64
	TrueRate   float64
	InputRate  float64
	LatencyP99 time.Duration
}

// stats is a task's measurement state (guarded by task.mu).
type stats struct {
	processed uint64
	busy      time.Duration
	lag       uint64
	lats      []time.Duration // ring of the recent event-time latencies
	next      int
	full      bool

	// at the previous take
	since          time.Time
	processedSince uint64
	busySince      time.Duration
	lagSince       uint64
}

func (s *stats) init(window int, now time.Time) {
	s.lats = make([]time.Duration, window)
	s.since = now
}

func (s *stats) record(busy, latency time.Duration, pending uint64, hasEventTime bool) {
	s.processed++
	s.busy += busy
	s.lag = pending
	if hasEventTime {
		s.lats[s.next] = max(latency, 0)
		s.next++
		if s.next == len(s.lats) {
			s.next, s.full = 0, true
		}
	}
}

func (s *stats) p99() time.Duration {
	n := s.next
	if s.full {
		n = len(s.lats)
	}
	if n == 0 {
		return 0
	}
	v := slices.Clone(s.lats[:n])
	slices.Sort(v)
	return v[(n*99+99)/100-1]
}

func (s *stats) compute(now time.Time) Stats {
	out := Stats{Processed: s.processed, Busy: s.busy, Lag: s.lag, LatencyP99: s.p99()}
	wall := now.Sub(s.since).Seconds()
	dp := float64(s.processed - s.processedSince)
	db := (s.busy - s.busySince).Seconds()
	if wall > 0 {
		out.CPU = db / wall
		out.InputRate = max(dp+float64(s.lag)-float64(s.lagSince), 0) / wall
	}
	if db > 0 {
		out.TrueRate = dp / db
	}
	return out
}

// take returns the figures since the previous take and starts a new interval.
func (s *stats) take(now time.Time) Stats {
	out := s.compute(now)
	s.since, s.processedSince, s.busySince, s.lagSince = now, s.processed, s.busy, s.lag
	return out
}

func (s *stats) peek() Stats { return s.compute(time.Now()) }
