package coop

import "github.com/strata-sched/strata/interfaces"

// InView keeps the constraints of cs that still make sense in v, for a tier
// instance that was given rules written for more than it holds (an operator's
// constraints for every instance of a tier, the rules a parent sends): only the
// shards and children v has, and only if what the kind needs is left —
//
//   - max_moves: always kept (it names nothing);
//   - capacity: at least one child;
//   - anti_affinity: at least one shard;
//   - pin: at least one shard and its one child (a pin naming several
//     children is dropped);
//   - allowed, avoid (and any other kind): at least one shard and one child.
//
// A kept rule without a Reason gets "operator constraint". cs is not changed.
// The daemons (coordinator/tierd) and the simulator (sim) filter with it.
func InView(v *interfaces.View, cs []interfaces.Constraint) []interfaces.Constraint {
	shards := make(map[interfaces.ShardID]bool, len(v.Shards))
	for _, s := range v.Shards {
		shards[s.ID] = true
	}
	children := make(map[interfaces.ChildID]bool, len(v.Children))
	for _, c := range v.Children {
		children[c.ID] = true
	}
	var out []interfaces.Constraint
	for _, k := range cs {
		c := k
		c.Shards, c.Children = nil, nil
		for _, id := range k.Shards {
			if shards[id] {
				c.Shards = append(c.Shards, id)
			}
		}
		for _, id := range k.Children {
			if children[id] {
				c.Children = append(c.Children, id)
			}
		}
		switch k.Kind {
		case interfaces.ConstraintMaxMoves:
		case interfaces.ConstraintCapacity:
			if len(c.Children) == 0 {
				continue
			}
		case interfaces.ConstraintAntiAffinity:
			if len(c.Shards) == 0 {
				continue
			}
		case interfaces.ConstraintPin:
			if len(c.Shards) == 0 || len(c.Children) != 1 || len(k.Children) != 1 {
				continue
			}
		default:
			if len(c.Shards) == 0 || len(c.Children) == 0 {
				continue
			}
		}
		if c.Reason == "" {
			c.Reason = "operator constraint"
		}
		out = append(out, c)
	}
	return out
}
