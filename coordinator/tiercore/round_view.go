package tiercore

import (
	"slices"

	"github.com/strata-sched/strata/interfaces"
)

// The round's view: what a tier instance plans on, made from its committed
// state and its children's reports (the driver calls these while it builds
// the round's input; the what-if Plan and the hints to the parent start from
// the same view).

// Measured replaces a shard's declared load with the load its owner measured and
// reported, when the owner reports it: a shard whose real load doubled weighs
// double in the plan. The view's shards are copied, never changed in place.
func Measured(v *interfaces.View) {
	loads := OwnerLoads(v.Assignments, v.Reports)
	if len(loads) == 0 {
		return
	}
	shards := make([]interfaces.Shard, len(v.Shards))
	copy(shards, v.Shards)
	for i := range shards {
		if l, ok := loads[shards[i].ID]; ok {
			// Dimensions the child does not measure keep their declared value.
			shards[i].Load = shards[i].Load.WithMeasured(l)
		}
	}
	v.Shards = shards
}

// Within replaces each shard's rules with the ones that bind inside this
// tier instance, self (interfaces.ShardConstraints.Within: a pin to self, or
// an allowed list naming it, was our parent's to keep). The view's shards
// are copied when one changes, never changed in place. The commit verifies
// on the same rules (balancer.PlannedLoads of the planning view).
func Within(v *interfaces.View, self interfaces.ChildID) {
	var shards []interfaces.Shard
	for i := range v.Shards {
		c := &v.Shards[i].Constraints
		if c.Pinned != self && !slices.Contains(c.Allowed, self) {
			continue
		}
		if shards == nil {
			shards = make([]interfaces.Shard, len(v.Shards))
			copy(shards, v.Shards)
		}
		shards[i].Constraints = c.Within(self)
	}
	if shards != nil {
		v.Shards = shards
	}
}

// OwnerLoads returns each shard's load as its owner under assignments last
// reported it (reports of former owners and unusable loads are ignored); nil
// when there is none.
func OwnerLoads(assignments []interfaces.Assignment, reports map[interfaces.ChildID]interfaces.Report) map[interfaces.ShardID]interfaces.Load {
	owner := make(map[interfaces.ShardID]interfaces.ChildID, len(assignments))
	for _, a := range assignments {
		owner[a.Shard] = a.Child
	}
	var loads map[interfaces.ShardID]interfaces.Load
	for child, r := range reports {
		for _, sl := range r.Shards {
			if owner[sl.Shard] != child || !validLoad(sl.Load) {
				continue // a stale report from a former owner, or nothing usable
			}
			if loads == nil {
				loads = map[interfaces.ShardID]interfaces.Load{}
			}
			loads[sl.Shard] = sl.Load
		}
	}
	return loads
}

func validLoad(l interfaces.Load) bool {
	return interfaces.ValidateLoad("load", l) == nil
}
