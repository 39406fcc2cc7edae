package fsm

import (
	"errors"
	"fmt"

	"github.com/strata-sched/strata/coordinator/acl"
	"github.com/strata-sched/strata/interfaces"
)

// Result is what Apply returns for one command (raft's ApplyFuture.Response()).
// Domain rejections are per operation: a batch can partly succeed.
type Result struct {
	// Index is the Raft index of the entry.
	Index uint64
	Type  CmdType
	// Ops has one entry per item of the command, in order: per shard for
	// PutShards/DeleteShards, per move for ApplyPlan, one for the other commands.
	Ops []OpResult
}

// OpResult is the outcome of one operation.
type OpResult struct {
	// ID is the shard (or, for child commands, the child) the operation is about.
	ID string
	// Epoch is the shard's epoch after the operation (0 for child commands).
	Epoch interfaces.Epoch
	// Err is nil on success, or wraps interfaces.ErrStaleEpoch, ErrNotFound or
	// ErrConflict.
	Err error
}

// Err returns the first operation error, or nil when every operation succeeded.
func (r *Result) Err() error {
	for _, op := range r.Ops {
		if op.Err != nil {
			return op.Err
		}
	}
	return nil
}

// Failed counts the operations that were rejected.
func (r *Result) Failed() int {
	n := 0
	for _, op := range r.Ops {
		if op.Err != nil {
			n++
		}
	}
	return n
}

// ErrorCode names the sentinel an operation error wraps, for the wire and for
// logs: "stale_epoch", "not_found", "conflict", "invalid", "" for nil and
// "internal" for anything else.
func ErrorCode(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, interfaces.ErrStaleEpoch):
		return "stale_epoch"
	case errors.Is(err, interfaces.ErrNotFound):
		return "not_found"
	case errors.Is(err, interfaces.ErrConflict):
		return "conflict"
	case errors.Is(err, interfaces.ErrInvalid):
		return "invalid"
	}
	return "internal"
}

// apply runs one decoded command at Raft index idx, appended by the leader at
// time at (Unix nanoseconds, 0 when unknown; it only stamps the log entries).
// It is deterministic: it reads no clock, draws no random numbers and never
// ranges over a map.
func (s *state) apply(idx uint64, at int64, c Command) *Result {
	s.applied = idx
	s.at = at
	r := &Result{Index: idx, Type: c.Type()}
	switch c := c.(type) {
	case *PutChild:
		r.Ops = []OpResult{{ID: string(c.Child.ID), Err: s.putChild(c.Child)}}
	case *RemoveChild:
		r.Ops = []OpResult{{ID: string(c.ID), Err: s.removeChild(c.ID)}}
	case *PutShards:
		r.Ops = make([]OpResult, len(c.Shards))
		for i := range c.Shards {
			r.Ops[i] = s.putShard(&c.Shards[i])
		}
	case *DeleteShards:
		r.Ops = make([]OpResult, len(c.IDs))
		for i, id := range c.IDs {
			r.Ops[i] = s.deleteShard(id)
		}
	case *Assign:
		r.Ops = []OpResult{s.assign(idx, "", interfaces.Move{Shard: c.Shard, To: c.Child, Reason: c.Reason})}
	case *Unassign:
		r.Ops = []OpResult{s.unassign(idx, c)}
	case *Move:
		r.Ops = []OpResult{s.move(idx, "", c.Move, false)}
	case *BeginMove:
		r.Ops = []OpResult{s.move(idx, "", c.Move, true)}
	case *CompleteMove:
		r.Ops = []OpResult{s.complete(idx, c)}
	case *AbortMove:
		r.Ops = []OpResult{s.abort(idx, c)}
	case *Quarantine:
		r.Ops = []OpResult{s.quarantine(idx, c)}
	case *ApplyPlan:
		r.Ops = make([]OpResult, len(c.Moves))
		for i, m := range c.Moves {
			r.Ops[i] = s.planMove(idx, c.Tier, m, c.Begin)
		}
	case *DropShards:
		r.Ops = s.dropShards(idx, c, false)
	case *RetireShards:
		r.Ops = s.dropShards(idx, &c.DropShards, true)
	case *PlanBatch:
		r.Ops = s.planBatch(idx, c)
	case *PutToken:
		r.Ops = []OpResult{{ID: c.Token.ID, Err: s.putToken(c.Token)}}
	case *DeleteToken:
		r.Ops = []OpResult{{ID: c.ID, Err: s.deleteToken(c.ID)}}
	default:
		// Decode only returns the types above; reaching here is a programming error.
		panic(fmt.Sprintf("fsm: apply: command type %s has no handler", c.Type()))
	}
	return r
}

func (s *state) putChild(c interfaces.Child) error {
	if old, ok := s.children[c.ID]; ok {
		old.child = c
		return nil
	}
	s.children[c.ID] = &childRec{child: c}
	return nil
}

func (s *state) removeChild(id interfaces.ChildID) error {
	c, ok := s.children[id]
	if !ok {
		return fmt.Errorf("child %q: %w", id, interfaces.ErrNotFound)
	}
	if c.shards > 0 || c.outgoing > 0 {
		return fmt.Errorf("child %q still holds %d shards (%d moving in, %d moving out); move them first: %w",
			id, c.shards+c.outgoing, c.shards, c.outgoing, interfaces.ErrConflict)
	}
	delete(s.children, id)
	return nil
}

func (s *state) putShard(spec *interfaces.Shard) OpResult {
	r := newShardRec(spec)
	old := s.shard(spec.ID)
	if old != nil {
		r.owner, r.epoch, r.flight, r.quarantine = old.owner, old.epoch, old.flight, old.quarantine
		eff := old.effective()
		s.charge(eff, old.load, -1)
		s.charge(eff, r.load, +1)
	} else {
		r.epoch = s.floor // above every epoch a retired shard of this ID had
	}
	s.put(r)
	return OpResult{ID: string(spec.ID), Epoch: r.epoch}
}

func (s *state) deleteShard(id interfaces.ShardID) OpResult {
	old := s.shard(id)
	if old == nil {
		return OpResult{ID: string(id), Err: fmt.Errorf("shard %q: %w", id, interfaces.ErrNotFound)}
	}
	if old.flight != nil {
		return OpResult{ID: string(id), Epoch: old.epoch, Err: fmt.Errorf(
			"shard %q has a move to %q in flight; complete or abort it first: %w", id, old.flight.To, interfaces.ErrConflict)}
	}
	s.charge(old.owner, old.load, -1)
	s.remove(id)
	return OpResult{ID: string(id), Epoch: old.epoch}
}

// target checks that child id exists and takes new shards.
func (s *state) target(shard interfaces.ShardID, id interfaces.ChildID) error {
	c, ok := s.children[id]
	if !ok {
		return fmt.Errorf("shard %q: target child %q: %w", shard, id, interfaces.ErrNotFound)
	}
	if c.child.State != interfaces.ChildActive {
		return fmt.Errorf("shard %q: target child %q is %s and takes no new shards: %w",
			shard, id, c.child.State, interfaces.ErrConflict)
	}
	return nil
}

// canonical returns the child's own ID string (the one in the children map), so
// that a million owner fields share a few strings instead of holding a copy each.
func (s *state) canonical(id interfaces.ChildID) interfaces.ChildID {
	if c, ok := s.children[id]; ok {
		return c.child.ID
	}
	return id
}

func (s *state) record(e LogEntry) {
	e.At = s.at
	s.log.add(e)
}

func (s *state) assign(idx uint64, tier string, m interfaces.Move) OpResult {
	res := OpResult{ID: string(m.Shard)}
	old := s.shard(m.Shard)
	if old == nil {
		res.Err = fmt.Errorf("shard %q: %w", m.Shard, interfaces.ErrNotFound)
		return res
	}
	res.Epoch = old.epoch
	if old.owner != "" {
		res.Err = fmt.Errorf("shard %q is already placed on %q at epoch %d; use a move: %w",
			m.Shard, old.owner, old.epoch, interfaces.ErrConflict)
		return res
	}
	if old.quarantine != "" {
		res.Err = quarantined(old)
		return res
	}
	if res.Err = s.target(m.Shard, m.To); res.Err != nil {
		return res
	}
	r := *old
	r.owner = s.canonical(m.To)
	r.epoch = old.epoch + 1
	s.put(&r)
	s.charge(m.To, r.load, +1)
	s.record(LogEntry{Index: idx, Change: ChangeAssign, Tier: tier, Shard: m.Shard, To: m.To,
		Epoch: r.epoch, Reason: m.Reason, Goal: m.Goal, Delta: m.Delta})
	res.Epoch = r.epoch
	return res
}

// cas checks a move's preconditions against the shard's current record.
func (s *state) cas(old *shardRec, m interfaces.Move) error {
	if old == nil {
		return fmt.Errorf("shard %q: %w", m.Shard, interfaces.ErrNotFound)
	}
	if old.epoch != m.Epoch {
		return fmt.Errorf("shard %q is at epoch %d, the move was planned at epoch %d: %w",
			m.Shard, old.epoch, m.Epoch, interfaces.ErrStaleEpoch)
	}
	if old.owner != m.From {
		if old.owner == "" {
			return fmt.Errorf("shard %q is unassigned, the move expects it on %q: %w", m.Shard, m.From, interfaces.ErrConflict)
		}
		return fmt.Errorf("shard %q is on %q, the move expects it on %q: %w", m.Shard, old.owner, m.From, interfaces.ErrConflict)
	}
	if old.flight != nil {
		return fmt.Errorf("shard %q already has a move to %q in flight: %w", m.Shard, old.flight.To, interfaces.ErrConflict)
	}
	if old.quarantine != "" {
		return quarantined(old)
	}
	return s.target(m.Shard, m.To)
}

func (s *state) move(idx uint64, tier string, m interfaces.Move, begin bool) OpResult {
	res := OpResult{ID: string(m.Shard)}
	old := s.shard(m.Shard)
	if old != nil {
		res.Epoch = old.epoch
	}
	if res.Err = s.cas(old, m); res.Err != nil {
		return res
	}
	r := *old
	s.charge(old.owner, old.load, -1)
	s.charge(m.To, old.load, +1)
	change := ChangeMove
	if begin {
		fl := m
		r.flight = &fl
		change = ChangeBegin
	} else {
		r.owner = s.canonical(m.To)
		r.epoch = old.epoch + 1
	}
	s.put(&r)
	if begin {
		s.inflight++
		s.addOutgoing(old.owner, +1)
	}
	s.record(LogEntry{Index: idx, Change: change, Tier: tier, Shard: m.Shard, From: m.From, To: m.To,
		Epoch: r.epoch, Reason: m.Reason, Goal: m.Goal, Delta: m.Delta})
	res.Epoch = r.epoch
	return res
}

// inFlight checks that shard id has a move in flight begun at epoch.
func (s *state) inFlight(id interfaces.ShardID, epoch interfaces.Epoch) (*shardRec, error) {
	old := s.shard(id)
	if old == nil {
		return nil, fmt.Errorf("shard %q: %w", id, interfaces.ErrNotFound)
	}
	if old.flight == nil {
		return old, fmt.Errorf("shard %q has no move in flight: %w", id, interfaces.ErrConflict)
	}
	if old.epoch != epoch {
		return old, fmt.Errorf("shard %q is at epoch %d, not %d: %w", id, old.epoch, epoch, interfaces.ErrStaleEpoch)
	}
	return old, nil
}

func (s *state) complete(idx uint64, c *CompleteMove) OpResult {
	res := OpResult{ID: string(c.Shard)}
	old, err := s.inFlight(c.Shard, c.Epoch)
	if old != nil {
		res.Epoch = old.epoch
	}
	if res.Err = err; err != nil {
		return res
	}
	r := *old
	fl := old.flight
	r.owner = s.canonical(fl.To)
	r.epoch = old.epoch + 1
	r.flight = nil
	s.put(&r)
	s.inflight--
	s.addOutgoing(old.owner, -1)
	s.record(LogEntry{Index: idx, Change: ChangeComplete, Shard: c.Shard, From: old.owner, To: fl.To,
		Epoch: r.epoch, Reason: fl.Reason, Goal: fl.Goal, Delta: fl.Delta})
	res.Epoch = r.epoch
	return res
}

func (s *state) abort(idx uint64, c *AbortMove) OpResult {
	res := OpResult{ID: string(c.Shard)}
	old, err := s.inFlight(c.Shard, c.Epoch)
	if old != nil {
		res.Epoch = old.epoch
	}
	if res.Err = err; err != nil {
		return res
	}
	r := *old
	fl := old.flight
	r.flight = nil
	s.charge(fl.To, old.load, -1)
	s.charge(old.owner, old.load, +1)
	s.put(&r)
	s.inflight--
	s.addOutgoing(old.owner, -1)
	s.record(LogEntry{Index: idx, Change: ChangeAbort, Shard: c.Shard, From: old.owner, To: fl.To,
		Epoch: r.epoch, Reason: c.Reason})
	return res
}

func (s *state) unassign(idx uint64, c *Unassign) OpResult {
	res := OpResult{ID: string(c.Shard)}
	old := s.shard(c.Shard)
	if old == nil {
		res.Err = fmt.Errorf("shard %q: %w", c.Shard, interfaces.ErrNotFound)
		return res
	}
	res.Epoch = old.epoch
	switch {
	case old.epoch != c.Epoch:
		res.Err = fmt.Errorf("shard %q is at epoch %d, not %d: %w", c.Shard, old.epoch, c.Epoch, interfaces.ErrStaleEpoch)
	case old.owner == "":
		res.Err = fmt.Errorf("shard %q is not assigned: %w", c.Shard, interfaces.ErrConflict)
	case old.flight != nil:
		res.Err = fmt.Errorf("shard %q has a move to %q in flight: %w", c.Shard, old.flight.To, interfaces.ErrConflict)
	}
	if res.Err != nil {
		return res
	}
	r := *old
	r.owner = ""
	s.charge(old.owner, old.load, -1)
	s.put(&r)
	s.record(LogEntry{Index: idx, Change: ChangeUnassign, Shard: c.Shard, From: old.owner,
		Epoch: r.epoch, Reason: c.Reason})
	return res
}

func quarantined(r *shardRec) error {
	return fmt.Errorf("shard %q is quarantined (%s); release it first: %w", r.id, r.quarantine, interfaces.ErrConflict)
}

// quarantine quarantines a shard (taking it off its owner) or releases it.
func (s *state) quarantine(idx uint64, c *Quarantine) OpResult {
	res := OpResult{ID: string(c.Shard)}
	old := s.shard(c.Shard)
	if old == nil {
		res.Err = fmt.Errorf("shard %q: %w", c.Shard, interfaces.ErrNotFound)
		return res
	}
	res.Epoch = old.epoch
	r := *old
	if c.Release {
		if old.quarantine == "" {
			res.Err = fmt.Errorf("shard %q is not quarantined: %w", c.Shard, interfaces.ErrConflict)
			return res
		}
		r.quarantine = ""
		s.put(&r)
		s.record(LogEntry{Index: idx, Change: ChangeRelease, Shard: c.Shard, Epoch: r.epoch, Reason: c.Reason})
		return res
	}
	switch {
	case old.quarantine != "":
		res.Err = fmt.Errorf("shard %q is already quarantined (%s): %w", c.Shard, old.quarantine, interfaces.ErrConflict)
	case old.flight != nil:
		res.Err = fmt.Errorf("shard %q has a move to %q in flight; complete or abort it first: %w", c.Shard, old.flight.To, interfaces.ErrConflict)
	}
	if res.Err != nil {
		return res
	}
	r.quarantine = c.Reason
	r.owner = ""
	s.charge(old.owner, old.load, -1)
	s.put(&r)
	s.record(LogEntry{Index: idx, Change: ChangeQuarantine, Shard: c.Shard, From: old.owner, Epoch: r.epoch, Reason: c.Reason})
	return res
}

// dropShards applies DropShards (with retire, RetireShards): every shard must
// exist, or nothing changes.
func (s *state) dropShards(idx uint64, c *DropShards, retire bool) []OpResult {
	ops := make([]OpResult, len(c.IDs))
	missing := 0
	for i, id := range c.IDs {
		ops[i].ID = string(id)
		if s.shard(id) == nil {
			ops[i].Err = fmt.Errorf("shard %q: %w", id, interfaces.ErrNotFound)
			missing++
		}
	}
	if missing > 0 {
		for i := range ops {
			if ops[i].Err == nil {
				ops[i].Epoch = s.shard(c.IDs[i]).epoch
				ops[i].Err = fmt.Errorf("shard %q not deleted: %d other shard(s) of the batch do not exist: %w", c.IDs[i], missing, interfaces.ErrConflict)
			}
		}
		return ops
	}
	for i, id := range c.IDs {
		if old := s.shard(id); old.flight != nil {
			if res := s.abort(idx, &AbortMove{Shard: id, Epoch: old.epoch, Reason: c.Reason}); res.Err != nil {
				// inFlight cannot refuse a shard whose flight is set at its
				// own epoch; keep the result should that ever change.
				ops[i] = res
				continue
			}
		}
		ops[i] = s.deleteShard(id)
		if retire && ops[i].Err == nil && ops[i].Epoch > s.floor {
			s.floor = ops[i].Epoch
		}
	}
	return ops
}

// planBatch applies PlanBatch: the drains (all or none), then the moves.
func (s *state) planBatch(idx uint64, c *PlanBatch) []OpResult {
	ops := make([]OpResult, len(c.Drain)+len(c.Moves))
	missing := 0
	for i, id := range c.Drain {
		ops[i].ID = string(id)
		if _, ok := s.children[id]; !ok {
			ops[i].Err = fmt.Errorf("child %q: %w", id, interfaces.ErrNotFound)
			missing++
		}
	}
	if missing > 0 {
		why := fmt.Errorf("not applied: %d child(ren) to drain do not exist: %w", missing, interfaces.ErrConflict)
		for i := range ops {
			if i >= len(c.Drain) {
				ops[i].ID = string(c.Moves[i-len(c.Drain)].Shard)
			}
			if ops[i].Err == nil {
				ops[i].Err = why
			}
		}
		return ops
	}
	for _, id := range c.Drain {
		if ch := s.children[id]; ch.child.State == interfaces.ChildActive {
			ch.child.State = interfaces.ChildDraining
		}
	}
	for i, m := range c.Moves {
		ops[len(c.Drain)+i] = s.planMove(idx, c.Tier, m, c.Begin[i])
	}
	return ops
}

// planMove applies one move of a plan (ApplyPlan, PlanBatch): a first
// placement when it has no source, else a move, begun when begin is set.
func (s *state) planMove(idx uint64, tier string, m interfaces.Move, begin bool) OpResult {
	if m.From == "" {
		return s.assign(idx, tier, m)
	}
	return s.move(idx, tier, m, begin)
}

func (s *state) putToken(t acl.Token) error {
	if _, ok := s.tokens[t.ID]; ok {
		return fmt.Errorf("token %q already exists; revoke it first: %w", t.ID, interfaces.ErrConflict)
	}
	if _, ok := s.tokenHashes[t.Hash]; ok {
		return fmt.Errorf("token %q: its secret is another token's: %w", t.ID, interfaces.ErrConflict)
	}
	s.tokens[t.ID] = t
	s.tokenHashes[t.Hash] = t.ID
	return nil
}

func (s *state) deleteToken(id string) error {
	t, ok := s.tokens[id]
	if !ok {
		return fmt.Errorf("token %q: %w", id, interfaces.ErrNotFound)
	}
	delete(s.tokens, id)
	delete(s.tokenHashes, t.Hash)
	return nil
}
