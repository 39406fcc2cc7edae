package tiercore

import (
	"fmt"
	"slices"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// Mutations are test-only switches that re-introduce the failure modes of
// issue 20, so that the deterministic simulation (coordinator/dst) can show it
// catches each one. Production code never sets them: the zero value is the
// correct protocol.
type Mutations struct {
	// NoRevokeTombstone: a revoke from the parent leaves no tombstone (the
	// cross-region double owner of issue 20: a late or re-sent Assign of the
	// revoked epoch was taken again).
	NoRevokeTombstone bool
	// ReplaceOnSessionLoss: a child whose session dropped counts as silent at
	// once, not at the end of its lease plus margin (a parent re-placing
	// before the child fenced).
	ReplaceOnSessionLoss bool
}

// LocalBits is how many low bits of a wire epoch are the tier's own (local)
// epoch below the top tier: wire = parent epoch << LocalBits | local
// (coordinator/tierd epochs.go explains why).
const LocalBits = 16

// LocalMask masks the local epoch of a wire epoch.
const LocalMask = 1<<LocalBits - 1

// Compose is the wire epoch of parent epoch g and local epoch e; unknown
// (false) when g is (0) or e does not fit LocalBits.
func Compose(g, e uint64) (uint64, bool) {
	if g == 0 || e > LocalMask {
		return 0, false
	}
	return g<<LocalBits | e, true
}

// Uplink is the child side of a tier's session with its parent: the state a
// tier replica keeps about what its parent gave it (the parent's epoch per
// shard, the revokes asked and not yet finished, the tombstones of finished
// ones) and about its own lease from the parent. Its methods are the decisions
// taken on the parent's messages; the driver (coordinator/tierd uplink.go, or
// the simulation) commits what they say and sends the acks. It is not safe for
// concurrent use.
type Uplink struct {
	mut        Mutations
	leaseUntil time.Time
	// epochs is the parent's epoch per shard, as last confirmed on this
	// session (forgotten at a disconnect).
	epochs map[interfaces.ShardID]uint64
	// lastKnown is the parent's epoch per shard as last known, kept when a
	// reconnect forgets epochs: it composes revokes (never assigns) for a
	// shard the parent has not confirmed again (RevokeEpoch).
	lastKnown map[interfaces.ShardID]uint64
	// revoking are the revokes asked by the parent, not yet finished.
	revoking map[interfaces.ShardID]uint64
	tombs    Tombstones
}

// NewUplink returns an empty uplink state; m is zero outside tests.
func NewUplink(m Mutations) *Uplink {
	return &Uplink{mut: m, epochs: map[interfaces.ShardID]uint64{}, lastKnown: map[interfaces.ShardID]uint64{}, revoking: map[interfaces.ShardID]uint64{}}
}

// UplinkMargin is the fraction of a grant's TTL the child keeps as its safety
// margin: its lease ends at its own send of the message the grant answers +
// TTL − TTL/UplinkMargin.
const UplinkMargin = 4

// OnLease records a grant of ttl answering this tier's own message sent at
// from (its clock). A grant never shortens the lease held; a short or late
// one renews nothing.
func (u *Uplink) OnLease(from time.Time, ttl time.Duration) {
	if until := from.Add(ttl - ttl/UplinkMargin); until.After(u.leaseUntil) {
		u.leaseUntil = until
	}
}

// LeaseLeft is how long the lease from the parent has to run at now.
func (u *Uplink) LeaseLeft(now time.Time) time.Duration { return u.leaseUntil.Sub(now) }

// LeaseUntil is when the lease from the parent ends (zero: never granted).
func (u *Uplink) LeaseUntil() time.Time { return u.leaseUntil }

// EndLease forgets the lease (the uplink stopped: this replica no longer leads).
func (u *Uplink) EndLease() { u.leaseUntil = time.Time{} }

// Epoch is the parent's epoch for shard on this session (0: not known).
func (u *Uplink) Epoch(shard interfaces.ShardID) uint64 { return u.epochs[shard] }

// CheckAssign decides on the parent's Assign of shard at epoch: nil when it
// may be taken; otherwise an error wrapping interfaces.ErrStaleEpoch, with the
// tombstone's epoch when the shard was revoked at epoch or later (the ack's
// RevokedAt, so that the parent places it again under a newer epoch).
func (u *Uplink) CheckAssign(shard interfaces.ShardID, epoch uint64) (revokedAt uint64, err error) {
	if tomb, err := u.tombs.Refuse(shard, epoch); err != nil {
		return tomb, err
	}
	if held := u.epochs[shard]; epoch < held {
		return 0, fmt.Errorf("shard %s: epoch %d is older than the %d held: %w", shard, epoch, held, interfaces.ErrStaleEpoch)
	}
	return 0, nil
}

// Assigned records an Assign of shard at epoch that was taken (committed).
func (u *Uplink) Assigned(shard interfaces.ShardID, epoch uint64) {
	u.epochs[shard] = epoch
	u.lastKnown[shard] = epoch
	u.tombs.Assigned(shard, epoch)
	delete(u.revoking, shard)
}

// OnRevoke decides on the parent's Revoke of shard at epoch: an error
// wrapping interfaces.ErrStaleEpoch when it is older than the epoch held;
// otherwise it records the tombstone at once (from here on no Assign at or
// below epoch is taken: the parent gives a shard back only at a newer one)
// and, when has says this tier has the shard, the pending revoke.
func (u *Uplink) OnRevoke(shard interfaces.ShardID, epoch uint64, has bool) error {
	if held := u.epochs[shard]; epoch < held {
		return fmt.Errorf("shard %s: revoke epoch %d is older than the %d held: %w", shard, epoch, held, interfaces.ErrStaleEpoch)
	}
	u.tomb(shard, epoch)
	if !has {
		return nil
	}
	u.revoking[shard] = epoch
	if epoch > u.lastKnown[shard] {
		// The revoke's epoch is at least the one we were given the shard at,
		// so the child's revoke composed from it is never older than what the
		// child holds — even when we forgot the parent's epoch after a
		// reconnect. Revokes only (RevokeEpoch): an Assign composed from it
		// would start the shard under the epoch its new owner runs it at.
		u.lastKnown[shard] = epoch
	}
	return nil
}

func (u *Uplink) tomb(shard interfaces.ShardID, epoch uint64) {
	if u.mut.NoRevokeTombstone {
		return
	}
	u.tombs.Revoked(shard, epoch)
}

// Leaving reports whether the parent is taking shard back (a revoke pending):
// it is assigned to no child meanwhile.
func (u *Uplink) Leaving(shard interfaces.ShardID) bool {
	_, ok := u.revoking[shard]
	return ok
}

// Revoking is the epoch of the parent's pending revoke of shard, if any.
func (u *Uplink) Revoking(shard interfaces.ShardID) (uint64, bool) {
	e, ok := u.revoking[shard]
	return e, ok
}

// Pending lists the shards with a revoke pending, sorted.
func (u *Uplink) Pending() []interfaces.ShardID {
	out := make([]interfaces.ShardID, 0, len(u.revoking))
	for id := range u.revoking {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// PendingCount is how many revokes are pending.
func (u *Uplink) PendingCount() int { return len(u.revoking) }

// Finished records that the parent's revoke of shard is done (no child runs
// it; the driver deleted it here) and returns the revoke's epoch, for the ack.
// The tombstone is kept: GoneEpoch and CheckAssign read it.
func (u *Uplink) Finished(shard interfaces.ShardID) uint64 {
	epoch := u.revoking[shard]
	u.tomb(shard, epoch)
	delete(u.revoking, shard)
	delete(u.epochs, shard)
	delete(u.lastKnown, shard)
	return epoch
}

// Disconnected forgets the parent's epochs: until the parent confirms a shard
// again (an Assign in answer to the next Hello, which then states epoch 0 for
// every shard) no Assign of it is composed, so a shard the parent re-placed
// while we were away is never resumed here.
func (u *Uplink) Disconnected() { clear(u.epochs) }

// Tombstone is the parent epoch the parent last revoked shard at, if any.
func (u *Uplink) Tombstone(shard interfaces.ShardID) (uint64, bool) { return u.tombs.Epoch(shard) }

// WireEpoch is the epoch an Assign to a child of shard at local epoch e
// carries; false when the parent's epoch is not known (nothing may be sent).
func (u *Uplink) WireEpoch(shard interfaces.ShardID, e uint64) (uint64, bool) {
	return Compose(u.epochs[shard], e)
}

// RevokeEpoch is WireEpoch for a revoke: when the parent's epoch is not known
// now (forgotten at a reconnect, not confirmed again yet), the last one known
// composes it. A revoke may name an epoch the child does not hold yet; an
// assign may not, which is why WireEpoch does not fall back.
func (u *Uplink) RevokeEpoch(shard interfaces.ShardID, e uint64) (uint64, bool) {
	if we, ok := u.WireEpoch(shard, e); ok || e > LocalMask {
		return we, ok
	}
	return Compose(u.lastKnown[shard], e)
}

// GoneEpoch is the highest wire epoch of the parent epoch shard was last
// revoked at (0: no tombstone): a revoke of a shard this tier no longer has
// carries at least it.
func (u *Uplink) GoneEpoch(shard interfaces.ShardID) uint64 {
	g, ok := u.tombs.Epoch(shard)
	if !ok {
		return 0
	}
	we, _ := Compose(g, LocalMask)
	return we
}

// AckAction is what a child's ack of a revoke means for the shard.
type AckAction uint8

const (
	// AckIgnore: the ack changes nothing (a late duplicate, an older revoke's,
	// or from a child the shard has left).
	AckIgnore AckAction = iota
	// AckCompleteMove: the source of the shard's in-flight move stopped it:
	// commit the move (epoch+1), then Assign to the target.
	AckCompleteMove
	// AckFinishRevoke: the parent's revoke of the shard may finish: no child
	// of this tier runs it now.
	AckFinishRevoke
)

// RevokeAcked decides on child's ack of a revoke of s at wire epoch ack; found
// says whether the committed state has s, leaving whether this tier's parent
// is taking it back (Uplink.Leaving). Only an ack covering the revoke sent now
// (at s.RevokeEpoch or later) counts: a late duplicate of an earlier move's
// revoke must not complete a move while its source still runs the shard, and
// a late ack from a child the shard has left must not end the parent's revoke
// while its owner runs it.
func RevokeAcked(s Shard, found bool, child interfaces.ChildID, ack uint64, leaving bool) AckAction {
	covers := s.RevokeEpoch != 0 && ack >= s.RevokeEpoch
	if found && s.MovingFrom != "" && s.MovingFrom == child {
		if covers {
			return AckCompleteMove
		}
		return AckIgnore
	}
	if !leaving {
		return AckIgnore
	}
	if found && s.Owner != "" && (s.Owner != child || !covers) {
		return AckIgnore
	}
	return AckFinishRevoke
}
