package tiercore

import (
	"cmp"
	"slices"

	"github.com/strata-sched/strata/interfaces"
)

// Kind is what a Msg tells a child.
type Kind uint8

const (
	// Assign gives the child the shard at Epoch.
	Assign Kind = iota + 1
	// Revoke takes the shard back from the child at Epoch.
	Revoke
)

func (k Kind) String() string {
	switch k {
	case Assign:
		return "assign"
	case Revoke:
		return "revoke"
	}
	return "unknown"
}

// Msg is one message for a child: Assign or Revoke of Shard at wire epoch Epoch.
type Msg struct {
	Kind  Kind
	Shard interfaces.ShardID
	Epoch uint64
}

// Shard is one shard as the parent's committed state has it, with the wire
// epochs the driver composed for it.
type Shard struct {
	ID interfaces.ShardID
	// Owner is the committed owner ("" when unassigned). During a move it is
	// still the source.
	Owner interfaces.ChildID
	// MovingFrom is the source of the shard's in-flight move ("" when none).
	MovingFrom interfaces.ChildID
	// Leaving says the tier's own parent is taking the shard back: it is
	// assigned to no child until the parent gives it again.
	Leaving bool
	// AssignEpoch is the wire epoch an Assign to Owner carries now; 0 when it
	// is not known (no Assign may be sent).
	AssignEpoch uint64
	// RevokeEpoch is the wire epoch a Revoke of the shard carries now; 0 when
	// not known.
	RevokeEpoch uint64
}

// MayAssign reports whether an Assign of s may go to child now: child is its
// committed owner, the shard is not moving away from it, not being taken back
// by the tier's own parent, and its wire epoch is known. Every Assign a tier
// sends passes it (Reconcile, and the daemon's other sends).
func MayAssign(s Shard, child interfaces.ChildID) bool {
	return s.Owner == child && s.MovingFrom != child && !s.Leaving && s.AssignEpoch != 0
}

// leavingChild: s is child's but must go from it (moving away, or being
// taken back by the tier's parent).
func leavingChild(s Shard, child interfaces.ChildID) bool {
	return s.Owner == child && (s.MovingFrom == child || s.Leaving)
}

// Input is one reconciliation: what Child states it holds against the
// parent's committed state.
type Input struct {
	Child interfaces.ChildID
	// Held is what the child states it holds: shard → wire epoch. With
	// EpochsStated false (a host's Report) it lists the shards the child runs
	// and the epochs are not read.
	Held         map[interfaces.ShardID]uint64
	EpochsStated bool
	// Owned are the shards whose committed owner is Child, in the order the
	// Assigns are to go (those moving away from it included).
	Owned []Shard
	// Lookup returns a held shard that is not in Owned, from the committed
	// state; false when the parent does not have it.
	Lookup func(interfaces.ShardID) (Shard, bool)
	// Gone is, for a held shard the parent does not have, the epoch a Revoke
	// of it carries (its tombstone, or the state's epoch floor); 0 when not
	// known. Nil: none known.
	Gone func(interfaces.ShardID) uint64
	// Due says whether an owned shard that the child does not hold is due for
	// its Assign again (for Reports, which come every interval). Nil: always.
	Due func(interfaces.ShardID) bool
}

// Reconcile returns the Assigns and Revokes that bring what in.Child holds in
// line with the committed state (see the package doc for the rules): first the
// Assigns, in Owned's order, then the Revokes, by shard ID.
func Reconcile(in Input) []Msg {
	var out []Msg
	mine := make(map[interfaces.ShardID]int, len(in.Owned)) // → index in Owned
	for i, s := range in.Owned {
		mine[s.ID] = i
		e, held := in.Held[s.ID]
		if !MayAssign(s, in.Child) {
			continue // if it must leave, it is revoked below
		}
		switch {
		case !held:
			if in.Due != nil && !in.Due(s.ID) {
				continue
			}
		case !in.EpochsStated || e >= s.AssignEpoch:
			continue
		}
		out = append(out, Msg{Kind: Assign, Shard: s.ID, Epoch: s.AssignEpoch})
	}
	var revokes []Msg
	for id, e := range in.Held {
		if !in.EpochsStated {
			e = 0
		}
		var at uint64
		s, ok := Shard{}, false
		if i, own := mine[id]; own {
			s, ok = in.Owned[i], true
		} else {
			s, ok = lookup(in.Lookup, id)
		}
		if ok {
			if s.Owner == in.Child && !leavingChild(s, in.Child) {
				continue // its own
			}
			if leavingChild(s, in.Child) && !in.EpochsStated {
				// From a Report: the move's revoke, or the parent's, is
				// re-sent on its own timer (not at every report).
				continue
			}
			at = s.RevokeEpoch
		} else if in.Gone != nil {
			at = in.Gone(id)
		}
		if at = max(at, e); at == 0 {
			continue // no epoch to revoke at: the child would refuse it
		}
		revokes = append(revokes, Msg{Kind: Revoke, Shard: id, Epoch: at})
	}
	slices.SortFunc(revokes, func(a, b Msg) int { return cmp.Compare(a.Shard, b.Shard) })
	return append(out, revokes...)
}

func lookup(f func(interfaces.ShardID) (Shard, bool), id interfaces.ShardID) (Shard, bool) {
	if f == nil {
		return Shard{}, false
	}
	return f(id)
}
