package dst

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/strata-sched/strata/coordinator/tiercore"
	"github.com/strata-sched/strata/interfaces"
)

// base is the virtual clock's zero, as a wall time (the cores take time.Time).
var base = time.Unix(1_700_000_000, 0)

// The protocol's timings in the simulation: tierd's defaults scaled down (so
// that a seed covers many leases) with their ratios kept.
const (
	hostTTL        = 2 * time.Second        // region → host lease
	regionTTL      = 6 * time.Second        // global → region lease
	reportInterval = 500 * time.Millisecond // every child reports this often
	tickInterval   = 500 * time.Millisecond // control round and session upkeep
	grace          = 500 * time.Millisecond // after lease + margin, before a child is lost
	driftMargin    = 200 * time.Millisecond
	keepalive      = 3 * time.Second // a parent drops a session silent this long
	maxDriftPPM    = 10_000          // ±1% clock rate
	hostCapacity   = 4
	restateEvery   = 6 // a region restates what it holds every n reports
)

// Config shapes one simulated run. The zero value is a usable default.
type Config struct {
	Regions        int // region groups (default 2)
	HostsPerRegion int // default 2
	GlobalReplicas int // default 3
	RegionReplicas int // default 2
	Shards         int // shards created at the start (default 6); the top tier creates and deletes more
	MaxShards      int // at most this many at once (default 10)
	Faults         int // faults in the plan (default 6)
	// FaultFor is the fault window; QuietFor the quiet run after it, before
	// the nothing-lost check (defaults 20s and 25s).
	FaultFor, QuietFor time.Duration
	// Mutations and NoWorkerLease put back issue 20's failure modes (tests only).
	Mutations     tiercore.Mutations
	NoWorkerLease bool
	// Trace keeps a readable line per step (the last TraceLines are returned).
	Trace      bool
	TraceLines int
	// Plan replaces the fault plan drawn from the seed (shrinking sets it).
	Plan []Fault
	// ReuseShardIDs makes the top tier's workload create a deleted shard's
	// ID again (a job deleted and submitted again). Off by default: it
	// exposes a known gap (TestKnownGapDeletedShardReused) — a deleted
	// shard's revoke is sent once, so when it is lost (tierd's outbox drops
	// a message when full) and the ID is created again before the old owner
	// restates what it holds, two regions run it.
	ReuseShardIDs bool
}

func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Regions, 2)
	def(&c.HostsPerRegion, 2)
	def(&c.GlobalReplicas, 3)
	def(&c.RegionReplicas, 2)
	def(&c.Shards, 6)
	def(&c.MaxShards, 10)
	def(&c.Faults, 6)
	def(&c.TraceLines, 40)
	if c.FaultFor <= 0 {
		c.FaultFor = 20 * time.Second
	}
	if c.QuietFor <= 0 {
		c.QuietFor = 25 * time.Second
	}
	return c
}

type pkind uint8

const (
	kGlobal pkind = iota + 1
	kRegion
	kHost
)

// proc is one process: a tier replica or a host agent.
type proc struct {
	id     int
	name   string
	kind   pkind
	g      *group // tier replicas: their group
	region int    // region replicas and hosts: the region's index
	up     bool
	paused bool
	inc    int   // incarnation: a timer of an earlier one is void
	ppm    int64 // clock rate offset, parts per million
	held   []*event
	t      *tierProc
	h      *hostProc
}

// local is p's clock at virtual time v.
func (w *World) local(p *proc, v int64) time.Time {
	return base.Add(time.Duration(v + v*p.ppm/1_000_000))
}

func (w *World) now(p *proc) time.Time { return w.local(p, w.clock) }

// virt is the virtual time at which p's clock reads t.
func (w *World) virt(p *proc, t time.Time) int64 {
	l := int64(t.Sub(base))
	return l * 1_000_000 / (1_000_000 + p.ppm)
}

// group is one Raft group: its replicas, term, leader and log.
type group struct {
	name     string
	kind     pkind
	region   int
	replicas []*proc
	term     uint64
	leader   int // index in replicas; -1: none
	log      []logEntry
	electing bool
}

type evKind uint8

const (
	evMsg evKind = iota + 1
	evTick
	evFence
	evFault
	evEnd // the fault ends (heal, resume, restart)
	evDepose
	evSuspect
	evElect
	evStepDown
	evQuiet
)

type event struct {
	at   int64
	seq  uint64
	kind evKind
	proc int
	inc  int
	m    *msg
	arg  int
	term uint64
}

type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// World is one simulated run.
type World struct {
	cfg     Config
	clock   int64 // virtual ns since base
	q       eventQueue
	seq     uint64
	rng     *rand.Rand // network, workload and scheduling
	net     netConfig
	procs   []*proc
	global  *group
	regions []*group
	hosts   [][]*proc // by region
	nextSID uint64
	parts   []partition
	plan    []Fault
	quiet   bool // the fault window is over
	steps   int
	digest  uint64
	trace   []string
	viol    *Violation
	chk     checker
	stats   Stats
	// nextShard numbers the shards the workload creates; deletedIDs are the
	// IDs it deleted (ReuseShardIDs creates them again).
	nextShard  int
	deletedIDs []interfaces.ShardID
}

func (w *World) schedule(at int64, e *event) {
	if at < w.clock {
		at = w.clock
	}
	e.at = at
	w.seq++
	e.seq = w.seq
	heap.Push(&w.q, e)
}

func (w *World) after(d time.Duration, e *event) { w.schedule(w.clock+int64(d), e) }

// dur is a random duration in [lo, hi).
func (w *World) dur(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(w.rng.Int64N(int64(hi-lo)))
}

func (w *World) tracef(format string, args ...any) {
	if !w.cfg.Trace {
		return
	}
	line := fmt.Sprintf("%9.3fs ", float64(w.clock)/1e9) + fmt.Sprintf(format, args...)
	if len(w.trace) >= w.cfg.TraceLines {
		copy(w.trace, w.trace[1:])
		w.trace = w.trace[:len(w.trace)-1]
	}
	w.trace = append(w.trace, line)
}

// mix folds v into the run's digest (FNV-1a over 64-bit words).
func (w *World) mix(vs ...uint64) {
	for _, v := range vs {
		w.digest ^= v
		w.digest *= 1099511628211
	}
}

func shardID(n int) interfaces.ShardID { return interfaces.ShardID(fmt.Sprintf("j/%d", n)) }

func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
