package dst

import (
	"time"

	"github.com/strata-sched/strata/interfaces"
)

type mkind uint8

const (
	mHello    mkind = iota + 1 // child → parent: open a session (or restate on it)
	mReport                    // child → parent, every interval
	mGrant                     // parent → child: a lease, answering report Seq
	mAssign                    // parent → child
	mRevoke                    // parent → child
	mAck                       // child → parent
	mRedirect                  // parent → child: I do not lead; Leader does
	mReset                     // either way: the stream ended (gave up, closed, process died)
)

var mkindNames = [...]string{"?", "hello", "report", "grant", "assign", "revoke", "ack", "redirect", "reset"}

func (k mkind) String() string { return mkindNames[k] }

// msg is one message of a session (sid) between two processes, in domain
// values (the wire schema is coordinator/session's concern).
type msg struct {
	kind     mkind
	from, to int
	sid      uint64
	child    interfaces.ChildID
	held     map[interfaces.ShardID]uint64 // hello
	gterm    uint64                        // hello: the child group's term
	capacity int                           // hello
	restate  bool                          // hello on a live session
	seq      uint64                        // report, grant
	running  []interfaces.ShardID          // report (hosts)
	ttl      time.Duration                 // grant
	shard    interfaces.ShardID            // assign, revoke, ack
	epoch    uint64                        // assign, revoke, ack
	spec     interfaces.Shard              // assign
	revoke   bool                          // ack: of a revoke (else of an assign)
	ok       bool                          // ack
	stale    bool                          // ack: refused as stale
	revoked  uint64                        // ack: the tombstone that refused it
	leader   int                           // redirect: -1 unknown
}

// netConfig is the seed's network: how often a message is dropped,
// duplicated, or slow (overtaken by later ones).
type netConfig struct {
	drop, dup, slow float64
}

// partition cuts the processes in side from every other process until end.
type partition struct {
	side map[int]bool
	end  int64
}

func (w *World) cut(a, b int) bool {
	for _, p := range w.parts {
		if p.side[a] != p.side[b] {
			return true
		}
	}
	return false
}

// send puts m on the network.
func (w *World) send(m *msg) {
	w.stats.Messages++
	if w.cut(m.from, m.to) {
		return
	}
	if m.kind != mReset && w.rng.Float64() < w.net.drop {
		return
	}
	w.deliver(m)
	if m.kind != mReset && w.rng.Float64() < w.net.dup {
		c := *m
		w.deliver(&c)
	}
}

func (w *World) deliver(m *msg) {
	d := w.dur(time.Millisecond, 10*time.Millisecond)
	if w.rng.Float64() < w.net.slow {
		d += w.dur(0, 400*time.Millisecond)
	}
	w.after(d, &event{kind: evMsg, proc: m.to, m: m})
}

// csess is the child side of a session with a parent replica.
type csess struct {
	sid      uint64
	parent   int // proc id
	lastRecv time.Time
	seq      uint64
	sentAt   map[uint64]time.Time // report seq (0: the Hello) → send time, our clock
	reports  int
}

// psess is the parent side of a child's session.
type psess struct {
	sid      uint64
	proc     int
	term     uint64 // the leader's term when it opened
	gterm    uint64
	lastSeq  uint64
	lastRecv time.Time
}

// silence is how long a child waits on a silent parent before it gives the
// session up: 1.5 report intervals, at most half the lease (session.Client).
func silence(ttl time.Duration) time.Duration { return min(reportInterval*3/2, ttl/2) }

// parentGroup is the group p's sessions go up to.
func (w *World) parentGroup(p *proc) *group {
	if p.kind == kHost {
		return w.regions[p.region]
	}
	return w.global
}

// connect opens a new session from child p to a replica of its parent group:
// the one hinted (a redirect's), or one drawn at random.
func (w *World) connect(p *proc, hint int, hello func(sid uint64) *msg) *csess {
	g := w.parentGroup(p)
	to := hint
	if to < 0 {
		to = g.replicas[w.rng.IntN(len(g.replicas))].id
	}
	w.nextSID++
	now := w.now(p)
	cs := &csess{sid: w.nextSID, parent: to, lastRecv: now, sentAt: map[uint64]time.Time{0: now}}
	m := hello(cs.sid)
	m.from, m.to, m.sid = p.id, to, cs.sid
	w.send(m)
	return cs
}

// report numbers and sends a report on cs, remembering its send time.
func (w *World) report(p *proc, cs *csess, running []interfaces.ShardID, capacity int) {
	cs.seq++
	now := w.now(p)
	cs.sentAt[cs.seq] = now
	delete(cs.sentAt, cs.seq-16) // a grant answering an older one renews nothing
	cs.reports++
	w.send(&msg{kind: mReport, from: p.id, to: cs.parent, sid: cs.sid, seq: cs.seq, running: running, capacity: capacity})
}

// reset tells the other end that the stream sid ended.
func (w *World) reset(from, to int, sid uint64) {
	w.send(&msg{kind: mReset, from: from, to: to, sid: sid})
}
