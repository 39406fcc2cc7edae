package balancer

import "slices"

// Scoring many children per shard (a large Options.Candidates, up to a full
// scan) is where a placement's time goes: with the children taken from the cold
// heap one by one and every candidate scored through the generic delta, one
// candidate cost ~93 ns at 100 children. Three things make it cheaper without
// changing a single decision (BenchmarkDestinationScan, 30 Nov, 07:52 UTC,
// medians of three side by side: the kept order went from ~45 to ~30 ns per
// candidate with the third, at 100 and at 1,000 children):
//
//   - coldOrder keeps the children in the cold heap's visiting order as an
//     array, updated as their keys change, so visiting the next child is O(1);
//     a placer keeps one when its searches visit a large part of the children
//     (keeping it costs the distance a child moves in the order per move);
//   - moveScorer computes, once per shard, what every move of that shard
//     shares (its source child's part of each goal, and the busiest children
//     per resource for the min-max goals), and scores each candidate with the
//     same floating-point operations, in the same order, as state.delta and
//     state.deltaBelow; shardMoves uses it when a shard has at least
//     scorerMin candidates, the generic path otherwise;
//   - the scorer reads its goals from a per-level table (scoredGoal) filled
//     once, calls the threshold and squared-balance terms (thresholdTerm,
//     sqTerm: state.childTerm's own) without childTerm's dispatch, checks a
//     shard without pins, allowed lists, groups or lock with one drain test,
//     and bestDestination walks the kept order in a plain loop.

// coldOrder is every child in the order idxHeap.bestFirst visits the cold heap:
// key decreasing, ties by lower index.
type coldOrder struct {
	h   *idxHeap
	ord []int32
	pos []int32
}

func newColdOrder(h *idxHeap) *coldOrder {
	o := &coldOrder{h: h, ord: make([]int32, len(h.key)), pos: make([]int32, len(h.key))}
	for i := range o.ord {
		o.ord[i] = int32(i)
	}
	slices.SortFunc(o.ord, func(x, y int32) int {
		switch {
		case o.before(x, y):
			return -1
		case o.before(y, x):
			return 1
		}
		return 0
	})
	for i, c := range o.ord {
		o.pos[c] = int32(i)
	}
	return o
}

// before reports whether child x comes before child y.
func (o *coldOrder) before(x, y int32) bool { return o.h.itemBefore(x, y) }

// fix moves child c to its place after its key changed.
func (o *coldOrder) fix(c int) {
	x := int32(c)
	i := int(o.pos[c])
	for i > 0 && o.before(x, o.ord[i-1]) {
		o.ord[i] = o.ord[i-1]
		o.pos[o.ord[i]] = int32(i)
		i--
	}
	for i+1 < len(o.ord) && o.before(o.ord[i+1], x) {
		o.ord[i] = o.ord[i+1]
		o.pos[o.ord[i]] = int32(i)
		i++
	}
	o.ord[i] = x
	o.pos[c] = int32(i)
}

// coldFirst calls visit with the children coldest first (the cold heap's
// order) until it returns false or every child was visited. visit must not
// change any child's load.
func (pl *placer) coldFirst(visit func(c int) bool) {
	if pl.order == nil {
		pl.cold.bestFirst(&pl.front, visit)
		return
	}
	for _, c := range pl.order.ord {
		if !visit(int(c)) {
			return
		}
	}
}

// keepOrder makes the placer keep a coldOrder when its searches visit at least
// a quarter of the children (visits children per search; below that the heap
// is cheaper than keeping the order as children's loads change).
func (pl *placer) keepOrder(visits int) {
	if pl.order == nil && 4*visits >= pl.st.M {
		pl.order = newColdOrder(pl.cold)
	}
}

// scorerMin is the fewest candidates per shard for which the move scorer's
// per-shard set-up pays: with fewer (candidates=1 at 10,000 children) the
// generic path was faster. Placing an unplaced shard with the default goals'
// levels (state.fast) has little set-up (no source child) and takes the
// scorer with any number: a global tier's place round of 1M shards on 100
// regions with candidates=1 went from 1.44–1.56 to 1.32–1.41 s.
const scorerMin = 8

// shardMoves scores the moves of one shard to candidate children through the
// move scorer or, for few candidates, state's generic path: the same answers.
type shardMoves struct {
	pl     *placer
	s      int
	scored bool
	ch     change
}

// movesOf prepares the scoring of shard s's moves to about n candidates.
func (pl *placer) movesOf(s, n int) *shardMoves {
	mv := &pl.moves
	mv.pl, mv.s, mv.scored = pl, s, n >= scorerMin || pl.st.fast && pl.st.assign[s] < 0
	if mv.scored {
		if pl.scorer == nil {
			pl.scorer = newMoveScorer(pl.st)
		}
		pl.scorer.reset(s)
	}
	return mv
}

// feasible is placer.feasibleMove of the move to c.
func (mv *shardMoves) feasible(c int) bool {
	if mv.scored {
		return mv.pl.scorer.feasible(c)
	}
	return mv.pl.feasibleMove(&mv.ch, mv.s, c)
}

// below is state.deltaBelow of the move to c (after feasible(c)); out is
// overwritten either way.
func (mv *shardMoves) below(c int, bound, out *levels) bool {
	if mv.scored {
		return mv.pl.scorer.below(c, bound, out)
	}
	d, ok := mv.pl.st.deltaBelow(&mv.ch, bound)
	*out = d
	return ok
}

// mmTop is, for one resource of one min-max goal, what moving the scorer's
// shard to any child c shares: the current maximum utilization, the source
// child's utilization after the shard leaves, and the two busiest children
// other than the source (n of them exist), to take the maximum over the
// children other than the source and c.
type mmTop struct {
	old, srcU float64
	t         [2]int32
	k         [2]float64
	n         int
}

// maxAfter is the resource's maximum utilization after the shard moves to c,
// where its utilization becomes u: the busiest child other than the source
// and c (idxHeap.maxExcluding(a, c, 0)), the source after the shard leaves
// (when it has one), and c.
func (t *mmTop) maxAfter(c int, fromChild bool, u float64) float64 {
	nw := 0.0
	switch {
	case t.n > 0 && int(t.t[0]) != c:
		nw = t.k[0]
	case t.n > 1:
		nw = t.k[1]
	}
	if fromChild && t.srcU > nw {
		nw = t.srcU
	}
	if u > nw {
		nw = u
	}
	return nw
}

// moveScorer scores the moves of one shard s from its child a (-1 when
// unplaced) to candidate children, giving exactly the values state.deltaBelow
// gives for the same moves (with an unbounded bound: state.delta's).
type moveScorer struct {
	st *state
	s  int
	a  int
	na []float64 // a's load row without s
	nb []float64 // the candidate's load row with s
	// part[gi] is goal gi's part of every move of s that does not depend on the
	// destination: the source child's change for the sums of child terms, the
	// term at the source for per-shard goals.
	part []float64
	// mm holds the min-max goals' mmTop, one per resource (scoredGoal.mm).
	mm []mmTop
	// lv[l] is level l's goals, with what scoring them reads (see scoredGoal).
	lv [][]scoredGoal
	// load is s's load row; free is set when s is unlocked with no pin,
	// allowed list or anti-affinity group, so that only a drain keeps it off
	// a child; budget when a move budget applies.
	load   []float64
	free   bool
	budget bool
	// fast is state.fast: bestFree then scores a free shard's candidates
	// with the first three levels written out (belowFast).
	fast bool
}

// scoredGoal is one goal as moveScorer.below scores it: its code and weight,
// its resources, its per-child terms (the goals that are sums of child
// terms), its squared-balance factors and threshold, and its index.
type scoredGoal struct {
	gi   int
	code goalCode
	w    float64
	res  []int
	term []float64
	sq   []float64
	thr  float64
	mm   []mmTop // the goal's part of moveScorer.mm (min-max goals)
}

func newMoveScorer(st *state) *moveScorer {
	m := &moveScorer{st: st, na: make([]float64, st.R), nb: make([]float64, st.R), part: make([]float64, len(st.goals))}
	off := make([]int, len(st.goals)) // goal → its first entry in m.mm
	for gi := range st.goals {
		off[gi] = len(m.mm)
		if st.code[gi] == codeBalanceMinMax {
			m.mm = append(m.mm, make([]mmTop, len(st.gres[gi]))...)
		}
	}
	m.lv = make([][]scoredGoal, len(st.byLevel))
	for l, gis := range st.byLevel {
		for _, gi := range gis {
			g := scoredGoal{gi: gi, code: st.code[gi], w: st.goals[gi].Weight, res: st.gres[gi], sq: st.sqInv[gi], thr: st.goals[gi].Threshold,
				term: st.term[gi*st.M : (gi+1)*st.M]}
			if g.code == codeBalanceMinMax {
				g.mm = m.mm[off[gi] : off[gi]+len(g.res)]
			}
			m.lv[l] = append(m.lv[l], g)
		}
	}
	m.fast = st.fast
	return m
}

// reset prepares the scorer for the moves of shard s from where it is now.
func (m *moveScorer) reset(s int) {
	st := m.st
	R := st.R
	m.s = s
	m.a = int(st.assign[s])
	a := m.a
	p := st.p
	m.load = p.Load[s*R : s*R+R]
	m.free = !p.IsLocked(s) && p.PinOf(s) < 0 && (p.Allowed == nil || p.Allowed[s] == nil) && (p.Groups == nil || len(p.Groups[s]) == 0)
	m.budget = !st.noBudget && (p.MaxMoves != 0 || p.MaxBytes != 0)
	if a >= 0 {
		for r := 0; r < R; r++ {
			m.na[r] = st.load[a*R+r] - st.p.Load[s*R+r]
		}
	}
	for _, gs := range m.lv {
		for i := range gs {
			m.resetGoal(&gs[i])
		}
	}
}

// resetGoal is reset's part for goal g.
func (m *moveScorer) resetGoal(g *scoredGoal) {
	st := m.st
	a, R := m.a, st.R
	switch g.code {
	case codeBalanceMinMax:
		for i, r := range g.res {
			t := &g.mm[i]
			h := st.uheap[r]
			t.old = h.key[h.top()]
			if a >= 0 {
				t.srcU = m.na[r] * st.inv[a*R+r]
			}
			t.t, t.k, t.n = h.topTwoExcept(a)
		}
	case codeLocality, codeMigration:
		m.part[g.gi] = st.shardTerm(g.gi, m.s, st.assign[m.s])
	case codeSLO:
		m.part[g.gi] = 0
		if a >= 0 {
			ch := change{n: 1, shard: [2]int{m.s}, to: [2]int32{-1}}
			m.part[g.gi] += st.sloTerm(a, m.na, &ch) - g.term[a]
		}
	default:
		m.part[g.gi] = 0
		if a >= 0 {
			m.part[g.gi] += st.childTerm(g.gi, a, m.na) - g.term[a]
		}
	}
}

// feasible reports whether s may move to child c now (placer.feasibleMove's
// rules) and leaves c's load row with s in m.nb.
func (m *moveScorer) feasible(c int) bool {
	st := m.st
	s := m.s
	if c == m.a {
		return false
	}
	if m.free {
		// canHost and groupOK reduce to this for a free shard.
		if st.p.Drained(c) {
			return false
		}
	} else if !st.canHost(s, c) || !st.groupOK(s, c, -1) {
		return false
	}
	R := st.R
	if !addFits(st.load[c*R:c*R+R], m.load[:R], st.limit[c*R:c*R+R], m.nb[:R]) {
		return false
	}
	if !m.budget {
		return true
	}
	ch := change{n: 1, shard: [2]int{s}, to: [2]int32{int32(c)}, a: m.a, b: c}
	return st.budgetOK(&ch)
}

// goal is goalDelta of goal g for the move to c (after feasible(c)). The
// threshold and squared-balance terms are state.childTerm's, called without
// its dispatch.
func (m *moveScorer) goal(g *scoredGoal, c int, inv []float64) float64 {
	st := m.st
	nb := m.nb[:len(inv)]
	switch g.code {
	case codeThreshold:
		return m.part[g.gi] + (thresholdTerm(nb, inv, g.res, g.thr) - g.term[c])
	case codeBalanceSq:
		return m.part[g.gi] + (sqTerm(nb, inv, g.res, g.sq) - g.term[c])
	case codeBalanceMinMax:
		d := 0.0
		for i, r := range g.res {
			t := &g.mm[i]
			d += t.maxAfter(c, m.a >= 0, nb[r]*inv[r]) - t.old
		}
		return d
	case codeLocality, codeMigration:
		d := 0.0
		d += st.shardTerm(g.gi, m.s, int32(c)) - m.part[g.gi]
		return d
	case codeSLO:
		ch := change{n: 1, shard: [2]int{m.s}, to: [2]int32{int32(c)}}
		return m.part[g.gi] + (st.sloTerm(c, m.nb, &ch) - g.term[c])
	default:
		return m.part[g.gi] + (st.childTerm(g.gi, c, m.nb) - g.term[c])
	}
}

// level is state.levelDelta of level l for the move to c (inv is c's row of
// state.inv).
func (m *moveScorer) level(l, c int, inv []float64) float64 {
	v := 0.0
	gs := m.lv[l]
	for i := range gs {
		v += float64(gs[i].w * m.goal(&gs[i], c, inv))
	}
	return v
}

// below is state.deltaBelow for the move to c: whether it is
// lexicographically below bound, and if so its change in out (out is
// overwritten either way).
func (m *moveScorer) below(c int, bound, out *levels) bool {
	if m.fast {
		return m.belowFast(c, bound, out)
	}
	R := m.st.R
	inv := m.st.inv[c*R : c*R+R]
	n := len(m.lv)
	for l := 0; l < n; l++ {
		v := m.level(l, c, inv)
		out[l] = v
		if v < bound[l]-levelTol {
			return m.fill(l+1, c, inv, out)
		}
		if v > bound[l]+levelTol {
			return false
		}
	}
	return false
}

// addFits writes row + load into nb and reports whether it stays within
// limit in every resource (state.fits of the child with the shard added).
func addFits(row, load, limit, nb []float64) bool {
	for r, x := range load {
		v := row[r] + x
		nb[r] = v
		if v > limit[r] {
			return false
		}
	}
	return true
}

// bestFree is bestDestination's loop over the kept order ord (cold keys key)
// for the scorer's shard when it is free, no move budget applies and the
// scorer is fast: feasible and below written out, the same decisions. It
// scores at most k feasible children and returns the best, or -1.
func (m *moveScorer) bestFree(ord []int32, key []float64, k int) int {
	st := m.st
	R := st.R
	best, found := -1, 0
	bestD, d := unbounded, levels{}
	load, nb := m.load[:R], m.nb[:R]
	for _, c32 := range ord {
		c := int(c32)
		if key[c] == negInf {
			break // only drained children remain
		}
		if c == m.a || st.p.Drained(c) {
			continue
		}
		if !addFits(st.load[c*R:c*R+R], load, st.limit[c*R:c*R+R], nb) {
			continue
		}
		if m.belowFast(c, &bestD, &d) {
			best, bestD = c, d
		}
		if found++; found >= k {
			break
		}
	}
	return best
}

// belowFast is below for a fast scorer: the first three levels computed
// with the floating-point operations of goal and level, in their order,
// without their calls and dispatch; the later levels through level. The
// three level checks are written out on purpose: a helper for them is not
// inlined and cost 30% per candidate (DestinationScan, 16.9 → 21.9 ns).
func (m *moveScorer) belowFast(c int, bound, out *levels) bool {
	R := m.st.R
	inv := m.st.inv[c*R : c*R+R]
	nb := m.nb[:R]
	inv = inv[:len(nb)]
	// Level 0: threshold (goal's codeThreshold, thresholdTerm).
	g := &m.lv[0][0]
	t := 0.0
	for r, l := range nb {
		if x := float64(l*inv[r]) - g.thr; x > 0 {
			t += x
		}
	}
	v := 0.0
	v += float64(g.w * (m.part[g.gi] + (t - g.term[c])))
	out[0] = v
	if v < bound[0]-levelTol {
		return m.fill(1, c, inv, out)
	}
	if v > bound[0]+levelTol {
		return false
	}
	// Level 1: min-max balance (goal's codeBalanceMinMax).
	g = &m.lv[1][0]
	mm := g.mm[:len(nb)]
	dm := 0.0
	for r := range nb {
		tp := &mm[r]
		dm += tp.maxAfter(c, m.a >= 0, nb[r]*inv[r]) - tp.old
	}
	v = 0.0
	v += float64(g.w * dm)
	out[1] = v
	if v < bound[1]-levelTol {
		return m.fill(2, c, inv, out)
	}
	if v > bound[1]+levelTol {
		return false
	}
	// Level 2: squared balance (goal's codeBalanceSq, sqTerm).
	g = &m.lv[2][0]
	sq := g.sq[:len(nb)]
	q := 0.0
	for r, l := range nb {
		q += float64(l * l * inv[r] * sq[r])
	}
	v = 0.0
	v += float64(g.w * (m.part[g.gi] + (q - g.term[c])))
	out[2] = v
	if v < bound[2]-levelTol {
		return m.fill(3, c, inv, out)
	}
	if v > bound[2]+levelTol {
		return false
	}
	for l := 3; l < len(m.lv); l++ {
		v := m.level(l, c, inv)
		out[l] = v
		if v < bound[l]-levelTol {
			return m.fill(l+1, c, inv, out)
		}
		if v > bound[l]+levelTol {
			return false
		}
	}
	return false
}

// fill computes levels from..last of the move to c into out and returns
// true: below's work once a level is known to be below the bound.
func (m *moveScorer) fill(from, c int, inv []float64, out *levels) bool {
	for l := from; l < len(m.lv); l++ {
		out[l] = m.level(l, c, inv)
	}
	return true
}

// topTwoExcept returns the two items with the largest keys other than a (ties
// by lower index), and how many there are (at most 2). The three largest
// items of a binary heap are among its first seven positions.
func (h *idxHeap) topTwoExcept(a int) (t [2]int32, k [2]float64, n int) {
	var near [7]int32
	m := min(len(h.heap), len(near))
	copy(near[:], h.heap[:m])
	for _, x := range near[:m] {
		if int(x) == a {
			continue
		}
		// insert x into the top n (at most 2), largest first
		i := n
		if n < 2 {
			n++
		} else if !h.itemBefore(x, t[1]) {
			continue
		} else {
			i = 1
		}
		for ; i > 0 && h.itemBefore(x, t[i-1]); i-- {
			t[i], k[i] = t[i-1], k[i-1]
		}
		t[i], k[i] = x, h.key[x]
	}
	return t, k, n
}
