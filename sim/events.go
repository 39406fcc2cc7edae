package sim

import (
	"container/heap"
	"sync"
	"time"
)

type evKind uint8

const (
	evGlobalRound evKind = iota // periodic global round; reschedules itself
	evGlobalNow                 // event-triggered global round
	evRegionRound               // periodic region round (a = region); reschedules itself
	evRegionNow                 // event-triggered region round (a = region)
	evLand                      // a move lands (a = shard, b = move tag)
	evHostFail                  // a = host
	evHostRecover               // a = host
	evRegionLoss                // a = region
	evRegionBack                // a = region
	evDrain                     // a = host
	evAddHosts                  // a = index into Scenario.Events
	evJobArrive                 // a = job
	evJobLeave                  // a = job
	evHotOn                     // a = index into hot sets
	evHotOff                    // a = index into hot sets
	evRackRound                 // periodic rack round (a = rack); reschedules itself
	evRackNow                   // event-triggered rack round (a = rack)
	evAck                       // an operator acknowledges a mass failure (a = index into Scenario.Events)
	evHostSlow                  // a host's processing speed changes (a = index into Scenario.Events)
)

// event is one discrete event. Events are ordered by (at, seq): seq is the order
// in which they were scheduled, so ties resolve the same way on every run.
type event struct {
	at   time.Duration
	seq  uint64
	kind evKind
	a, b int32
}

type eventQueue []event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// scheduler is the discrete-event queue with its sequence counter.
type scheduler struct {
	q   eventQueue
	seq uint64
}

func (s *scheduler) schedule(at time.Duration, kind evKind, a, b int32) {
	s.seq++
	heap.Push(&s.q, event{at: at, seq: s.seq, kind: kind, a: a, b: b})
}

// next pops the earliest event at or before t.
func (s *scheduler) next(t time.Duration) (event, bool) {
	if len(s.q) == 0 || s.q[0].at > t {
		return event{}, false
	}
	return heap.Pop(&s.q).(event), true
}

// Epoch is the virtual clock's time zero: runs print virtual times as offsets
// from it, and policies see Now = Epoch + virtual time.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// VirtualClock is an interfaces.Clock on virtual time: Now is the time last Set
// (from Epoch), and After fires once Set moves past the deadline.
type VirtualClock struct {
	mu      sync.Mutex
	now     time.Duration
	waiters []waiter
}

type waiter struct {
	at time.Duration
	ch chan time.Time
}

// Now returns the virtual time.
func (c *VirtualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Epoch.Add(c.now)
}

// After returns a channel that receives the virtual time once d has passed.
func (c *VirtualClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- Epoch.Add(c.now)
		return ch
	}
	c.waiters = append(c.waiters, waiter{at: c.now + d, ch: ch})
	return ch
}

// Set advances the clock to t (never backwards) and fires due waiters.
func (c *VirtualClock) Set(t time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t < c.now {
		return
	}
	c.now = t
	if len(c.waiters) == 0 {
		return
	}
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at <= t {
			w.ch <- Epoch.Add(t)
		} else {
			kept = append(kept, w)
		}
	}
	c.waiters = kept
}
