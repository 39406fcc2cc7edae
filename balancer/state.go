package balancer

import "math"

// levelTol is the absolute change of a level below which it counts as unchanged
// when deciding whether a move improves the objective.
const levelTol = 1e-12

// maxLevels bounds the number of distinct priorities the incremental scorer
// handles with fixed-size arrays.
const maxLevels = 16

// levels is a per-priority-level objective delta.
type levels [maxLevels]float64

// unbounded is a bound every change is below (deltaBelow then computes every
// level).
var unbounded = func() (u levels) {
	for l := range u {
		u[l] = math.Inf(1)
	}
	return u
}()

// goalCode is a goal kind as a small integer, for the scorers' switches (a
// switch on the kind's string compares strings for every candidate).
type goalCode uint8

const (
	codeThreshold goalCode = iota
	codeBalanceMinMax
	codeBalanceSq
	codeLatency
	codeSLO
	codeShortfall
	codeLocality
	codeMigration
	codeOther // not a known kind (goals are validated first): contributes 0
)

// codeOf returns the code of a goal kind.
func codeOf(kind string) goalCode {
	switch kind {
	case GoalThreshold:
		return codeThreshold
	case GoalBalanceMinMax:
		return codeBalanceMinMax
	case GoalBalanceSq:
		return codeBalanceSq
	case GoalLatency:
		return codeLatency
	case GoalSLO:
		return codeSLO
	case GoalShortfall:
		return codeShortfall
	case GoalLocality:
		return codeLocality
	case GoalMigration:
		return codeMigration
	}
	return codeOther
}

// state is an assignment with per-child load sums, per-resource max-heaps of
// utilization and anti-affinity counts, kept up to date move by move, so that the
// objective change of a move or swap is computed in O(R·goals + log M) instead of
// re-scoring the whole placement.
type state struct {
	p       *Problem
	R, M, N int
	goals   []Goal
	code    []goalCode // goal → its kind's code
	level   []int      // goal → level index
	nLevels int
	byLevel [][]int // level → goal indices
	gres    [][]int // goal → resource indices
	sqInv   [][]float64
	lat     latencyParams
	mb      float64
	slo     *sloState // nil without an slo goal or shards with an SLO

	assign []int32
	load   []float64 // M×R
	inv    []float64 // M×R: 1/capacity (zeroCapInv for 0)
	limit  []float64 // M×R usable capacity
	sumLd  []float64
	sumCap []float64
	// uheap[r] is a max-heap of children by utilization of r (nil when no
	// min-max goal uses r); ukey[r] are its keys.
	uheap []*idxHeap
	// group counts: key g*M+c.
	groupCnt map[int64]int32
	moves    int
	bytes    int64

	gd []float64 // scratch: per-goal delta
	// term[gi*M+c] is childTerm(gi, c, load of c) for the goals that are sums
	// of child terms (nil row for the others), kept current by touch.
	term []float64
	// noBudget disables the move-budget check (greedy's from-scratch phase).
	noBudget bool
	// scratch rows for singleMove
	scratchA, scratchB []float64
	start              *startInfo
	// fast is set when the first three levels are one goal each —
	// threshold, min-max balance, squared balance — over every resource in
	// order (the default goals' shape): levelDelta and the move scorer then
	// compute those levels written out (fastLevelDelta, belowFast).
	fast bool
}

func newState(p *Problem, goals []Goal, lm LatencyModel, assign []int32) *state {
	R, M, N := p.NumResources(), p.NumChildren(), p.NumShards()
	st := &state{p: p, R: R, M: M, N: N, goals: goals}
	var prios []int
	prios, st.level = levelsOf(goals)
	st.nLevels = len(prios)
	st.byLevel = make([][]int, len(prios))
	for gi, l := range st.level {
		st.byLevel[l] = append(st.byLevel[l], gi)
	}
	st.sumLd, st.sumCap = totals(p)
	st.code = make([]goalCode, len(goals))
	for gi, g := range goals {
		st.code[gi] = codeOf(g.Kind)
	}
	st.gres = make([][]int, len(goals))
	st.sqInv = make([][]float64, len(goals))
	needHeap := make([]bool, R)
	for gi, g := range goals {
		st.gres[gi] = goalResources(p, g)
		if g.Kind == GoalBalanceSq {
			st.sqInv[gi] = make([]float64, R)
			for _, r := range st.gres[gi] {
				if st.sumLd[r] > 0 && st.sumCap[r] > 0 {
					st.sqInv[gi][r] = st.sumCap[r] / (st.sumLd[r] * st.sumLd[r])
				}
			}
		}
		if g.Kind == GoalBalanceMinMax {
			for _, r := range st.gres[gi] {
				needHeap[r] = true
			}
		}
	}
	st.lat = newLatencyParams(p, lm)
	st.mb = meanBytes(p)
	st.slo = newSLOState(p, goals, lm, assign)
	st.assign = append([]int32(nil), assign...)
	st.load = childLoads(p, assign)
	st.inv = make([]float64, M*R)
	st.limit = make([]float64, M*R)
	for i, c := range p.Capacity {
		if c > 0 {
			st.inv[i] = 1 / c
		} else {
			st.inv[i] = zeroCapInv
		}
		st.limit[i] = c * (1 - p.Headroom)
	}
	st.uheap = make([]*idxHeap, R)
	for r := 0; r < R; r++ {
		if !needHeap[r] {
			continue
		}
		keys := make([]float64, M)
		for c := 0; c < M; c++ {
			keys[c] = st.load[c*R+r] * st.inv[c*R+r]
		}
		st.uheap[r] = newIdxHeap(keys)
	}
	st.groupCnt = map[int64]int32{}
	for s, c := range assign {
		if c >= 0 && p.Groups != nil {
			for _, g := range p.Groups[s] {
				st.groupCnt[int64(g)*int64(M)+int64(c)]++
			}
		}
		if c != p.Current[s] && c >= 0 {
			st.moves++
			st.bytes += p.Bytes(s)
		}
	}
	st.fast = st.nLevels >= 3 && st.fastLevel(0, codeThreshold) && st.fastLevel(1, codeBalanceMinMax) && st.fastLevel(2, codeBalanceSq)
	st.gd = make([]float64, len(goals))
	st.term = make([]float64, len(goals)*M)
	for c := 0; c < M; c++ {
		st.retouch(c)
	}
	return st
}

// fastLevel reports whether level l is one goal of kind code over the
// resources 0..R-1 in order.
func (st *state) fastLevel(l int, code goalCode) bool {
	gis := st.byLevel[l]
	if len(gis) != 1 || st.code[gis[0]] != code || len(st.gres[gis[0]]) != st.R {
		return false
	}
	for i, r := range st.gres[gis[0]] {
		if r != i {
			return false
		}
	}
	return true
}

// retouch recomputes child c's cached terms (childTerm; 0 for the goals that
// are not sums of per-child terms).
func (st *state) retouch(c int) {
	R, M := st.R, st.M
	for gi := range st.goals {
		st.term[gi*M+c] = st.childTerm(gi, c, st.load[c*R:c*R+R])
	}
}

func (st *state) u(c, r int) float64 { return st.load[c*st.R+r] * st.inv[c*st.R+r] }

// childTerm is the additive contribution of child c with load row l to goal gi
// (min-max, locality and migration are handled elsewhere and return 0).
//
// Products that are added or subtracted are converted explicitly (float64(…)),
// here and wherever goal deltas are summed: Go may otherwise fuse them into one
// multiply-add (arm64 does; amd64 from GOAMD64=v3), rounding differently in
// different functions, and the move scorer must give exactly these values.
func (st *state) childTerm(gi, c int, l []float64) float64 {
	g := &st.goals[gi]
	R := st.R
	v := 0.0
	switch st.code[gi] {
	case codeThreshold:
		v = thresholdTerm(l, st.inv[c*R:c*R+R], st.gres[gi], g.Threshold)
	case codeBalanceSq:
		v = sqTerm(l, st.inv[c*R:c*R+R], st.gres[gi], st.sqInv[gi])
	case codeLatency:
		r := st.lat.res
		if x := l[r]; x > 0 && st.sumLd[r] > 0 {
			v = st.lat.predict(c, x*st.inv[c*R+r]) * x / st.sumLd[r]
		}
	case codeSLO:
		v = st.sloTerm(c, l, nil)
	case codeShortfall:
		for _, r := range st.gres[gi] {
			if x := l[r] - st.p.Capacity[c*R+r]; x > 0 && st.sumLd[r] > 0 {
				v += x / st.sumLd[r]
			}
		}
	}
	return v
}

// thresholdTerm is the threshold goal's term of a child with load row l and
// inverse capacities inv (its rows of state.inv) over resources res.
func thresholdTerm(l, inv []float64, res []int, threshold float64) float64 {
	v := 0.0
	for _, r := range res {
		if x := float64(l[r]*inv[r]) - threshold; x > 0 {
			v += x
		}
	}
	return v
}

// sqTerm is the squared-balance goal's term of a child with load row l and
// inverse capacities inv over resources res (sq: state.sqInv's row).
func sqTerm(l, inv []float64, res []int, sq []float64) float64 {
	v := 0.0
	for _, r := range res {
		v += float64(l[r] * l[r] * inv[r] * sq[r])
	}
	return v
}

// shardTerm is shard s's contribution to a per-shard goal when on child c.
func (st *state) shardTerm(gi, s int, c int32) float64 {
	switch st.code[gi] {
	case codeLocality:
		return st.p.localityCost(s, c) / float64(st.N)
	case codeMigration:
		if c != st.p.Current[s] && c >= 0 {
			return (1 + float64(st.p.Bytes(s))/st.mb) / 2 / float64(st.N)
		}
	}
	return 0
}

// change describes a move or a swap: shards xs[i] go from their current child to
// to[i]; the touched children (at most two) end with load rows na/nb.
type change struct {
	n      int
	shard  [2]int
	to     [2]int32
	a, b   int // touched children, -1 if none
	na, nb []float64
}

// goalDelta returns the change of goal gi's unweighted value under ch.
func (st *state) goalDelta(gi int, ch *change) float64 {
	d := 0.0
	switch st.code[gi] {
	case codeBalanceMinMax:
		d = st.minMaxDelta(st.gres[gi], ch)
	case codeSLO:
		if ch.a >= 0 {
			d += st.sloTerm(ch.a, ch.na, ch) - st.term[gi*st.M+ch.a]
		}
		if ch.b >= 0 {
			d += st.sloTerm(ch.b, ch.nb, ch) - st.term[gi*st.M+ch.b]
		}
	case codeLocality, codeMigration:
		for i := 0; i < ch.n; i++ {
			s := ch.shard[i]
			d += st.shardTerm(gi, s, ch.to[i]) - st.shardTerm(gi, s, st.assign[s])
		}
	default:
		if ch.a >= 0 {
			d += st.childTerm(gi, ch.a, ch.na) - st.term[gi*st.M+ch.a]
		}
		if ch.b >= 0 {
			d += st.childTerm(gi, ch.b, ch.nb) - st.term[gi*st.M+ch.b]
		}
	}
	return d
}

// delta writes the per-goal change of ch into st.gd and returns the per-level
// change.
func (st *state) delta(ch *change) levels {
	var out levels
	for gi := range st.goals {
		d := st.goalDelta(gi, ch)
		st.gd[gi] = d
		out[st.level[gi]] += float64(st.goals[gi].Weight * d)
	}
	return out
}

// deltaBelow computes the per-level change of ch level by level, most important
// first, and gives up as soon as it is known not to be lexicographically below
// bound (by more than levelTol at the first differing level). It returns the
// change and whether it is below bound; levels after a rejection are left 0.
func (st *state) deltaBelow(ch *change, bound *levels) (levels, bool) {
	var out levels
	for l := range st.byLevel {
		v := st.levelDelta(l, ch)
		out[l] = v
		if v < bound[l]-levelTol {
			// Accepted: complete the remaining levels so later candidates are
			// compared with the full change.
			for l2 := l + 1; l2 < len(st.byLevel); l2++ {
				out[l2] = st.levelDelta(l2, ch)
			}
			return out, true
		}
		if v > bound[l]+levelTol {
			return out, false
		}
	}
	return out, false
}

// levelDelta is the weighted change of level l's goals under ch.
func (st *state) levelDelta(l int, ch *change) float64 {
	if st.fast && l < 3 {
		return st.fastLevelDelta(l, ch)
	}
	v := 0.0
	for _, gi := range st.byLevel[l] {
		v += float64(st.goals[gi].Weight * st.goalDelta(gi, ch))
	}
	return v
}

// minMaxDelta is the min-max goal's change under ch over resources res: per
// resource, the new maximum utilization (the busiest child other than the
// two touched, and the touched ones after the change) minus the old.
func (st *state) minMaxDelta(res []int, ch *change) float64 {
	R := st.R
	d := 0.0
	for _, r := range res {
		h := st.uheap[r]
		old := h.key[h.top()]
		nw := h.maxExcluding(ch.a, ch.b, 0)
		if ch.a >= 0 {
			if v := ch.na[r] * st.inv[ch.a*R+r]; v > nw {
				nw = v
			}
		}
		if ch.b >= 0 {
			if v := ch.nb[r] * st.inv[ch.b*R+r]; v > nw {
				nw = v
			}
		}
		d += nw - old
	}
	return d
}

// fastLevelDelta is levelDelta of one of a fast state's first three levels
// (threshold, min-max balance, squared balance over every resource): the
// floating-point operations of goalDelta and childTerm, in their order,
// without their dispatch.
func (st *state) fastLevelDelta(l int, ch *change) float64 {
	R, M := st.R, st.M
	a, b := ch.a, ch.b
	gi := st.byLevel[l][0]
	d := 0.0
	switch l {
	case 0: // threshold: goalDelta's default case, thresholdTerm
		thr := st.goals[gi].Threshold
		if a >= 0 {
			d += thresholdTerm(ch.na, st.inv[a*R:a*R+R], st.gres[gi], thr) - st.term[gi*M+a]
		}
		if b >= 0 {
			d += thresholdTerm(ch.nb, st.inv[b*R:b*R+R], st.gres[gi], thr) - st.term[gi*M+b]
		}
	case 1: // min-max balance: goalDelta's codeBalanceMinMax
		d = st.minMaxDelta(st.gres[gi], ch)
	default: // squared balance: goalDelta's default case, sqTerm
		if a >= 0 {
			d += sqTerm(ch.na, st.inv[a*R:a*R+R], st.gres[gi], st.sqInv[gi]) - st.term[gi*M+a]
		}
		if b >= 0 {
			d += sqTerm(ch.nb, st.inv[b*R:b*R+R], st.gres[gi], st.sqInv[gi]) - st.term[gi*M+b]
		}
	}
	v := 0.0
	v += float64(st.goals[gi].Weight * d)
	return v
}

// better reports whether the level change d improves the objective: the first
// level that changes by more than levelTol decreases.
func better(d *levels, n int) bool {
	for i := 0; i < n; i++ {
		if d[i] < -levelTol {
			return true
		}
		if d[i] > levelTol {
			return false
		}
	}
	return false
}

// lexLess reports whether a is lexicographically smaller than b by more than
// levelTol at the first differing level.
func lexLess(a, b *levels, n int) bool {
	for i := 0; i < n; i++ {
		if a[i] < b[i]-levelTol {
			return true
		}
		if a[i] > b[i]+levelTol {
			return false
		}
	}
	return false
}

// moveChange fills ch for moving shard s from its current child to dst (-1 =
// unplace), using bufA/bufB (length R) as scratch.
func (st *state) moveChange(ch *change, s int, dst int32, bufA, bufB []float64) {
	R := st.R
	src := st.assign[s]
	ch.n = 1
	ch.shard[0] = s
	ch.to[0] = dst
	ch.a, ch.b = int(src), int(dst)
	if src >= 0 {
		for r := 0; r < R; r++ {
			bufA[r] = st.load[int(src)*R+r] - st.p.Load[s*R+r]
		}
		ch.na = bufA
	}
	if dst >= 0 {
		for r := 0; r < R; r++ {
			bufB[r] = st.load[int(dst)*R+r] + st.p.Load[s*R+r]
		}
		ch.nb = bufB
	}
}

// singleMove fills ch with the move of shard s to dst, in st's scratch rows.
func (st *state) singleMove(ch *change, s int, dst int32) {
	if st.scratchA == nil {
		st.scratchA, st.scratchB = make([]float64, st.R), make([]float64, st.R)
	}
	st.moveChange(ch, s, dst, st.scratchA, st.scratchB)
}

// firstLevels computes the change of moving shard s to dst level by level,
// most important first, only as far as explanations of million-move plans
// need: until the first level that changes by more than levelTol. It returns
// that level and its change (sig = -1 when none does) and the first level that
// changes at all (nz = -1 when none does).
func (st *state) firstLevels(s int, dst int32) (sig int, sigV float64, nz int, nzV float64) {
	var ch change
	st.singleMove(&ch, s, dst)
	nz = -1
	for l := range st.byLevel {
		v := st.levelDelta(l, &ch)
		if v != 0 && nz < 0 {
			nz, nzV = l, v
		}
		if v > levelTol || v < -levelTol {
			return l, v, nz, nzV
		}
	}
	return -1, 0, nz, nzV
}

// apply moves shard s to dst, updating every incremental structure.
func (st *state) apply(s int, dst int32) {
	p, R := st.p, st.R
	src := st.assign[s]
	if src == dst {
		return
	}
	if st.slo != nil {
		st.slo.move(s, src, dst)
	}
	if src >= 0 {
		for r := 0; r < R; r++ {
			st.load[int(src)*R+r] -= p.Load[s*R+r]
		}
		st.touch(int(src))
		if p.Groups != nil {
			for _, g := range p.Groups[s] {
				st.groupCnt[int64(g)*int64(st.M)+int64(src)]--
			}
		}
	}
	if dst >= 0 {
		for r := 0; r < R; r++ {
			st.load[int(dst)*R+r] += p.Load[s*R+r]
		}
		st.touch(int(dst))
		if p.Groups != nil {
			for _, g := range p.Groups[s] {
				st.groupCnt[int64(g)*int64(st.M)+int64(dst)]++
			}
		}
	}
	orig := p.Current[s]
	wasMoved := src != orig && src >= 0
	nowMoved := dst != orig && dst >= 0
	if wasMoved && !nowMoved {
		st.moves--
		st.bytes -= p.Bytes(s)
	} else if !wasMoved && nowMoved {
		st.moves++
		st.bytes += p.Bytes(s)
	}
	st.assign[s] = dst
}

// touch refreshes the heaps of child c after its load changed.
func (st *state) touch(c int) {
	for r, h := range st.uheap {
		if h != nil {
			h.set(c, st.u(c, r))
		}
	}
	st.retouch(c)
}

// fits reports whether load row l is within child c's usable capacity.
func (st *state) fits(c int, l []float64) bool {
	R := st.R
	for r := 0; r < R; r++ {
		if l[r] > st.limit[c*R+r] {
			return false
		}
	}
	return true
}

// groupOK reports whether shard s may join child c under its anti-affinity
// limits, given that `leaving` (another shard, or -1) leaves c at the same time.
func (st *state) groupOK(s, c, leaving int) bool {
	p := st.p
	if p.Groups == nil {
		return true
	}
	for _, g := range p.Groups[s] {
		n := st.groupCnt[int64(g)*int64(st.M)+int64(c)]
		if leaving >= 0 {
			for _, g2 := range p.Groups[leaving] {
				if g2 == g {
					n--
				}
			}
		}
		if n+1 > p.GroupLimit[g] {
			return false
		}
	}
	return true
}

// budgetOK reports whether moving the shards of ch keeps the move budget.
func (st *state) budgetOK(ch *change) bool {
	p := st.p
	if st.noBudget || (p.MaxMoves == 0 && p.MaxBytes == 0) {
		return true
	}
	moves, bytes := st.moves, st.bytes
	for i := 0; i < ch.n; i++ {
		s := ch.shard[i]
		orig := p.Current[s]
		was := st.assign[s] != orig && st.assign[s] >= 0
		now := ch.to[i] != orig && ch.to[i] >= 0
		if was && !now {
			moves--
			bytes -= p.Bytes(s)
		} else if !was && now {
			moves++
			bytes += p.Bytes(s)
		}
	}
	if p.MaxMoves > 0 && moves > p.MaxMoves {
		return false
	}
	if p.MaxBytes > 0 && bytes > p.MaxBytes {
		return false
	}
	return true
}

// canHost reports whether shard s may be placed on child c ignoring capacity and
// budget: not locked, allowed (pin and allowed list), c active.
func (st *state) canHost(s, c int) bool {
	p := st.p
	return !p.IsLocked(s) && !p.Drained(c) && p.AllowedOn(s, c)
}

// levelGoal returns the goal of level lvl that contributes most to the marginal
// improvement of shard s being on c rather than on from.
func (st *state) levelGoal(lvl, s int, from, c int32) Goal {
	var ch change
	st.singleMove(&ch, s, from)
	st.delta(&ch) // per goal, into st.gd
	best, bv := -1, 0.0
	for gi := range st.goals {
		if st.level[gi] != lvl {
			continue
		}
		v := st.goals[gi].Weight * st.gd[gi]
		if best < 0 || v > bv {
			best, bv = gi, v
		}
	}
	return st.goals[best]
}

// forcedReason says which hard constraint forced shard s off child from in the
// start assignment (p.Current), or "" when none did.
func (st *state) forcedReason(s int, from int32) string {
	p := st.p
	if from < 0 {
		return ConstraintUnplaced
	}
	c := int(from)
	if p.Drained(c) {
		return ConstraintDrain
	}
	if pin := p.PinOf(s); pin >= 0 && pin != c {
		return ConstraintPin
	}
	if !p.AllowedOn(s, c) {
		return ConstraintAllowed
	}
	start := st.startInfo()
	if p.Groups != nil {
		for _, g := range p.Groups[s] {
			if start.groupCnt[int64(g)*int64(st.M)+int64(c)] > p.GroupLimit[g] {
				return ConstraintAntiAffinity
			}
		}
	}
	if start.over[c] {
		return ConstraintCapacity
	}
	return ""
}

type startInfo struct {
	over     []bool
	groupCnt map[int64]int32
}

func (st *state) startInfo() *startInfo {
	if st.start != nil {
		return st.start
	}
	p := st.p
	R := st.R
	load := childLoads(p, p.Current)
	si := &startInfo{over: make([]bool, st.M), groupCnt: map[int64]int32{}}
	for c := 0; c < st.M; c++ {
		for r := 0; r < R; r++ {
			if load[c*R+r] > st.limit[c*R+r]*(1+capTolerance) {
				si.over[c] = true
			}
		}
	}
	for s, c := range p.Current {
		if c >= 0 && p.Groups != nil {
			for _, g := range p.Groups[s] {
				si.groupCnt[int64(g)*int64(st.M)+int64(c)]++
			}
		}
	}
	st.start = si
	return si
}
