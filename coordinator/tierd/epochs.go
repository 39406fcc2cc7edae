package tierd

import (
	"github.com/strata-sched/strata/coordinator/tiercore"
	"github.com/strata-sched/strata/interfaces"
)

// Epochs on the wire.
//
// Each tier's FSM counts its own epoch per shard: a shard's first placement in a
// region is epoch 1 there. A child must see epochs that only ever grow for a
// shard, even when the shard leaves a region and comes back later (a host keeps
// a tombstone of the epoch it was revoked at). So below the top tier, the epoch
// sent to a child is composed with the parent's epoch for the shard:
//
//	wire epoch = parent epoch << localBits | local epoch
//
// The parent's epoch grows with every move at the parent, so a shard that comes
// back starts above anything it had before; within one stay the local epoch
// grows. With 16 local bits a shard can change owner 65,535 times within one
// stay, and two nested tiers below the global one still leave 32 bits for the
// global epoch. The top tier sends its epochs as they are; its FSM deletes
// shards with RetireShards, so a deleted ID that comes back starts above them.
//
// A tier that does not know its parent's epoch for a shard (a new leader, before
// its parent re-sent the shard's Assign) sends nothing about that shard.
const localBits = tiercore.LocalBits

const localMask = tiercore.LocalMask

// wireEpoch returns the epoch to send a child for shard at local epoch e, and
// whether it is known (tiercore.Uplink.WireEpoch).
func (d *Daemon) wireEpoch(shard interfaces.ShardID, e interfaces.Epoch) (uint64, bool) {
	if d.up == nil {
		return uint64(e), true
	}
	if e > localMask {
		d.logger.Printf("shard %s: local epoch %d exceeds %d bits; not sent", shard, e, localBits)
		return 0, false
	}
	d.up.mu.Lock()
	defer d.up.mu.Unlock()
	return d.up.core.WireEpoch(shard, uint64(e))
}

// revokeEpoch is wireEpoch for a revoke: when the parent's epoch for the shard
// is not known now (forgotten at a reconnect, not confirmed again yet), the
// last one known composes it (tiercore.Uplink.RevokeEpoch).
func (d *Daemon) revokeEpoch(shard interfaces.ShardID, e interfaces.Epoch) (uint64, bool) {
	if d.up == nil {
		return uint64(e), true
	}
	if e > localMask {
		return 0, false
	}
	d.up.mu.Lock()
	defer d.up.mu.Unlock()
	return d.up.core.RevokeEpoch(shard, uint64(e))
}
