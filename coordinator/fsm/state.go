package fsm

import (
	"sort"
	"time"

	"github.com/strata-sched/strata/coordinator/acl"
	"github.com/strata-sched/strata/interfaces"
)

// shardRec is one shard: its spec, its owner and epoch, and its in-flight move.
// A shardRec is immutable once it is in the state's slice: every change builds a new
// record and swaps the pointer, so a snapshot that copied the slice keeps seeing the
// records as they were (see doc.go).
type shardRec struct {
	id         interfaces.ShardID
	job        string
	load       interfaces.Load
	inputRate  float64
	stateBytes int64
	slo        time.Duration
	cons       *interfaces.ShardConstraints // nil when the shard has no constraints
	owner      interfaces.ChildID           // "" when unassigned
	epoch      interfaces.Epoch             // last epoch given; kept while unassigned
	flight     *interfaces.Move             // the in-flight move, nil when none
	quarantine string                       // why the shard is quarantined; "" when it is not
}

func newShardRec(s *interfaces.Shard) *shardRec {
	r := &shardRec{
		id:         s.ID,
		job:        s.Job,
		load:       s.Load,
		inputRate:  s.InputRate,
		stateBytes: s.StateBytes,
		slo:        s.LatencySLO,
	}
	if !zeroConstraints(&s.Constraints) {
		c := s.Constraints
		r.cons = &c
	}
	return r
}

func zeroConstraints(c *interfaces.ShardConstraints) bool {
	return c.Pinned == "" && len(c.Allowed) == 0 && len(c.Labels) == 0 && c.AntiAffinity == "" && c.MaxPerChild == 0
}

// spec returns the shard spec. Slices and maps in the constraints are shared with
// the state and must be treated as read-only.
func (r *shardRec) spec() interfaces.Shard {
	s := interfaces.Shard{
		ID:         r.id,
		Job:        r.job,
		Load:       r.load,
		InputRate:  r.inputRate,
		StateBytes: r.stateBytes,
		LatencySLO: r.slo,
	}
	if r.cons != nil {
		s.Constraints = *r.cons
	}
	return s
}

// effective is the child the shard's load counts on: the target of its in-flight
// move (in-flight moves count as done), else its owner.
func (r *shardRec) effective() interfaces.ChildID {
	if r.flight != nil {
		return r.flight.To
	}
	return r.owner
}

// childRec is one child with the load and shard count that count on it (owned
// shards plus incoming in-flight moves, minus outgoing ones). childRec values are
// copied whole into snapshots; their maps are never modified in place.
type childRec struct {
	child  interfaces.Child
	used   interfaces.Load
	shards int
	// outgoing counts the shards this child still owns while their move away is
	// in flight (they count on the target in used and shards). Derived: it is not
	// in the snapshot but recomputed on restore.
	outgoing int
}

// Change says what an applied-plan log entry did to a shard. Only ever append.
type Change uint8

// Changes.
const (
	ChangeAssign     Change = iota + 1 // first placement
	ChangeUnassign                     // taken off its owner
	ChangeMove                         // new owner committed in one step
	ChangeBegin                        // move started (in flight)
	ChangeComplete                     // in-flight move committed
	ChangeAbort                        // in-flight move dropped
	ChangeQuarantine                   // quarantined (taken off its owner, if any)
	ChangeRelease                      // released from quarantine by an operator
	changeEnd
)

var changeNames = [...]string{"", "assign", "unassign", "move", "begin", "complete", "abort", "quarantine", "release"}

func (c Change) String() string {
	if c > 0 && int(c) < len(changeNames) {
		return changeNames[c]
	}
	return "unknown"
}

// LogEntry is one entry of the applied-plan log: a change of a shard's placement,
// with why, the epoch it left the shard at and the Raft index that committed it.
// At is when the leader appended that Raft entry (raft.Log.AppendedAt, in Unix
// nanoseconds: the same on every replica, replicated with the entry), 0 when
// unknown (commands applied outside Raft, entries of older snapshots).
type LogEntry struct {
	Index  uint64
	At     int64
	Change Change
	Tier   string
	Shard  interfaces.ShardID
	From   interfaces.ChildID
	To     interfaces.ChildID
	Epoch  interfaces.Epoch
	Reason string
	Goal   string
	Delta  float64
}

// ring is the bounded applied-plan log: the newest limit entries, oldest first.
// Its buffer grows as entries arrive, so a large limit (a configured one, or a
// corrupt snapshot's, before its checksum is checked) allocates nothing ahead.
type ring struct {
	buf   []LogEntry
	limit int
	start int // index of the oldest entry (0 until the buffer is full)
}

func newRing(capacity int) ring { return ring{limit: capacity} }

func (g *ring) add(e LogEntry) {
	if g.limit == 0 {
		return
	}
	if len(g.buf) < g.limit {
		g.buf = append(g.buf, e)
		return
	}
	g.buf[g.start] = e
	g.start = (g.start + 1) % len(g.buf)
}

// entries returns a copy of the entries, oldest first.
func (g *ring) entries() []LogEntry {
	out := make([]LogEntry, len(g.buf))
	for i := range out {
		out[i] = g.buf[(g.start+i)%len(g.buf)]
	}
	return out
}

// state is everything the FSM holds. It is owned by the FSM's lock.
type state struct {
	applied  uint64
	at       int64 // AppendedAt of the entry being applied (stamps its log entries)
	children map[interfaces.ChildID]*childRec
	shards   []*shardRec                  // dense, in insertion order (swap-delete)
	index    map[interfaces.ShardID]int32 // shard → position in shards
	inflight int                          // shards with a move in flight
	log      ring
	// floor is the largest epoch of any shard deleted with RetireShards:
	// a shard record created from nothing starts at it.
	floor interfaces.Epoch
	// tokens are the ACL tokens by ID; tokenHashes finds one by the hash of
	// its secret.
	tokens      map[string]acl.Token
	tokenHashes map[acl.Hash]string
}

func newState(logCap, shardHint int) *state {
	return &state{
		tokens:      map[string]acl.Token{},
		tokenHashes: map[acl.Hash]string{},
		children:    map[interfaces.ChildID]*childRec{},
		shards:      make([]*shardRec, 0, shardHint),
		index:       make(map[interfaces.ShardID]int32, shardHint),
		log:         newRing(logCap),
	}
}

func (s *state) shard(id interfaces.ShardID) *shardRec {
	i, ok := s.index[id]
	if !ok {
		return nil
	}
	return s.shards[i]
}

// outgoing adds n to the count of child id's shards with a move away in flight.
func (s *state) addOutgoing(id interfaces.ChildID, n int) {
	if c, ok := s.children[id]; ok {
		c.outgoing += n
	}
}

// put stores r under its ID, replacing any record of that shard.
func (s *state) put(r *shardRec) {
	if i, ok := s.index[r.id]; ok {
		s.shards[i] = r
		return
	}
	s.index[r.id] = int32(len(s.shards))
	s.shards = append(s.shards, r)
}

func (s *state) remove(id interfaces.ShardID) {
	i, ok := s.index[id]
	if !ok {
		return
	}
	last := len(s.shards) - 1
	if int(i) != last {
		moved := s.shards[last]
		s.shards[i] = moved
		s.index[moved.id] = i
	}
	s.shards[last] = nil
	s.shards = s.shards[:last]
	delete(s.index, id)
}

// charge adds l to child id's used load and n to its shard count. A missing child
// (the empty owner of an unassigned shard) is ignored.
func (s *state) charge(id interfaces.ChildID, l interfaces.Load, n int) {
	if id == "" {
		return
	}
	c, ok := s.children[id]
	if !ok {
		return
	}
	if n > 0 {
		c.used = c.used.Add(l)
	} else {
		c.used = c.used.Sub(l)
	}
	c.shards += n
}

// sortedTokens returns the tokens sorted by ID.
func (s *state) sortedTokens() []acl.Token {
	out := make([]acl.Token, 0, len(s.tokens))
	for _, t := range s.tokens {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (s *state) sortedChildren() []childRec {
	out := make([]childRec, 0, len(s.children))
	for _, c := range s.children {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].child.ID < out[j].child.ID })
	return out
}
