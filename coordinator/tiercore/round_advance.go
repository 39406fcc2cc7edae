package tiercore

import (
	"slices"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// Moving is a move in flight as the committed state has it, for Advance.
type Moving struct {
	Move interfaces.Move
	// Epoch is the shard's committed epoch.
	Epoch interfaces.Epoch
	// SourceFailed says the move's source is committed as failed.
	SourceFailed bool
	// RevokeSent is when the source was last told to stop the shard (zero:
	// never, from this leader).
	RevokeSent time.Time
}

// Advance moves in-flight moves along at the start of a round, before it
// observes: a move off a failed child completes (the child cannot ack, and
// its lease has expired: it was declared failed for that), and the source
// of any other is told again to stop the shard once resend has passed since
// the last Revoke (a Revoke or its ack may have been lost). It returns the
// moves to complete (commit their new owner) and the Revokes to send, in
// the order of moving.
func Advance(now time.Time, moving []Moving, resend time.Duration) (complete []Moving, tell []Tell) {
	for _, m := range moving {
		if m.SourceFailed {
			complete = append(complete, m)
			continue
		}
		if now.Sub(m.RevokeSent) > resend {
			tell = append(tell, Tell{Child: m.Move.From, Kind: Revoke, Shard: m.Move.Shard, Epoch: m.Epoch})
		}
	}
	return complete, tell
}

// DueRetries returns, sorted, the shards whose Assign a child tier refused
// (refused: when) more than after ago: their Assign is sent again, once,
// while the shard is still that child's (RetryAssign).
func DueRetries(now time.Time, refused map[interfaces.ShardID]time.Time, after time.Duration) []interfaces.ShardID {
	var due []interfaces.ShardID
	for id, at := range refused {
		if now.Sub(at) > after {
			due = append(due, id)
		}
	}
	slices.Sort(due)
	return due
}

// RetryAssign is the Assign to send again for a shard whose Assign its owner
// refused, as committed now (owner "" when unassigned, moving when a move is
// in flight): none unless it is still placed and not moving.
func RetryAssign(shard interfaces.ShardID, owner interfaces.ChildID, epoch interfaces.Epoch, moving bool) (Tell, bool) {
	if owner == "" || moving {
		return Tell{}, false
	}
	return Tell{Child: owner, Kind: Assign, Shard: shard, Epoch: epoch}, true
}
