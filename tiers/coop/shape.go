package coop

import (
	"fmt"
	"sort"
	"strings"

	"github.com/strata-sched/strata/interfaces"
)

// ShapeRules are the rules a parent that plans aggregates adds to its solve
// from its children's capacity shapes (Report.Shape), in every integration
// mode: a shard that fits, whole, in no host of a child is allowed only on the
// active children whose shape can hold it (one allowed rule per set of such
// children, its reason naming the children ruled out and their largest host).
// A child that reported no shape is assumed able to hold anything. A shard no
// child can hold gets no rule (the solver reports it infeasible as before;
// the rule would only hide where it is). This is what a sensible hierarchy
// without runtime hints knows, which makes the decoupled mode a fair
// baseline; the result is deterministic for the same view.
func ShapeRules(v *interfaces.View) []interfaces.Constraint {
	type entry struct {
		allowed  []interfaces.ChildID
		excluded []string
		shards   []interfaces.ShardID
	}
	var shaped []int
	for c, ch := range v.Children {
		if rep, ok := v.Reports[ch.ID]; ok && rep.Shape != nil && ch.State == interfaces.ChildActive {
			shaped = append(shaped, c)
		}
	}
	if len(shaped) == 0 {
		return nil
	}
	groups := map[string]*entry{}
	var keys []string
	for _, s := range v.Shards {
		var excluded []string
		for _, c := range shaped {
			ch := &v.Children[c]
			if sh := v.Reports[ch.ID].Shape; !sh.Fits(s.Load) {
				excluded = append(excluded, fmt.Sprintf("%s (largest host %s)", ch.ID, FormatLoad(sh.Largest)))
			}
		}
		if len(excluded) == 0 {
			continue
		}
		var allowed []interfaces.ChildID
		for _, ch := range v.Children {
			if ch.State != interfaces.ChildActive {
				continue
			}
			rep, ok := v.Reports[ch.ID]
			if !ok || rep.Shape == nil || rep.Shape.Fits(s.Load) {
				allowed = append(allowed, ch.ID)
			}
		}
		if len(allowed) == 0 {
			continue
		}
		ids := make([]string, len(allowed))
		for i, a := range allowed {
			ids[i] = string(a)
		}
		key := strings.Join(ids, ",")
		g := groups[key]
		if g == nil {
			g = &entry{allowed: allowed, excluded: excluded}
			groups[key] = g
			keys = append(keys, key)
		}
		g.shards = append(g.shards, s.ID)
	}
	sort.Strings(keys)
	out := make([]interfaces.Constraint, 0, len(keys))
	for _, k := range keys {
		g := groups[k]
		sort.Slice(g.shards, func(a, b int) bool { return g.shards[a] < g.shards[b] })
		out = append(out, interfaces.Constraint{Kind: interfaces.ConstraintAllowed, Shards: g.shards, Children: g.allowed,
			Reason: fmt.Sprintf("capacity shape: no host of %s can hold it", strings.Join(g.excluded, ", "))})
	}
	return out
}
