package tiercore

import (
	"fmt"

	"github.com/strata-sched/strata/interfaces"
)

// Tombstones remember, per shard, the newest wire epoch at which a shard was
// revoked from this tier (or revoked while this tier did not hold it). An
// Assign at or below a shard's tombstone is refused: it is older than the
// revoke, and taking it would bring back an owner that was revoked (issue 20:
// a parent's re-sent Assign accepted after the revoke had finished).
//
// Bound: an entry ends only when an Assign above it is taken (Assigned), which
// the parent sends only once it gave the shard out again at a newer epoch; the
// table otherwise lives as long as its owner (a tier replica's uplink: the
// process). docs/reliability.md says why that is long enough. The zero value is
// empty and ready to use; it is not safe for concurrent use.
type Tombstones struct {
	m map[interfaces.ShardID]uint64
}

// Revoked records that shard was revoked at epoch (a tombstone only grows).
func (t *Tombstones) Revoked(shard interfaces.ShardID, epoch uint64) {
	if epoch == 0 {
		return
	}
	if t.m == nil {
		t.m = map[interfaces.ShardID]uint64{}
	}
	if epoch > t.m[shard] {
		t.m[shard] = epoch
	}
}

// Refuse returns, for an Assign of shard at epoch, the error to refuse it with
// (wrapping interfaces.ErrStaleEpoch) and the tombstone's epoch, or nil when
// the Assign is newer than any revoke of the shard.
func (t *Tombstones) Refuse(shard interfaces.ShardID, epoch uint64) (uint64, error) {
	at, ok := t.m[shard]
	if !ok || epoch > at {
		return 0, nil
	}
	return at, fmt.Errorf("shard %s: epoch %d is not newer than the %d it was revoked at: %w", shard, epoch, at, interfaces.ErrStaleEpoch)
}

// Assigned records that an Assign of shard at epoch was taken: a tombstone
// below it is superseded and dropped.
func (t *Tombstones) Assigned(shard interfaces.ShardID, epoch uint64) {
	if at, ok := t.m[shard]; ok && epoch > at {
		delete(t.m, shard)
	}
}

// Epoch returns shard's tombstone, if any.
func (t *Tombstones) Epoch(shard interfaces.ShardID) (uint64, bool) {
	at, ok := t.m[shard]
	return at, ok
}

// Len is how many tombstones are kept.
func (t *Tombstones) Len() int { return len(t.m) }
