package balancer

import (
	"maps"
	"slices"

	"github.com/strata-sched/strata/interfaces"
)

// PlannedLoads returns st seen with the shards a plan was made on (the
// planning view's, whose loads may be the ones the children measured rather
// than the declared ones st holds, and whose rules may be the ones that bind
// within this tier, interfaces.ShardConstraints.Within): Shard returns the
// spec with that load and those rules, and Used counts the load, in place of
// st's, on the child where st counts the shard (its in-flight target, else
// its owner). Shards st does not have are ignored; shards the list does not
// name are as in st.
//
// A tier verifies a plan at commit against PlannedLoads(state, view.Shards),
// so that the commit's capacity view is the planner's — the owners, epochs
// and moves in flight are the latest state's, the loads are the ones the
// plan was made on. Verified on the declared loads instead, a move that fits
// as planned (measured loads below the declared ones) was rejected
// (capacity) every round and planned again the next, for ever (issue 20,
// item 6: 249 times in two minutes). The list is read in order, so Used
// sums in the same order every time (deterministic). st's quarantine
// (Quarantiner) is kept. O(len(shards)) lookups in st.
func PlannedLoads(st PlanState, shards []interfaces.Shard) PlanState {
	ps := &plannedState{PlanState: st}
	ps.q, _ = st.(Quarantiner)
	for i := range shards {
		s := &shards[i]
		cur, ok := st.Shard(s.ID)
		if !ok {
			continue
		}
		if !sameConstraints(&cur.Constraints, &s.Constraints) {
			if ps.rules == nil {
				ps.rules = map[interfaces.ShardID]*interfaces.ShardConstraints{}
			}
			ps.rules[s.ID] = &s.Constraints
		}
		if cur.Load.Equal(s.Load) {
			continue
		}
		if ps.load == nil {
			ps.load = map[interfaces.ShardID]interfaces.Load{}
			ps.adj = map[interfaces.ChildID]interfaces.Load{}
		}
		ps.load[s.ID] = s.Load
		on, _ := st.Owner(s.ID)
		if fl, ok := st.InFlight(s.ID); ok {
			on = fl.To
		}
		if on != "" {
			ps.adj[on] = ps.adj[on].Add(s.Load).Sub(cur.Load)
		}
	}
	return ps
}

type plannedState struct {
	PlanState
	q     Quarantiner
	load  map[interfaces.ShardID]interfaces.Load              // planned loads that differ from the state's
	rules map[interfaces.ShardID]*interfaces.ShardConstraints // planned shard rules that differ
	adj   map[interfaces.ChildID]interfaces.Load              // Σ (planned - state) of the shards counted on a child
}

var _ Quarantiner = (*plannedState)(nil)

func (p *plannedState) Shard(id interfaces.ShardID) (interfaces.Shard, bool) {
	s, ok := p.PlanState.Shard(id)
	if l, planned := p.load[id]; ok && planned {
		s.Load = l
	}
	if c, planned := p.rules[id]; ok && planned {
		s.Constraints = *c
	}
	return s, ok
}

// sameConstraints reports whether a and b are the same rules.
func sameConstraints(a, b *interfaces.ShardConstraints) bool {
	return a.Pinned == b.Pinned && a.AntiAffinity == b.AntiAffinity && a.MaxPerChild == b.MaxPerChild &&
		slices.Equal(a.Allowed, b.Allowed) && maps.Equal(a.Labels, b.Labels)
}

func (p *plannedState) Used(id interfaces.ChildID) interfaces.Load {
	u := p.PlanState.Used(id)
	if a, ok := p.adj[id]; ok {
		u = u.Add(a)
	}
	return u
}

// Quarantined passes on the state's quarantine.
func (p *plannedState) Quarantined(id interfaces.ShardID) string {
	if p.q == nil {
		return ""
	}
	return p.q.Quarantined(id)
}
