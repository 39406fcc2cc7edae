package balancer

import "github.com/strata-sched/strata/interfaces"

// PlannedLoads returns st seen with the shard loads a plan was made on (the
// planning view's shards, whose loads may be the ones the children measured
// rather than the declared ones st holds): Shard returns the spec with that
// load, and Used counts it, in place of st's, on the child where st counts
// the shard (its in-flight target, else its owner). Shards st does not have
// are ignored; shards the list does not name keep st's load.
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
		if !ok || cur.Load.Equal(s.Load) {
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
	q    Quarantiner
	load map[interfaces.ShardID]interfaces.Load // planned loads that differ from the state's
	adj  map[interfaces.ChildID]interfaces.Load // Σ (planned - state) of the shards counted on a child
}

var _ Quarantiner = (*plannedState)(nil)

func (p *plannedState) Shard(id interfaces.ShardID) (interfaces.Shard, bool) {
	s, ok := p.PlanState.Shard(id)
	if l, planned := p.load[id]; ok && planned {
		s.Load = l
	}
	return s, ok
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
