package balancer

import "slices"

// The slo goal: with LatencyModel.SLO giving shard s its latency SLO (seconds)
// and p_q(c, ρ) the latency model's prediction for child c,
//
//	slo = (1/N_slo) Σ_{s placed, SLO_s > 0} max(0, p_q(child(s), u_child(s),ρ) / SLO_s − 1)
//
// the mean relative excess of the predicted tail over each shard's SLO (0
// while every prediction is within its SLO), so at a priority above balance it
// only acts where some shard's SLO is at risk. It is a sum of per-child terms
// that depend on the child's load and on which shards with an SLO it holds:
// state keeps those per child (sloState) and scores a change with the shards
// it moves (sloTerm).

// sloState is, per child, the shards with an SLO it holds.
type sloState struct {
	slo []float64 // per shard, seconds (0 none)
	on  [][]int32 // per child, its shards with an SLO
	pos []int32   // per shard, its index in on[child] (-1 none)
	inv float64   // 1 / N_slo
}

// newSLOState returns the per-child SLO bookkeeping of assign, or nil when no
// goal is slo or no shard has an SLO.
func newSLOState(p *Problem, goals []Goal, lm LatencyModel, assign []int32) *sloState {
	if lm.SLO == nil || !slices.ContainsFunc(goals, func(g Goal) bool { return g.Kind == GoalSLO }) {
		return nil
	}
	n := 0
	for _, v := range lm.SLO {
		if v > 0 {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	ss := &sloState{slo: lm.SLO, on: make([][]int32, p.NumChildren()), pos: make([]int32, len(lm.SLO)), inv: 1 / float64(n)}
	for s, c := range assign {
		ss.pos[s] = -1
		if c >= 0 && lm.SLO[s] > 0 {
			ss.pos[s] = int32(len(ss.on[c]))
			ss.on[c] = append(ss.on[c], int32(s))
		}
	}
	return ss
}

// move records shard s going from child src to dst (-1 = none).
func (ss *sloState) move(s int, src, dst int32) {
	if ss.slo[s] <= 0 {
		return
	}
	if src >= 0 {
		l := ss.on[src]
		i := ss.pos[s]
		last := l[len(l)-1]
		l[i] = last
		ss.pos[last] = i
		ss.on[src] = l[:len(l)-1]
		ss.pos[s] = -1
	}
	if dst >= 0 {
		ss.pos[s] = int32(len(ss.on[dst]))
		ss.on[dst] = append(ss.on[dst], int32(s))
	}
}

// sloTerm is the slo goal's term of child c with load row l, holding its
// current shards changed by ch (nil: unchanged): the shards ch moves off c
// left out, those it moves onto c added.
func (st *state) sloTerm(c int, l []float64, ch *change) float64 {
	ss := st.slo
	if ss == nil {
		return 0
	}
	r := st.lat.res
	pred := st.lat.predict(c, l[r]*st.inv[c*st.R+r])
	v := 0.0
	for _, s := range ss.on[c] {
		if ch != nil && leaves(ch, int(s), c) {
			continue
		}
		if x := pred/ss.slo[s] - 1; x > 0 {
			v += x
		}
	}
	if ch != nil {
		for i := 0; i < ch.n; i++ {
			s := ch.shard[i]
			if int(ch.to[i]) == c && int(st.assign[s]) != c && ss.slo[s] > 0 {
				if x := pred/ss.slo[s] - 1; x > 0 {
					v += x
				}
			}
		}
	}
	return float64(v * ss.inv)
}

// leaves reports whether ch moves shard s off child c.
func leaves(ch *change, s, c int) bool {
	for i := 0; i < ch.n; i++ {
		if ch.shard[i] == s && int(ch.to[i]) != c {
			return true
		}
	}
	return false
}

// sloValue is the slo goal's value of assign computed from scratch (load is
// childLoads of assign).
func sloValue(p *Problem, lm LatencyModel, load []float64, assign []int32) float64 {
	if lm.SLO == nil {
		return 0
	}
	lp := newLatencyParams(p, lm)
	R, r := p.NumResources(), lp.res
	n, v := 0, 0.0
	for s, c := range assign {
		slo := lm.SLO[s]
		if slo <= 0 {
			continue
		}
		n++
		if c < 0 {
			continue
		}
		if x := lp.predict(int(c), util(load[int(c)*R+r], p.Capacity[int(c)*R+r]))/slo - 1; x > 0 {
			v += x
		}
	}
	if n == 0 {
		return 0
	}
	return v / float64(n)
}
