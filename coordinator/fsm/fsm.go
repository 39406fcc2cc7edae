package fsm

import (
	"fmt"
	"sort"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/strata-sched/strata/coordinator/acl"
	"github.com/strata-sched/strata/interfaces"
)

// DefaultPlanLogSize is the number of applied-plan log entries kept when
// Options.PlanLogSize is 0.
const DefaultPlanLogSize = 16384

// Options configure an FSM. Every replica of a group must use the same options:
// they shape the replicated state.
type Options struct {
	// PlanLogSize bounds the applied-plan log (entries kept, newest win). 0 means
	// DefaultPlanLogSize; negative keeps none.
	PlanLogSize int
	// LeanRestore makes Restore drop the current state before reading the
	// snapshot, as raft's FSM contract allows, instead of building the new state
	// beside it and swapping. Peak memory is then about one state instead of
	// two (see docs/benchmarks.md), but readers block for the whole restore and
	// a failed restore leaves the FSM empty: the node must treat that error as
	// fatal (raft's startup path then tries an older snapshot).
	LeanRestore bool
}

// FSM is one tier instance's replicated state. It implements raft.FSM and
// raft.BatchingFSM. Apply and Restore run on Raft's FSM goroutine; the read methods
// may be called from any goroutine (they are stale reads: the state as of the last
// applied entry on this replica).
type FSM struct {
	mu     sync.RWMutex
	st     *state
	logCap int
	lean   bool

	spareMu sync.Mutex
	spare   []*shardRec // pointer slice of a released snapshot, for reuse
}

var (
	_ raft.FSM         = (*FSM)(nil)
	_ raft.BatchingFSM = (*FSM)(nil)
)

// New returns an empty FSM with default options.
func New() *FSM { return NewWithOptions(Options{}) }

// NewWithOptions returns an empty FSM.
func NewWithOptions(o Options) *FSM {
	n := o.PlanLogSize
	switch {
	case n == 0:
		n = DefaultPlanLogSize
	case n < 0:
		n = 0
	}
	return &FSM{st: newState(n, 0), logCap: n, lean: o.LeanRestore}
}

// Apply applies one committed log entry and returns its *Result. An entry that
// cannot be decoded is fatal: Apply panics rather than let this replica diverge
// from the others (see doc.go). Domain rejections are in the Result.
func (f *FSM) Apply(l *raft.Log) interface{} {
	c := mustDecode(l)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st.apply(l.Index, appendedAt(l), c)
}

// appendedAt is when the leader appended l, in Unix nanoseconds (0 if unset).
func appendedAt(l *raft.Log) int64 {
	if l.AppendedAt.IsZero() {
		return 0
	}
	return l.AppendedAt.UnixNano()
}

// ApplyBatch applies several committed entries under one lock. Configuration
// entries get a nil response.
func (f *FSM) ApplyBatch(logs []*raft.Log) []interface{} {
	cmds := make([]Command, len(logs))
	for i, l := range logs {
		if l.Type == raft.LogCommand {
			cmds[i] = mustDecode(l)
		}
	}
	out := make([]interface{}, len(logs))
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, c := range cmds {
		if c != nil {
			out[i] = f.st.apply(logs[i].Index, appendedAt(logs[i]), c)
		}
	}
	return out
}

func mustDecode(l *raft.Log) Command {
	c, err := Decode(l.Data)
	if err != nil {
		panic(fmt.Sprintf("fsm: FATAL: committed log entry at index %d (term %d) cannot be decoded: %v; "+
			"stopping so this replica does not diverge (is this binary older than the one that wrote the entry?)",
			l.Index, l.Term, err))
	}
	return c
}

// ApplyCommand applies c at index as if it had been committed there. It goes
// through Encode and Decode exactly like a Raft entry, so the result is the same
// as on a replica and the state never shares slices or maps with the caller's
// command. An invalid command returns an error and changes nothing. The simulator
// and tests use it; daemons go through Raft.
func (f *FSM) ApplyCommand(index uint64, c Command) (*Result, error) {
	b, err := Encode(c)
	if err != nil {
		return nil, err
	}
	dc, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("fsm: an encoded command does not decode (a bug): %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st.apply(index, 0, dc), nil
}

// AppliedIndex is the Raft index of the last command applied (or restored).
func (f *FSM) AppliedIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.applied
}

// EpochFloor is the largest epoch any shard deleted with RetireShards had: a
// revoke of a shard the state no longer has, at this epoch, is never older than
// the epoch a child holds it at (anti-entropy, coordinator/tiercore).
func (f *FSM) EpochFloor() interfaces.Epoch {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.floor
}

// Stats are counts of what the FSM holds.
type Stats struct {
	AppliedIndex uint64
	Children     int
	Shards       int
	Assigned     int
	InFlight     int
	PlanLog      int
}

// Stats returns counts. It scans the shards (O(shards)).
func (f *FSM) Stats() Stats {
	f.mu.RLock()
	defer f.mu.RUnlock()
	st := Stats{AppliedIndex: f.st.applied, Children: len(f.st.children), Shards: len(f.st.shards),
		InFlight: f.st.inflight, PlanLog: len(f.st.log.buf)}
	for _, r := range f.st.shards {
		if r.owner != "" {
			st.Assigned++
		}
	}
	return st
}

// Child returns a child's spec.
func (f *FSM) Child(id interfaces.ChildID) (interfaces.Child, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	c, ok := f.st.children[id]
	if !ok {
		return interfaces.Child{}, false
	}
	return c.child, true
}

// ChildUsage is a child with what counts on it: owned shards and incoming in-flight
// moves (outgoing ones already count on their target).
type ChildUsage struct {
	Child  interfaces.Child
	Used   interfaces.Load
	Shards int
}

// Children returns every child with its usage, sorted by ID.
func (f *FSM) Children() []ChildUsage {
	f.mu.RLock()
	defer f.mu.RUnlock()
	recs := f.st.sortedChildren()
	out := make([]ChildUsage, len(recs))
	for i, c := range recs {
		out[i] = ChildUsage{Child: c.child, Used: c.used, Shards: c.shards}
	}
	return out
}

// ShardState is a shard as the FSM holds it.
type ShardState struct {
	Spec  interfaces.Shard
	Owner interfaces.ChildID // "" when unassigned
	Epoch interfaces.Epoch
	// InFlight is the shard's in-flight move, nil when none.
	InFlight *interfaces.Move
	// Quarantined says why the shard is quarantined ("" when it is not): it
	// is not placed until an operator releases it.
	Quarantined string
}

func (r *shardRec) state() ShardState {
	st := ShardState{Spec: r.spec(), Owner: r.owner, Epoch: r.epoch, Quarantined: r.quarantine}
	if r.flight != nil {
		m := *r.flight
		st.InFlight = &m
	}
	return st
}

// Shard returns one shard's spec, owner, epoch and in-flight move. Slices and maps
// in the spec are shared with the state: treat them as read-only.
func (f *FSM) Shard(id interfaces.ShardID) (ShardState, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	r := f.st.shard(id)
	if r == nil {
		return ShardState{}, false
	}
	return r.state(), true
}

// Assignment returns the shard's current assignment; ok is false when the shard is
// unknown or unassigned.
func (f *FSM) Assignment(id interfaces.ShardID) (interfaces.Assignment, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	r := f.st.shard(id)
	if r == nil || r.owner == "" {
		return interfaces.Assignment{}, false
	}
	return interfaces.Assignment{Shard: id, Child: r.owner, Epoch: r.epoch}, true
}

// Assignments returns every placed shard's assignment, sorted by shard.
func (f *FSM) Assignments() []interfaces.Assignment {
	f.mu.RLock()
	out := make([]interfaces.Assignment, 0, len(f.st.shards))
	for _, r := range f.st.shards {
		if r.owner != "" {
			out = append(out, interfaces.Assignment{Shard: r.id, Child: r.owner, Epoch: r.epoch})
		}
	}
	f.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Shard < out[j].Shard })
	return out
}

// Quarantined returns every quarantined shard with its reason.
func (f *FSM) Quarantined() map[interfaces.ShardID]string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := map[interfaces.ShardID]string{}
	for _, r := range f.st.shards {
		if r.quarantine != "" {
			out[r.id] = r.quarantine
		}
	}
	return out
}

// InFlight returns every in-flight move, sorted by shard.
func (f *FSM) InFlight() []interfaces.Move {
	f.mu.RLock()
	out := make([]interfaces.Move, 0, f.st.inflight)
	for _, r := range f.st.shards {
		if r.flight != nil {
			out = append(out, *r.flight)
		}
	}
	f.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Shard < out[j].Shard })
	return out
}

// View returns the state as an interfaces.View for a policy: children, shards,
// assignments and in-flight moves, each sorted by ID. The caller fills Now, Seed,
// Constraints and Reports. Slices and maps inside specs are shared with the state
// (policies must not modify a View anyway).
func (f *FSM) View(tier, instance string) *interfaces.View {
	f.mu.RLock()
	v := &interfaces.View{Tier: tier, Instance: instance}
	recs := f.st.sortedChildren()
	shards := make([]*shardRec, len(f.st.shards))
	copy(shards, f.st.shards)
	f.mu.RUnlock()

	v.Children = make([]interfaces.Child, len(recs))
	for i, c := range recs {
		v.Children[i] = c.child
	}
	sortRecs(shards)
	v.Shards = make([]interfaces.Shard, len(shards))
	for i, r := range shards {
		v.Shards[i] = r.spec()
		if r.owner != "" {
			v.Assignments = append(v.Assignments, interfaces.Assignment{Shard: r.id, Child: r.owner, Epoch: r.epoch})
		}
		if r.flight != nil {
			v.InFlight = append(v.InFlight, *r.flight)
		}
	}
	return v
}

func sortRecs(rs []*shardRec) {
	sort.Slice(rs, func(i, j int) bool { return rs[i].id < rs[j].id })
}

// PlanLog returns the applied-plan log, oldest first.
func (f *FSM) PlanLog() []LogEntry {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.log.entries()
}

// History returns the applied-plan log entries of one shard, oldest first. It
// scans the bounded log, so it holds at most the log's size.
func (f *FSM) History(id interfaces.ShardID) []LogEntry {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []LogEntry
	g := &f.st.log
	for i := range g.buf {
		if e := g.buf[(g.start+i)%len(g.buf)]; e.Shard == id {
			out = append(out, e)
		}
	}
	return out
}

// TokenByHash finds the ACL token whose secret has hash h.
func (f *FSM) TokenByHash(h acl.Hash) (acl.Token, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	id, ok := f.st.tokenHashes[h]
	if !ok {
		return acl.Token{}, false
	}
	return f.st.tokens[id], true
}

// Tokens returns the ACL tokens, sorted by ID.
func (f *FSM) Tokens() []acl.Token {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.sortedTokens()
}
