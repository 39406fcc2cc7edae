package exec

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// Discipline names how a host picks the next item to run.
type Discipline string

// The disciplines.
const (
	// LLF runs the item of least laxity (arrival + SLO − now − cost) first.
	LLF Discipline = "llf"
	// FIFO runs the oldest item on the host first.
	FIFO Discipline = "fifo"
)

// ParseDiscipline returns the discipline named s ("" means llf); field names the
// configuration key in the error.
func ParseDiscipline(field, s string) (Discipline, error) {
	switch Discipline(s) {
	case "", LLF:
		return LLF, nil
	case FIFO:
		return FIFO, nil
	}
	return "", &interfaces.FieldError{Field: field, Rule: `must be "llf" or "fifo"`, Value: s}
}

// Arrivals names how items arrive.
type Arrivals string

// The arrival processes.
const (
	// Poisson draws exponential gaps of mean 1/rate from a seeded generator.
	Poisson Arrivals = "poisson"
	// Deterministic spaces items exactly 1/rate apart.
	Deterministic Arrivals = "deterministic"
)

// ParseArrivals returns the arrival process named s ("" means poisson).
func ParseArrivals(field, s string) (Arrivals, error) {
	switch Arrivals(s) {
	case "", Poisson:
		return Poisson, nil
	case Deterministic:
		return Deterministic, nil
	}
	return "", &interfaces.FieldError{Field: field, Rule: `must be "poisson" or "deterministic"`, Value: s}
}

// Defaults of Config.
const (
	DefaultWindow    = 10 * time.Second
	DefaultMaxQueued = 1 << 20
	DefaultMaxStep   = time.Minute
)

// Config configures a Core. Zero values take the defaults.
type Config struct {
	// Cores is the number of cores (≥ 1); Speed the work one core does per
	// second of time (default 1), so a capacity of 2.5 cpu is 3 cores at 5/6.
	Cores int
	Speed float64
	// Discipline picks the next item: llf (default) or fifo.
	Discipline Discipline
	// Arrivals is poisson (default) or deterministic.
	Arrivals Arrivals
	// Seed seeds the Poisson arrivals (with each shard's id).
	Seed uint64
	// Window is the span of the latency percentiles (default 10s).
	Window time.Duration
	// MaxQueued caps the items queued on the host (default 2^20); arrivals
	// beyond it are dropped and counted.
	MaxQueued int
	// MaxStep caps how much time one Advance simulates (default 1 minute).
	MaxStep time.Duration
	// Trace, when not nil, is called synchronously for every item that starts
	// and completes (tests).
	Trace func(Event)
}

// EventKind says what happened to an item.
type EventKind uint8

// The event kinds.
const (
	EvStart EventKind = iota + 1
	EvComplete
)

// Event is one item starting or completing, for Config.Trace.
type Event struct {
	Kind  EventKind
	Shard interfaces.ShardID
	// Seq is the item's index among the shard's queued items (0, 1, …).
	Seq uint64
	// Arrival and At are on the core's timeline (nanoseconds since New's start).
	Arrival, At int64
}

// Params are a shard's execution parameters.
type Params struct {
	// Rate is items per second (≥ 0; 0 means none arrive).
	Rate float64
	// Cost is the processing time of one item on one core of speed 1 (> 0).
	Cost time.Duration
	// SLO is the latency target (> 0): it sets the laxity and what a miss is.
	SLO time.Duration
}

func (p Params) validate(field string) error {
	if math.IsNaN(p.Rate) || math.IsInf(p.Rate, 0) || p.Rate < 0 {
		return &interfaces.FieldError{Field: field + ".rate", Rule: "must be a finite number ≥ 0", Value: fmt.Sprint(p.Rate)}
	}
	if p.Cost <= 0 {
		return &interfaces.FieldError{Field: field + ".cost", Rule: "must be > 0", Value: p.Cost.String()}
	}
	if p.SLO <= 0 {
		return &interfaces.FieldError{Field: field + ".slo", Rule: "must be > 0", Value: p.SLO.String()}
	}
	return nil
}

// Stats are a shard's counters and measured latency at the core's time.
type Stats struct {
	// Life-time counters; Arrived = Completed + Running + Queued + Dropped.
	Arrived, Completed, Dropped, Missed uint64
	Running, Queued                     int
	// OldestQueued is the age of the shard's oldest queued item (0 if none).
	OldestQueued time.Duration
	// Window holds the items completed in the sliding window.
	Window WindowStats
}

// WindowStats are the latency figures of one sliding window.
type WindowStats struct {
	Completed, Missed uint64
	// P50 and P99 are 0 when nothing completed in the window.
	P50, P99 time.Duration
}

const never = math.MaxInt64

// Core is one host's execution model. See the package documentation.
type Core struct {
	cfg     Config
	start   time.Time
	skipped time.Duration // time cut out by MaxStep
	now     int64         // core timeline, ns
	slotDur int64

	shards  map[interfaces.ShardID]*shard
	ord     uint64 // insertion counter for tie-breaks
	queued  int    // items queued on the host
	done    uint64 // items completed on the host
	arrHeap minHeap[*shard]
	rdyHeap minHeap[*shard]
	// running holds the running items by finish time (ties: shard order, then
	// seq), at most one per core.
	running minHeap[job]
}

type shard struct {
	id      interfaces.ShardID
	ord     uint64
	p       Params
	rng     *rand.Rand
	next    int64 // next arrival; never when none
	q       ring
	headSeq uint64 // seq of the queue head
	arrIdx  int    // index in arrHeap, -1 when absent
	rdyIdx  int    // index in rdyHeap, -1 when absent
	key     int64  // ready-heap key of the head

	arrived, completed, dropped, missed uint64
	runningN                            int
	hist                                window
}

type job struct {
	sh      *shard
	seq     uint64
	arrival int64
	finish  int64
}

// New returns a core whose timeline starts at start.
func New(cfg Config, start time.Time) (*Core, error) {
	if cfg.Cores < 1 {
		return nil, &interfaces.FieldError{Field: "exec.cores", Rule: "must be ≥ 1", Value: fmt.Sprint(cfg.Cores)}
	}
	if cfg.Speed == 0 {
		cfg.Speed = 1
	}
	if math.IsNaN(cfg.Speed) || math.IsInf(cfg.Speed, 0) || cfg.Speed <= 0 {
		return nil, &interfaces.FieldError{Field: "exec.speed", Rule: "must be a finite number > 0", Value: fmt.Sprint(cfg.Speed)}
	}
	var err error
	if cfg.Discipline, err = ParseDiscipline("exec.discipline", string(cfg.Discipline)); err != nil {
		return nil, err
	}
	if cfg.Arrivals, err = ParseArrivals("exec.arrivals", string(cfg.Arrivals)); err != nil {
		return nil, err
	}
	if cfg.Window < 0 || cfg.MaxQueued < 0 || cfg.MaxStep < 0 {
		return nil, &interfaces.FieldError{Field: "exec.window/max_queued/max_step", Rule: "must be ≥ 0"}
	}
	if cfg.Window == 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.Window < 4*time.Microsecond {
		return nil, &interfaces.FieldError{Field: "exec.window", Rule: "must be ≥ 4µs", Value: cfg.Window.String()}
	}
	if cfg.MaxQueued == 0 {
		cfg.MaxQueued = DefaultMaxQueued
	}
	if cfg.MaxStep == 0 {
		cfg.MaxStep = DefaultMaxStep
	}
	c := &Core{cfg: cfg, start: start, slotDur: int64(cfg.Window) / slots,
		shards: map[interfaces.ShardID]*shard{}}
	c.arrHeap = minHeap[*shard]{less: func(a, b *shard) bool {
		if a.next != b.next {
			return a.next < b.next
		}
		return a.ord < b.ord
	}, at: func(s *shard, i int) { s.arrIdx = i }}
	c.rdyHeap = minHeap[*shard]{less: func(a, b *shard) bool {
		if a.key != b.key {
			return a.key < b.key
		}
		return a.ord < b.ord
	}, at: func(s *shard, i int) { s.rdyIdx = i }}
	c.running = minHeap[job]{less: func(a, b job) bool {
		if a.finish != b.finish {
			return a.finish < b.finish
		}
		if a.sh.ord != b.sh.ord {
			return a.sh.ord < b.sh.ord
		}
		return a.seq < b.seq
	}}
	return c, nil
}

// Config returns the configuration in force (defaults filled in).
func (c *Core) Config() Config { return c.cfg }

// Now returns the core's time on its timeline (nanoseconds since the start).
func (c *Core) Now() int64 { return c.now }

func (c *Core) timeline(t time.Time) int64 {
	return int64(t.Sub(c.start) - c.skipped)
}

// Add adds shard id with params p at time now (after advancing to now). Its
// first item arrives one gap after now.
func (c *Core) Add(now time.Time, id interfaces.ShardID, p Params) error {
	if err := p.validate("exec.shard[" + string(id) + "]"); err != nil {
		return err
	}
	if _, ok := c.shards[id]; ok {
		return fmt.Errorf("exec: shard %s: %w: already added", id, interfaces.ErrConflict)
	}
	c.Advance(now)
	h := fnv.New64a()
	h.Write([]byte(id))
	s := &shard{id: id, ord: c.ord, p: p, arrIdx: -1, rdyIdx: -1, next: never,
		rng: rand.New(rand.NewPCG(c.cfg.Seed, h.Sum64()))}
	c.ord++
	c.shards[id] = s
	c.schedule(s, c.now)
	return nil
}

// Update changes shard id's params at now (after advancing to now). Queued
// items keep their arrival and take the new SLO and cost; the next arrival is
// redrawn from now when the rate changes.
func (c *Core) Update(now time.Time, id interfaces.ShardID, p Params) error {
	if err := p.validate("exec.shard[" + string(id) + "]"); err != nil {
		return err
	}
	s, ok := c.shards[id]
	if !ok {
		return fmt.Errorf("exec: shard %s: %w", id, interfaces.ErrNotFound)
	}
	c.Advance(now)
	old := s.p
	s.p = p
	if p.Rate != old.Rate {
		c.schedule(s, c.now)
	}
	if s.rdyIdx >= 0 {
		s.key = c.keyOf(s, s.q.head())
		c.rdyHeap.fix(s.rdyIdx)
	}
	return nil
}

// Remove removes shard id at now (after advancing to now): its queued and
// running items are discarded, freeing their cores. It returns the shard's
// final stats.
func (c *Core) Remove(now time.Time, id interfaces.ShardID) (Stats, error) {
	s, ok := c.shards[id]
	if !ok {
		return Stats{}, fmt.Errorf("exec: shard %s: %w", id, interfaces.ErrNotFound)
	}
	c.Advance(now)
	st := c.stats(s)
	if s.arrIdx >= 0 {
		c.arrHeap.remove(s.arrIdx)
	}
	if s.rdyIdx >= 0 {
		c.rdyHeap.remove(s.rdyIdx)
	}
	c.queued -= s.q.len()
	if s.runningN > 0 {
		// Every running item of s (at most one per core).
		c.running.keep(func(j job) bool { return j.sh != s })
		s.runningN = 0
	}
	delete(c.shards, id)
	c.dispatch()
	return st, nil
}

// Stats returns shard id's stats at the core's current time.
func (c *Core) Stats(id interfaces.ShardID) (Stats, bool) {
	s, ok := c.shards[id]
	if !ok {
		return Stats{}, false
	}
	return c.stats(s), true
}

// Len returns the number of shards.
func (c *Core) Len() int { return len(c.shards) }

// Completed returns how many items the host completed.
func (c *Core) Completed() uint64 { return c.done }

// Busy returns the number of busy cores.
func (c *Core) Busy() int { return len(c.running.s) }

func (c *Core) stats(s *shard) Stats {
	st := Stats{Arrived: s.arrived, Completed: s.completed, Dropped: s.dropped, Missed: s.missed,
		Running: s.runningN, Queued: s.q.len()}
	if s.q.len() > 0 {
		st.OldestQueued = time.Duration(c.now - s.q.head())
	}
	st.Window = s.hist.stats(c.now, c.slotDur)
	return st
}

// schedule draws s's next arrival after from.
func (c *Core) schedule(s *shard, from int64) {
	next := int64(never)
	if s.p.Rate > 0 {
		gap := 1 / s.p.Rate
		if c.cfg.Arrivals == Poisson {
			gap = s.rng.ExpFloat64() / s.p.Rate
		}
		ns := gap * 1e9
		if ns < 1 {
			ns = 1
		}
		if ns < float64(never-from) {
			next = from + int64(ns)
		}
	}
	s.next = next
	switch {
	case next == never && s.arrIdx >= 0:
		c.arrHeap.remove(s.arrIdx)
	case next != never && s.arrIdx >= 0:
		c.arrHeap.fix(s.arrIdx)
	case next != never:
		c.arrHeap.push(s)
	}
}

func (c *Core) keyOf(s *shard, arrival int64) int64 {
	if c.cfg.Discipline == FIFO {
		return arrival
	}
	return arrival + int64(s.p.SLO) - c.service(s)
}

// service is the time one item of s holds a core.
func (c *Core) service(s *shard) int64 {
	d := int64(float64(s.p.Cost) / c.cfg.Speed)
	if d < 1 {
		d = 1
	}
	return d
}

// Advance processes every arrival and completion up to to. A to not after the
// core's time is a no-op.
func (c *Core) Advance(to time.Time) {
	t := c.timeline(to)
	if t <= c.now {
		return
	}
	if d := time.Duration(t - c.now); d > c.cfg.MaxStep {
		cut := d - c.cfg.MaxStep
		c.skipped += cut
		t -= int64(cut)
	}
	for {
		na, nc := int64(never), int64(never)
		if len(c.arrHeap.s) > 0 {
			na = c.arrHeap.s[0].next
		}
		if len(c.running.s) > 0 {
			nc = c.running.s[0].finish
		}
		if na > t && nc > t {
			break
		}
		if nc <= na {
			c.now = nc
			c.complete(c.running.pop())
		} else {
			c.now = na
			c.arrive(c.arrHeap.s[0])
		}
		c.dispatch()
	}
	c.now = t
}

func (c *Core) arrive(s *shard) {
	s.arrived++
	if c.queued >= c.cfg.MaxQueued {
		s.dropped++
	} else {
		s.q.push(c.now)
		c.queued++
		if s.rdyIdx < 0 {
			s.key = c.keyOf(s, c.now)
			c.rdyHeap.push(s)
		}
	}
	c.schedule(s, c.now)
}

func (c *Core) complete(j job) {
	s := j.sh
	s.runningN--
	s.completed++
	c.done++
	lat := c.now - j.arrival
	miss := lat > int64(s.p.SLO)
	if miss {
		s.missed++
	}
	s.hist.record(c.now, c.slotDur, lat, miss)
	if c.cfg.Trace != nil {
		c.cfg.Trace(Event{Kind: EvComplete, Shard: s.id, Seq: j.seq, Arrival: j.arrival, At: c.now})
	}
}

// dispatch starts queue heads on idle cores in discipline order.
func (c *Core) dispatch() {
	for len(c.running.s) < c.cfg.Cores && len(c.rdyHeap.s) > 0 {
		s := c.rdyHeap.s[0]
		arrival := s.q.pop()
		seq := s.headSeq
		s.headSeq++
		c.queued--
		if s.q.len() > 0 {
			s.key = c.keyOf(s, s.q.head())
			c.rdyHeap.fix(0)
		} else {
			c.rdyHeap.remove(0)
		}
		s.runningN++
		c.running.push(job{sh: s, seq: seq, arrival: arrival, finish: c.now + c.service(s)})
		if c.cfg.Trace != nil {
			c.cfg.Trace(Event{Kind: EvStart, Shard: s.id, Seq: seq, Arrival: arrival, At: c.now})
		}
	}
}
