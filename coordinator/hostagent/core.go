package hostagent

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// ErrNoLease is returned when an Assign arrives while the agent holds no valid
// lease: a child without a lease must not start shards. It wraps
// interfaces.ErrConflict (gRPC FailedPrecondition).
var ErrNoLease = fmt.Errorf("%w: no valid lease", interfaces.ErrConflict)

// Record is what the agent keeps for one owned shard, in memory and in bbolt.
type Record struct {
	Spec  interfaces.Shard
	Epoch interfaces.Epoch
	// Fenced is true while the shard is held but not running: after a lease
	// expiry, after a restart, until the parent re-confirms it.
	Fenced bool
}

// Held is one shard the agent holds, as announced in Hello.
type Held struct {
	Shard  interfaces.ShardID
	Epoch  interfaces.Epoch
	Fenced bool
}

// EffectKind says what an Effect asks the executor to do.
type EffectKind uint8

// Effect kinds.
const (
	// EffPersist writes Effect.Record to the store.
	EffPersist EffectKind = iota + 1
	// EffStart appends a ledger start, then starts the shard in the driver.
	EffStart
	// EffStop stops the shard in the driver, then appends a ledger stop.
	EffStop
	// EffDelete removes the shard's record and writes a tombstone at Effect.Epoch.
	EffDelete
	// EffLease persists the lease deadline Effect.Deadline.
	EffLease
)

var effectNames = [...]string{"?", "persist", "start", "stop", "delete", "lease"}

func (k EffectKind) String() string {
	if int(k) < len(effectNames) {
		return effectNames[k]
	}
	return "unknown"
}

// Effect is one action the state machine decided. The executor runs a call's
// effects in order; the order encodes the persistence rules (persist before
// start, stop before deleting).
type Effect struct {
	Kind     EffectKind
	Shard    interfaces.ShardID
	Epoch    interfaces.Epoch
	Record   Record    // EffPersist, EffStart
	Deadline time.Time // EffLease
}

func (e Effect) String() string {
	if e.Kind == EffLease {
		return fmt.Sprintf("lease(%s)", e.Deadline.UTC().Format(time.RFC3339Nano))
	}
	if e.Kind == EffPersist {
		return fmt.Sprintf("persist(%s@%d fenced=%t)", e.Shard, e.Epoch, e.Record.Fenced)
	}
	return fmt.Sprintf("%s(%s@%d)", e.Kind, e.Shard, e.Epoch)
}

// LeaseConfig sets the child side of the lease timing. See the package
// documentation for the rule that relates it to the parent's grace.
type LeaseConfig struct {
	// MarginFraction of each granted TTL is kept as a safety margin: the agent
	// fences at send + ttl - margin, send being its own send of the report the
	// grant answers. Default 0.2.
	MarginFraction float64
	// MinMargin is the smallest margin used whatever the TTL. Default 100ms.
	MinMargin time.Duration
}

func (c LeaseConfig) withDefaults() LeaseConfig {
	if c.MarginFraction == 0 {
		c.MarginFraction = 0.2
	}
	if c.MinMargin == 0 {
		c.MinMargin = 100 * time.Millisecond
	}
	return c
}

// Margin returns the safety margin used for a lease of ttl.
func (c LeaseConfig) Margin(ttl time.Duration) time.Duration {
	c = c.withDefaults()
	m := time.Duration(float64(ttl) * c.MarginFraction)
	if m < c.MinMargin {
		m = c.MinMargin
	}
	return m
}

// Core is the agent's decision logic: a deterministic state machine with no I/O,
// no clock and no goroutines. Inputs carry the time; outputs are effects for the
// executor and an error for the ack. It is not safe for concurrent use; the Agent
// serialises calls.
type Core struct {
	lease  LeaseConfig
	shards map[interfaces.ShardID]*Record
	tombs  map[interfaces.ShardID]interfaces.Epoch
	// failed remembers why a shard's process failed at its tombstone's epoch
	// (start failed, or exited on its own), so that a re-sent Assign of that
	// epoch is refused as a failure (ErrShardFailed), not just as stale: the
	// parent's doctor counts it. In memory only.
	failed   map[interfaces.ShardID]failure
	leased   bool
	deadline time.Time
	// undo holds, per shard, what a call changed when it asked for a running
	// shard to be stopped (revoke, a newer assign, the self-fence): the
	// executor reports the stop's outcome (StopDone, StopFailed) before the
	// next call, and a failed stop puts it back — the shard still runs, so
	// the agent must keep holding it, and keep trying to stop it.
	undo map[interfaces.ShardID]stopUndo
	// unsaved holds, per shard, the epoch of a running shard whose changed
	// spec failed to persist (PersistFailed): the next Assign of that epoch
	// persists it again even though the spec it carries is the one in memory.
	unsaved map[interfaces.ShardID]interfaces.Epoch
}

// stopUndo is the state of one shard before a stop was asked for.
type stopUndo struct {
	rec       Record // as it was: running (not fenced)
	tomb      interfaces.Epoch
	hadTomb   bool
	fail      failure
	hadFailed bool
}

// NewCore builds a core from persisted state. Every loaded record starts fenced:
// after a restart the lease is unknown, so nothing runs until the parent grants a
// lease and re-confirms the shard.
func NewCore(lease LeaseConfig, records []Record, tombs map[interfaces.ShardID]interfaces.Epoch) *Core {
	c := &Core{
		lease:  lease.withDefaults(),
		shards: make(map[interfaces.ShardID]*Record, len(records)),
		tombs:  make(map[interfaces.ShardID]interfaces.Epoch, len(tombs)),
		failed: map[interfaces.ShardID]failure{},
		undo:   map[interfaces.ShardID]stopUndo{},

		unsaved: map[interfaces.ShardID]interfaces.Epoch{},
	}
	for _, r := range records {
		r := r
		r.Fenced = true
		c.shards[r.Spec.ID] = &r
	}
	for k, v := range tombs {
		c.tombs[k] = v
	}
	return c
}

// LeaseValid reports whether the agent holds a lease at now.
func (c *Core) LeaseValid(now time.Time) bool {
	return c.leased && now.Before(c.deadline)
}

// Deadline returns the local time at which the current lease fences the agent,
// and whether a lease was ever granted.
func (c *Core) Deadline() (time.Time, bool) { return c.deadline, c.leased }

// Held lists the shards the agent holds, sorted by shard id: what Hello carries.
func (c *Core) Held() []Held {
	out := make([]Held, 0, len(c.shards))
	for id, r := range c.shards {
		out = append(out, Held{Shard: id, Epoch: r.Epoch, Fenced: r.Fenced})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Shard < out[j].Shard })
	return out
}

// Record returns a copy of the record held for shard.
func (c *Core) Record(shard interfaces.ShardID) (Record, bool) {
	r, ok := c.shards[shard]
	if !ok {
		return Record{}, false
	}
	return *r, true
}

// Running lists the shards that run (held and not fenced), sorted.
func (c *Core) Running() []interfaces.ShardID {
	var out []interfaces.ShardID
	for id, r := range c.shards {
		if !r.Fenced {
			out = append(out, id)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Tombstone returns the epoch at which shard was last revoked or dropped.
func (c *Core) Tombstone(shard interfaces.ShardID) (interfaces.Epoch, bool) {
	e, ok := c.tombs[shard]
	return e, ok
}

// expire fences every running shard when the lease has run out at now: stop,
// then persist the fenced flag.
//
// Without a valid lease it also fences any shard still running — one whose
// stop failed at an earlier fence (StopFailed): every call retries the stop.
func (c *Core) expire(now time.Time) []Effect {
	if c.leased && now.Before(c.deadline) {
		return nil
	}
	c.leased = false
	var ids []interfaces.ShardID
	for id, r := range c.shards {
		if !r.Fenced {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var effs []Effect
	for _, id := range ids {
		r := c.shards[id]
		c.noteStop(id)
		r.Fenced = true
		effs = append(effs,
			Effect{Kind: EffStop, Shard: id, Epoch: r.Epoch},
			Effect{Kind: EffPersist, Shard: id, Epoch: r.Epoch, Record: *r})
	}
	return effs
}

// noteStop records shard's state before a stop of it is asked for (undo).
func (c *Core) noteStop(shard interfaces.ShardID) {
	u := stopUndo{rec: *c.shards[shard]}
	u.tomb, u.hadTomb = c.tombs[shard]
	u.fail, u.hadFailed = c.failed[shard]
	c.undo[shard] = u
}

// StopDone tells the core that the driver stopped shard (running at epoch) as
// asked: the change that asked for it stands.
func (c *Core) StopDone(shard interfaces.ShardID, epoch interfaces.Epoch) {
	if u, ok := c.undo[shard]; ok && u.rec.Epoch == epoch {
		delete(c.undo, shard)
	}
}

// StopFailed tells the core that the driver could not stop shard (running at
// epoch): the shard may still run, so the change that asked for the stop is
// undone — the shard is held and running again at epoch, with its tombstone as
// before — and the rest of that change must not be carried out (the executor
// skips the shard's later effects of the call). It reports whether there was
// such a change. The caller's error says the stop failed: a revoke is not
// acknowledged (the parent sends it again, and it stops the shard then), an
// assign under a newer epoch is refused, and the self-fence is retried at the
// next call (Tick).
func (c *Core) StopFailed(shard interfaces.ShardID, epoch interfaces.Epoch) bool {
	u, ok := c.undo[shard]
	if !ok || u.rec.Epoch != epoch {
		return false
	}
	delete(c.undo, shard)
	rec := u.rec
	c.shards[shard] = &rec
	if u.hadTomb {
		c.tombs[shard] = u.tomb
	} else {
		delete(c.tombs, shard)
	}
	if u.hadFailed {
		c.failed[shard] = u.fail
	} else {
		delete(c.failed, shard)
	}
	return true
}

// Tick advances time: when the lease has expired, every running shard is stopped
// (self-fence) and marked fenced.
func (c *Core) Tick(now time.Time) []Effect { return c.expire(now) }

// LeaseGrant records a lease of ttl that runs from local time now: the agent
// fences at now + ttl - margin. now is when the agent sent the report (or
// Hello) the grant answers (coordinator/session times it so), not when the
// grant arrived: a grant delivered late cannot outlive what the parent counts.
// A grant never shortens the lease held, and one too short to leave the margin
// (a parent tier passing on the little its own lease has left) renews nothing:
// the agent fences when the lease it holds ends, with no error. Confirm lists
// shards the parent re-confirms with their epochs; fenced shards among them
// resume (persist unfenced, then start). A confirmation with a newer epoch
// than held restarts the shard under it. Shards that are not confirmed stay as
// they are. Errors for single confirmations are joined; the grant itself still
// takes effect.
func (c *Core) LeaseGrant(now time.Time, ttl time.Duration, confirm []interfaces.Assignment) ([]Effect, error) {
	effs := c.expire(now)
	if ttl < 0 {
		return effs, &interfaces.FieldError{Field: "lease.ttl", Rule: "must be ≥ 0", Value: ttl.String()}
	}
	if margin := c.lease.Margin(ttl); ttl > margin {
		if d := now.Add(ttl - margin); !c.leased || !d.Before(c.deadline) {
			c.leased = true
			c.deadline = d
			effs = append(effs, Effect{Kind: EffLease, Deadline: c.deadline})
		}
	}
	var errs []error
	for _, a := range confirm {
		r, ok := c.shards[a.Shard]
		if !ok {
			errs = append(errs, fmt.Errorf("confirm %s@%d: %w: shard not held (assign it with its spec)", a.Shard, a.Epoch, interfaces.ErrNotFound))
			continue
		}
		more, err := c.Assign(now, r.Spec, a.Epoch)
		effs = append(effs, more...)
		if err != nil {
			errs = append(errs, fmt.Errorf("confirm: %w", err))
		}
	}
	return effs, errors.Join(errs...)
}

func staleErr(op string, shard interfaces.ShardID, held, got interfaces.Epoch, what string) error {
	return fmt.Errorf("%s %s: %w: %s epoch %d, got %d", op, shard, interfaces.ErrStaleEpoch, what, held, got)
}

// Assign makes the agent own spec under epoch and run it. Rules:
//   - epoch older than the one held, or not newer than the shard's tombstone:
//     rejected with interfaces.ErrStaleEpoch (held vs got in the message);
//   - same epoch as held and running: idempotent (the spec is re-persisted if it
//     changed); same epoch and fenced: resume (this is the re-confirmation);
//   - newer epoch: stop the old run if any, persist, start under the new epoch;
//   - no valid lease: rejected with ErrNoLease, nothing changes.
func (c *Core) Assign(now time.Time, spec interfaces.Shard, epoch interfaces.Epoch) ([]Effect, error) {
	effs := c.expire(now)
	if err := interfaces.ValidateShard(spec); err != nil {
		return effs, fmt.Errorf("assign: %w", err)
	}
	if epoch == 0 {
		return effs, fmt.Errorf("assign %s: %w", spec.ID, &interfaces.FieldError{Field: "epoch", Rule: "must be ≥ 1", Value: "0"})
	}
	id := spec.ID
	if t, ok := c.tombs[id]; ok && epoch <= t {
		if f, ok := c.failed[id]; ok && f.epoch == epoch {
			// Still stale (ErrStaleEpoch), and marked as the failure it was.
			return effs, fmt.Errorf("%w (%w: %s)", staleErr("assign", id, t, epoch, "revoked at"), ErrShardFailed, f.why)
		}
		return effs, staleErr("assign", id, t, epoch, "revoked at")
	}
	delete(c.failed, id)
	r, held := c.shards[id]
	if held && epoch < r.Epoch {
		return effs, staleErr("assign", id, r.Epoch, epoch, "held")
	}
	if !c.LeaseValid(now) {
		return effs, fmt.Errorf("assign %s@%d: %w", id, epoch, ErrNoLease)
	}
	if held && epoch == r.Epoch {
		if !r.Fenced {
			if e, ok := c.unsaved[id]; !r.Spec.Equal(spec) || ok && e == epoch {
				delete(c.unsaved, id)
				r.Spec = spec
				effs = append(effs, Effect{Kind: EffPersist, Shard: id, Epoch: epoch, Record: *r})
			}
			return effs, nil
		}
		r.Spec, r.Fenced = spec, false
		return append(effs,
			Effect{Kind: EffPersist, Shard: id, Epoch: epoch, Record: *r},
			Effect{Kind: EffStart, Shard: id, Epoch: epoch, Record: *r}), nil
	}
	if held && !r.Fenced {
		c.noteStop(id)
		effs = append(effs, Effect{Kind: EffStop, Shard: id, Epoch: r.Epoch})
	}
	nr := &Record{Spec: spec, Epoch: epoch}
	c.shards[id] = nr
	return append(effs,
		Effect{Kind: EffPersist, Shard: id, Epoch: epoch, Record: *nr},
		Effect{Kind: EffStart, Shard: id, Epoch: epoch, Record: *nr}), nil
}

// Revoke stops shard and forgets it, leaving a tombstone at the larger of epoch
// and the held epoch so that a delayed Assign with that epoch is refused. A
// revoke older than the held epoch is rejected with interfaces.ErrStaleEpoch. A
// revoke of a shard not held succeeds (the desired end state holds) and records
// the tombstone; one older than the tombstone is stale. Revoke needs no lease:
// stopping is always safe.
func (c *Core) Revoke(now time.Time, shard interfaces.ShardID, epoch interfaces.Epoch) ([]Effect, error) {
	effs := c.expire(now)
	if err := interfaces.ValidateID("shard", string(shard)); err != nil {
		return effs, fmt.Errorf("revoke: %w", err)
	}
	if epoch == 0 {
		return effs, fmt.Errorf("revoke %s: %w", shard, &interfaces.FieldError{Field: "epoch", Rule: "must be ≥ 1", Value: "0"})
	}
	r, held := c.shards[shard]
	if !held {
		if t, ok := c.tombs[shard]; ok {
			if epoch < t {
				return effs, staleErr("revoke", shard, t, epoch, "revoked at")
			}
			if epoch == t {
				// Again (a re-sent revoke): write the tombstone again, so that
				// the ack stands for a durable one even if the first write
				// failed (idempotent).
				return append(effs, Effect{Kind: EffDelete, Shard: shard, Epoch: epoch}), nil
			}
		}
		c.tombs[shard] = epoch
		delete(c.failed, shard)
		return append(effs, Effect{Kind: EffDelete, Shard: shard, Epoch: epoch}), nil
	}
	if epoch < r.Epoch {
		return effs, staleErr("revoke", shard, r.Epoch, epoch, "held")
	}
	if !r.Fenced {
		c.noteStop(shard)
		effs = append(effs, Effect{Kind: EffStop, Shard: shard, Epoch: r.Epoch})
	}
	delete(c.shards, shard)
	c.tombs[shard] = epoch
	delete(c.failed, shard)
	return append(effs, Effect{Kind: EffDelete, Shard: shard, Epoch: epoch}), nil
}

type failure struct {
	epoch interfaces.Epoch
	why   string
}

// Exited is called by the agent when shard's process, running under epoch,
// ended on its own (why says how). The shard is stopped (the ledger records
// it) and dropped, tombstoned at epoch like a failed start: the parent's
// re-sent Assign of that epoch is refused with ErrShardFailed and why, which
// its doctor counts, and the parent places the shard elsewhere.
func (c *Core) Exited(shard interfaces.ShardID, epoch interfaces.Epoch, why string) []Effect {
	r, ok := c.shards[shard]
	if !ok || r.Epoch != epoch || r.Fenced {
		return nil
	}
	delete(c.shards, shard)
	c.tombs[shard] = epoch
	c.failed[shard] = failure{epoch: epoch, why: why}
	return []Effect{{Kind: EffStop, Shard: shard, Epoch: epoch}, {Kind: EffDelete, Shard: shard, Epoch: epoch}}
}

// PersistFailed tells the core that persisting shard's record at epoch failed
// with no start after it (a changed spec of a running shard): the shard runs
// on, and the next Assign of that epoch persists its record again, whatever
// spec it carries.
func (c *Core) PersistFailed(shard interfaces.ShardID, epoch interfaces.Epoch) {
	if r, ok := c.shards[shard]; ok && r.Epoch == epoch {
		c.unsaved[shard] = epoch
	}
}

// StartFailed is called by the executor when the driver could not start shard
// under epoch. The shard is dropped (tombstoned at epoch) so the parent, which
// receives the error in the ack, re-places it; a delayed retry of the same
// assign is refused.
func (c *Core) StartFailed(shard interfaces.ShardID, epoch interfaces.Epoch) []Effect {
	r, ok := c.shards[shard]
	if !ok || r.Epoch != epoch {
		return nil
	}
	delete(c.shards, shard)
	c.tombs[shard] = epoch
	c.failed[shard] = failure{epoch: epoch, why: "its start failed"}
	return []Effect{{Kind: EffDelete, Shard: shard, Epoch: epoch}}
}
