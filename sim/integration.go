package sim

import (
	"fmt"

	"github.com/strata-sched/strata/interfaces"
)

// regionHints returns the hints region r sends the global tier with its report
// rep, by integration mode: only a collaborative region sends any.
func (e *engine) regionHints(r int32, rep interfaces.Report) []interfaces.Hint {
	if e.spec.Integration != Collaborative {
		return nil
	}
	return []interfaces.Hint{{Kind: interfaces.HintHeadroom, Amount: rep.Headroom, Reason: "region headroom"}}
}

// constraints returns the tier-level constraints for a view by integration mode.
//
//   - decoupled: none; each tier plans alone.
//   - manual: the operator constraints of the policy spec for this tier; for a
//     region instance, children outside the region are dropped (a constraint
//     left with no children is dropped, except max_moves).
//   - collaborative: at the global tier, each region's headroom hint becomes a
//     capacity constraint when the region reports less headroom than Reserve of
//     its capacity in some resource: the region is capped at (1-Reserve) of its
//     capacity, so the global tier sends it no more load. Nothing else.
func (e *engine) constraints(tier string, v *interfaces.View) []interfaces.Constraint {
	var out []interfaces.Constraint
	switch e.spec.Integration {
	case Manual:
		inView := map[interfaces.ChildID]bool{}
		for _, c := range v.Children {
			inView[c.ID] = true
		}
		for _, cs := range e.spec.Constraints {
			if cs.Tier != tier {
				continue
			}
			c := interfaces.Constraint{Limit: cs.Limit.Load(), Max: cs.Max, MaxBytes: int64(cs.MaxBytes), Reason: "operator constraint"}
			switch cs.Kind {
			case "capacity":
				c.Kind = interfaces.ConstraintCapacity
			case "avoid":
				c.Kind = interfaces.ConstraintAvoid
			case "allowed":
				c.Kind = interfaces.ConstraintAllowed
			case "pin":
				c.Kind = interfaces.ConstraintPin
			case "max_moves":
				c.Kind = interfaces.ConstraintMaxMoves
			}
			for _, ch := range cs.Children {
				if inView[interfaces.ChildID(ch)] {
					c.Children = append(c.Children, interfaces.ChildID(ch))
				}
			}
			if len(c.Children) == 0 && c.Kind != interfaces.ConstraintMaxMoves {
				continue
			}
			for _, id := range cs.Shards {
				c.Shards = append(c.Shards, interfaces.ShardID(id))
			}
			if cs.Job != "" {
				for _, s := range v.Shards {
					if s.Job == cs.Job {
						c.Shards = append(c.Shards, s.ID)
					}
				}
			}
			out = append(out, c)
		}
	case Collaborative:
		if tier != interfaces.TierGlobal {
			return nil
		}
		res := e.spec.Reserve
		for _, ch := range v.Children {
			rep := v.Reports[ch.ID]
			for _, h := range rep.Hints {
				if h.Kind != interfaces.HintHeadroom {
					continue
				}
				low := false
				for q := 0; q < nres; q++ {
					c := capOf(ch.Capacity, q)
					if c > 0 && capOf(h.Amount, q) < res*c {
						low = true
					}
				}
				if low {
					out = append(out, interfaces.Constraint{Kind: interfaces.ConstraintCapacity, Children: []interfaces.ChildID{ch.ID}, Limit: ch.Capacity.Scale(1 - res), Reason: fmt.Sprintf("region %s reports headroom below %.0f%%", ch.ID, 100*res)})
				}
			}
		}
	}
	return out
}
