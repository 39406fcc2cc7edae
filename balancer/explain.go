package balancer

import (
	"fmt"

	"github.com/strata-sched/strata/interfaces"
)

// explain says, for every child, which constraint keeps shard s off it in the
// state st (with s removed from its own child, so the check is "could s go
// there"). ok is true when some child would take s after all.
func (st *state) explain(s int) (interfaces.Infeasible, bool) {
	p, R := st.p, st.R
	inf := interfaces.Infeasible{Shard: p.ShardIDs[s], Excluded: make(map[interfaces.ChildID]string, st.M)}
	cur := st.assign[s]
	row := make([]float64, R)
	ok := false
	for c := 0; c < st.M; c++ {
		id := p.ChildIDs[c]
		switch {
		case p.IsLocked(s) && int32(c) != cur:
			inf.Excluded[id] = ConstraintInFlight + ": the shard has an in-flight move"
			continue
		case p.Unresolved != nil && p.Unresolved[s] != "":
			inf.Excluded[id] = p.Unresolved[s]
			continue
		case p.Drained(c):
			inf.Excluded[id] = fmt.Sprintf("%s: child is %s", ConstraintDrain, p.ChildState[c])
			continue
		case p.PinOf(s) >= 0 && p.PinOf(s) != c:
			inf.Excluded[id] = fmt.Sprintf("%s: shard is pinned to %q", ConstraintPin, p.ChildIDs[p.PinOf(s)])
			continue
		case !p.AllowedOn(s, c):
			inf.Excluded[id] = ConstraintAllowed + ": not among the shard's allowed children (labels/locality)"
			continue
		}
		leaving := int32(-1)
		if int32(c) == cur {
			leaving = int32(s)
		}
		if !st.groupOK(s, c, int(leaving)) {
			inf.Excluded[id] = ConstraintAntiAffinity + ": the child already holds the limit of the shard's anti-affinity group"
			continue
		}
		over := ""
		for r := 0; r < R; r++ {
			row[r] = st.load[c*R+r]
			if int32(c) != cur {
				row[r] += p.Load[s*R+r]
			}
			if row[r] > st.limit[c*R+r] && over == "" {
				free := st.limit[c*R+r] - st.load[c*R+r]
				if int32(c) == cur {
					free += p.Load[s*R+r]
				}
				over = fmt.Sprintf("%s: needs %.4g %s, %.4g free within headroom", ConstraintCapacity, p.Load[s*R+r], p.Resources[r], free)
			}
		}
		if over != "" {
			inf.Excluded[id] = over
			continue
		}
		if int32(c) != cur {
			var ch change
			ch.n, ch.shard[0], ch.to[0] = 1, s, int32(c)
			if !st.budgetOK(&ch) {
				inf.Excluded[id] = fmt.Sprintf("%s: the round's move budget (%d moves, %d bytes) is used up", ConstraintMaxMoves, p.MaxMoves, p.MaxBytes)
				continue
			}
		}
		ok = true
	}
	return inf, ok
}
