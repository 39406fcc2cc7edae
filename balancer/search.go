package balancer

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// prepare validates the problem and the options and resolves the goals.
func prepare(p *Problem, o *Options) ([]Goal, error) {
	if p == nil {
		return nil, invalid("problem", "is required", nil)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := o.check(p); err != nil {
		return nil, err
	}
	goals, err := o.goals(p)
	if err != nil {
		return nil, err
	}
	if prios, _ := levelsOf(goals); len(prios) > maxLevels {
		return nil, invalid("goals", fmt.Sprintf("must use at most %d distinct priorities", maxLevels), len(prios))
	}
	return goals, nil
}

// clock tracks the time and deadline budgets of one solve.
type clock struct {
	o       *Options
	started time.Time
	calls   int
}

func newClock(o *Options) *clock {
	c := &clock{o: o}
	if o.Now != nil {
		c.started = o.Now()
	}
	return c
}

// expired reports whether the time budget or the deadline has run out.
func (c *clock) expired() bool {
	c.calls++
	if c.o.Deadline != nil && c.o.Deadline() {
		return true
	}
	if c.o.TimeBudget > 0 && c.o.Now().Sub(c.started) >= c.o.TimeBudget {
		return true
	}
	return false
}

// placer holds the structures greedy and local search share on top of the
// incremental state: per-child member lists, and hot/cold heaps of children by
// "hotness" = max over the balanced resources of utilization / LB.
type placer struct {
	st      *state
	members [][]int32
	mpos    []int32
	lbInv   []float64 // per resource: 1/LB (0 when LB is 0 or the resource is not balanced)
	sizeW   []float64 // per resource: the weights of shardSize (sizeWeights)
	hot     *idxHeap  // max-heap of hotness; drained and stuck children at -Inf
	cold    *idxHeap  // max-heap of -hotness; drained children at -Inf
	stuck   []bool
	// tie (M) breaks ties between equally cold children by absolute size:
	// tieBias × the child's mean share of the largest capacity per resource,
	// added to the cold key, so that of two empty children the larger comes
	// first (not the lower index: a large shard then does not land alone on
	// a small child while large ones are empty).
	tie   []float64
	front []int32
	// order is the cold heap's order as an array, kept once searches visit
	// many children (keepOrder); scorer scores one shard's moves.
	order  *coldOrder
	scorer *moveScorer
	moves  shardMoves
	bufA   []float64
	bufB   []float64
	bufC   []float64
	bufD   []float64
}

func newPlacer(st *state) *placer {
	p := st.p
	pl := &placer{st: st, bufA: make([]float64, st.R), bufB: make([]float64, st.R), bufC: make([]float64, st.R), bufD: make([]float64, st.R)}
	pl.lbInv = lbWeights(p, st.goals)
	pl.sizeW = p.sizeW
	if pl.sizeW == nil {
		pl.sizeW = sizeWeights(p, pl.lbInv)
	}
	pl.members = make([][]int32, st.M)
	pl.mpos = make([]int32, st.N)
	counts := make([]int32, st.M)
	for _, c := range st.assign {
		if c >= 0 {
			counts[c]++
		}
	}
	for c := range pl.members {
		pl.members[c] = make([]int32, 0, counts[c])
	}
	for s, c := range st.assign {
		if c >= 0 {
			pl.mpos[s] = int32(len(pl.members[c]))
			pl.members[c] = append(pl.members[c], int32(s))
		}
	}
	pl.tie = sizeTies(p)
	hk := make([]float64, st.M)
	ck := make([]float64, st.M)
	for c := 0; c < st.M; c++ {
		hk[c], ck[c] = pl.keys(c)
	}
	pl.hot = newIdxHeap(hk)
	pl.cold = newIdxHeap(ck)
	pl.stuck = make([]bool, st.M)
	return pl
}

// hotness is max_r u_cr / LB_r over the balanced resources.
func (pl *placer) hotness(c int) float64 {
	st := pl.st
	h := 0.0
	for r := 0; r < st.R; r++ {
		if pl.lbInv[r] > 0 {
			if v := st.u(c, r) * pl.lbInv[r]; v > h {
				h = v
			}
		}
	}
	return h
}

func (pl *placer) keys(c int) (hot, cold float64) {
	if pl.st.p.Drained(c) {
		return math.Inf(-1), math.Inf(-1)
	}
	h := pl.hotness(c)
	if pl.stuck != nil && pl.stuck[c] {
		return math.Inf(-1), -h + pl.tie[c]
	}
	return h, -h + pl.tie[c]
}

// tieBias scales placer.tie: far below any difference of hotness that
// matters, far above the rounding of one.
const tieBias = 1e-9

// sizeTies is placer.tie for p.
func sizeTies(p *Problem) []float64 {
	R, M := p.NumResources(), p.NumChildren()
	maxCap := make([]float64, R)
	for i, v := range p.Capacity {
		maxCap[i%R] = max(maxCap[i%R], v)
	}
	tie := make([]float64, M)
	for c := 0; c < M; c++ {
		v := 0.0
		for r := 0; r < R; r++ {
			if maxCap[r] > 0 {
				v += p.Capacity[c*R+r] / maxCap[r]
			}
		}
		tie[c] = tieBias * v / float64(R)
	}
	return tie
}

func (pl *placer) refresh(c int) {
	h, k := pl.keys(c)
	pl.hot.set(c, h)
	pl.cold.set(c, k)
	if pl.order != nil {
		pl.order.fix(c)
	}
}

// move applies shard s → dst and keeps members and heaps up to date.
func (pl *placer) move(s int, dst int32) {
	st := pl.st
	src := st.assign[s]
	if src == dst {
		return
	}
	if src >= 0 {
		m := pl.members[src]
		i := pl.mpos[s]
		last := m[len(m)-1]
		m[i] = last
		pl.mpos[last] = i
		pl.members[src] = m[:len(m)-1]
	}
	st.apply(s, dst)
	if dst >= 0 {
		pl.mpos[s] = int32(len(pl.members[dst]))
		pl.members[dst] = append(pl.members[dst], int32(s))
	}
	if src >= 0 {
		pl.stuck[src] = false
		pl.refresh(int(src))
	}
	if dst >= 0 {
		pl.stuck[dst] = false
		pl.refresh(int(dst))
	}
}

// feasibleMove reports whether shard s may move to dst now (all hard
// constraints, including the move budget) and fills ch for scoring.
func (pl *placer) feasibleMove(ch *change, s int, dst int) bool {
	st := pl.st
	if int32(dst) == st.assign[s] || !st.canHost(s, dst) || !st.groupOK(s, dst, -1) {
		return false
	}
	st.moveChange(ch, s, int32(dst), pl.bufA, pl.bufB)
	if !st.fits(dst, ch.nb) {
		return false
	}
	return st.budgetOK(ch)
}

// feasibleSwap reports whether shards x (on a) and y (on b) may trade places and
// fills ch for scoring.
func (pl *placer) feasibleSwap(ch *change, x, y int) bool {
	st := pl.st
	a, b := int(st.assign[x]), int(st.assign[y])
	if a == b || a < 0 || b < 0 {
		return false
	}
	if !st.canHost(x, b) || !st.canHost(y, a) || !st.groupOK(x, b, y) || !st.groupOK(y, a, x) {
		return false
	}
	R, p := st.R, st.p
	for r := 0; r < R; r++ {
		d := p.Load[x*R+r] - p.Load[y*R+r]
		pl.bufC[r] = st.load[a*R+r] - d
		pl.bufD[r] = st.load[b*R+r] + d
	}
	ch.n = 2
	ch.shard = [2]int{x, y}
	ch.to = [2]int32{int32(b), int32(a)}
	ch.a, ch.b = a, b
	ch.na, ch.nb = pl.bufC, pl.bufD
	if !st.fits(a, ch.na) || !st.fits(b, ch.nb) {
		return false
	}
	return st.budgetOK(ch)
}

// bestDestination finds, among feasible children for shard s, the one whose move
// scores best (lexicographically), visiting children coldest first and scoring
// at most k feasible ones. It returns -1 when no child is feasible (after looking
// at every child).
func (pl *placer) bestDestination(s, k int) int {
	m := pl.movesOf(s, k)
	best, found := -1, 0
	// Every candidate is scored only until it is known not to beat the best so
	// far (the same choice as comparing full scores); the first beats the
	// unbounded bound and is scored in full.
	bestD, d := unbounded, levels{}
	if sc := pl.scorer; pl.order != nil && m.scored {
		if sc.fast && sc.free && !sc.budget {
			return sc.bestFree(pl.order.ord, pl.cold.key, k)
		}
		// coldFirst's loop over the kept order, written out: no call per
		// candidate through the visitor and shardMoves.
		key := pl.cold.key
		for _, c32 := range pl.order.ord {
			c := int(c32)
			if key[c] == negInf {
				break // only drained children remain
			}
			if !sc.feasible(c) {
				continue
			}
			if sc.below(c, &bestD, &d) {
				best, bestD = c, d
			}
			if found++; found >= k {
				break
			}
		}
		return best
	}
	pl.coldFirst(func(c int) bool {
		if pl.cold.key[c] == negInf {
			return false // only drained children remain
		}
		if !m.feasible(c) {
			return true
		}
		if m.below(c, &bestD, &d) {
			best, bestD = c, d
		}
		found++
		return found < k
	})
	return best
}

// lbWeights is 1/LB per resource for the resources the goals balance (all of
// them when no goal balances any), 0 for the others and where the LB is 0.
func lbWeights(p *Problem, goals []Goal) []float64 {
	R := p.NumResources()
	lb := lowerBound(p)
	bal := make([]bool, R)
	anyBal := false
	for _, g := range goals {
		switch g.Kind {
		case GoalBalanceMinMax, GoalBalanceSq, GoalThreshold:
			for _, r := range goalResources(p, g) {
				bal[r] = true
				anyBal = true
			}
		}
	}
	w := make([]float64, R)
	for r := range lb {
		if (bal[r] || !anyBal) && lb[r] > 0 {
			w[r] = 1 / lb[r]
		}
	}
	return w
}

// shardSize is shard s's size: the order in which greedy places shards and
// repair moves them (largest first).
func (pl *placer) shardSize(s int) float64 { return sizeOf(pl.st.p, pl.sizeW, s) }

// sizeWeights weighs each resource the goals balance (lbInv[r] > 0) by
// 1 / (LB × the mean capacity of the active children), 0 the others: a
// shard's load times it is the fraction of a mean child's capacity at the
// LB that the shard fills, a number without units, so that a shard's
// memory in bytes and its cpu in cores count alike.
func sizeWeights(p *Problem, lbInv []float64) []float64 {
	w, active := activeCapacity(p)
	for r := range w {
		if lbInv[r] > 0 && w[r] > 0 {
			w[r] = lbInv[r] * float64(active) / w[r]
		} else {
			w[r] = 0
		}
	}
	return w
}

// sizeOf is max over r of shard s's load × w[r].
func sizeOf(p *Problem, w []float64, s int) float64 {
	R := len(w)
	v := 0.0
	for r := 0; r < R; r++ {
		if w[r] > 0 {
			v = math.Max(v, p.Load[s*R+r]*w[r])
		}
	}
	return v
}

// forcedShards lists the shards the start assignment forces to move: unplaced
// ones, ones on drained children, off their pin or allowed set, above an
// anti-affinity limit, or on a child above its usable capacity (largest first
// until it fits). Locked shards never move.
func (pl *placer) forcedShards() []int {
	st := pl.st
	p := st.p
	forced := make([]bool, st.N)
	var out []int
	add := func(s int) {
		if !forced[s] && !p.IsLocked(s) {
			forced[s] = true
			out = append(out, s)
		}
	}
	for s, c := range st.assign {
		if c < 0 || p.Drained(int(c)) || !p.AllowedOn(s, int(c)) {
			add(s)
		}
	}
	if p.Groups != nil {
		for c := 0; c < st.M; c++ {
			cnt := map[int32]int32{}
			for _, s := range pl.members[c] {
				if forced[s] {
					continue
				}
				for _, g := range p.Groups[s] {
					cnt[g]++
				}
			}
			for _, s := range pl.members[c] {
				if forced[s] || p.IsLocked(int(s)) {
					continue
				}
				for _, g := range p.Groups[s] {
					if cnt[g] > p.GroupLimit[g] {
						for _, g2 := range p.Groups[s] {
							cnt[g2]--
						}
						add(int(s))
						break
					}
				}
			}
		}
	}
	R := st.R
	row := make([]float64, R)
	for c := 0; c < st.M; c++ {
		copy(row, st.load[c*R:c*R+R])
		for _, s := range pl.members[c] {
			if forced[s] {
				for r := 0; r < R; r++ {
					row[r] -= p.Load[int(s)*R+r]
				}
			}
		}
		for {
			worst, wr := -1, 0.0
			for r := 0; r < R; r++ {
				if over := row[r] - st.limit[c*R+r]; over > 0 && (worst < 0 || over > wr) {
					worst, wr = r, over
				}
			}
			if worst < 0 {
				break
			}
			pick := -1
			for _, s := range pl.members[c] {
				if forced[s] || p.IsLocked(int(s)) || p.PinOf(int(s)) == c {
					continue
				}
				if pick < 0 || p.Load[int(s)*R+worst] > p.Load[pick*R+worst] {
					pick = int(s)
				}
			}
			if pick < 0 || p.Load[pick*R+worst] == 0 {
				break
			}
			for r := 0; r < R; r++ {
				row[r] -= p.Load[pick*R+r]
			}
			add(pick)
		}
	}
	sortBySize(out, pl.shardSize)
	return out
}

// sortBySize orders shards by decreasing size, ties by index. A list already
// in that order is left as it is after one pass (on a copy renumbered in
// placement order the forced shards mostly come that way).
func sortBySize[T ~int | ~int32](xs []T, size func(int) float64) {
	if sortedBySize(xs, size) {
		return
	}
	if len(xs) >= radixMin {
		radixBySize(xs, size)
		return
	}
	compareBySize(xs, size)
}

// compareBySize is sortBySize's order by a comparison sort.
func compareBySize[T ~int | ~int32](xs []T, size func(int) float64) {
	type keyed struct {
		size float64
		s    T
	}
	ks := make([]keyed, len(xs))
	for i, s := range xs {
		ks[i] = keyed{size(int(s)), s}
	}
	slices.SortFunc(ks, func(a, b keyed) int {
		if c := cmp.Compare(b.size, a.size); c != 0 {
			return c
		}
		return cmp.Compare(a.s, b.s)
	})
	for i, k := range ks {
		xs[i] = k.s
	}
}

// radixMin is the shortest list sortBySize sorts with radixBySize: below
// it the comparison sort is as fast.
const radixMin = 1024

// sizeKey maps a size to an integer in the order cmp.Compare gives sizes:
// NaN below every number, -0 equal to +0.
func sizeKey(x float64) uint64 {
	switch {
	case x != x:
		return 0
	case x == 0:
		x = 0 // -0 sorts with +0
	}
	b := math.Float64bits(x)
	if b>>63 != 0 {
		return ^b
	}
	return b | 1<<63
}

// radixBySize is sortBySize's order by a stable least-significant-digit
// radix sort: first by index, then by decreasing size (sizeKey), 11 bits a
// pass, a pass skipped when every key has the same digit. Exact by
// construction — the order is total — and O(n) for the million shards of a
// global tier's view, where the comparison sort took ~0.15 s.
func radixBySize[T ~int | ~int32](xs []T, size func(int) float64) {
	type rec struct {
		key uint64
		s   T
	}
	a := make([]rec, len(xs))
	for i, s := range xs {
		a[i] = rec{^sizeKey(size(int(s))), s}
	}
	b := make([]rec, len(xs))
	const bits = 11
	var count [1 << bits]int
	pass := func(digit func(r *rec) int) {
		clear(count[:])
		for i := range a {
			count[digit(&a[i])]++
		}
		for _, c := range count {
			if c == len(a) {
				return // one digit for all: the pass would change nothing
			}
			if c != 0 {
				break
			}
		}
		sum := 0
		for d, c := range count {
			count[d] = sum
			sum += c
		}
		for i := range a {
			d := digit(&a[i])
			b[count[d]] = a[i]
			count[d]++
		}
		a, b = b, a
	}
	for shift := 0; shift < 32; shift += bits {
		pass(func(r *rec) int { return int(uint32(r.s)>>shift) & (1<<bits - 1) })
	}
	for shift := 0; shift < 64; shift += bits {
		pass(func(r *rec) int { return int(r.key>>shift) & (1<<bits - 1) })
	}
	for i := range a {
		xs[i] = a[i].s
	}
}

// sortedBySize reports whether xs is in sortBySize's order.
func sortedBySize[T ~int | ~int32](xs []T, size func(int) float64) bool {
	if len(xs) == 0 {
		return true
	}
	prev := size(int(xs[0]))
	for i := 1; i < len(xs); i++ {
		cur := size(int(xs[i]))
		if c := cmp.Compare(cur, prev); c > 0 || c == 0 && xs[i] < xs[i-1] {
			return false
		}
		prev = cur
	}
	return true
}

// stillForced reports whether shard s still breaks a hard constraint where it
// is: unplaced, on a drained child, off its pin or allowed set, above an
// anti-affinity limit, or on a child above its usable capacity.
func (pl *placer) stillForced(s int) bool {
	st := pl.st
	p := st.p
	c := int(st.assign[s])
	if c < 0 || p.Drained(c) || !p.AllowedOn(s, c) {
		return true
	}
	if p.Groups != nil {
		for _, g := range p.Groups[s] {
			if st.groupCnt[int64(g)*int64(st.M)+int64(c)] > p.GroupLimit[g] {
				return true
			}
		}
	}
	for r := 0; r < st.R; r++ {
		if st.load[c*st.R+r] > st.limit[c*st.R+r] && pl.overLimit(c, r) {
			return true
		}
	}
	return false
}

// overLimit reports whether child c is above its usable capacity of r, as
// CheckHard says: the load summed afresh from its shards (the running sum
// drifts by a rounding error at every move in and out) against the limit with
// CheckHard's tolerance. Only asked when the running sum is above the limit.
func (pl *placer) overLimit(c, r int) bool {
	st := pl.st
	R := st.R
	sum := 0.0
	for _, s := range pl.members[c] {
		sum += st.p.Load[int(s)*R+r]
	}
	return sum > st.limit[c*R+r]*(1+capTolerance)+1e-300
}

// repair moves every forced shard to its best feasible child (coldest first),
// largest first. Shards that fit nowhere stay where they are (or unplaced), for
// explainForced to explain. When clk's budget runs out before every forced
// shard was tried it stops and returns the shards it did not reach (untried)
// and partial = true.
func (pl *placer) repair(k int, clk *clock) (untried []int, partial bool) {
	forced := pl.forcedShards()
	for i, s := range forced {
		if clk != nil && clk.expired() {
			return forced[i:], true
		}
		if !pl.stillForced(s) {
			continue // earlier repairs made room where it is
		}
		dst := pl.bestDestination(s, k)
		if dst >= 0 {
			pl.move(s, int32(dst))
			continue
		}
		pl.eject(s, k)
	}
	return nil, false
}

// ejectChildren bounds how many children eject tries to make room on.
const ejectChildren = 16

// eject makes room for shard s, which fits nowhere as things are: on one of the
// coldest children that may host it, it moves one other shard to that shard's
// best feasible child elsewhere (possibly where s was), when s then fits. It
// reports success; on failure nothing changed.
func (pl *placer) eject(s, k int) bool {
	st := pl.st
	p := st.p
	var ch change
	tried := 0
	done := false
	var cands []int
	// s leaves its child for the whole attempt, so the shard it displaces may
	// take its place (a swap); it goes back there when nothing works.
	orig := st.assign[s]
	pl.move(s, -1)
	defer func() {
		if !done {
			pl.move(s, orig)
		}
	}()
	pl.coldFirst(func(c int) bool {
		if pl.cold.key[c] == negInf || tried >= ejectChildren {
			return false
		}
		if int32(c) != orig && st.canHost(s, c) {
			tried++
			cands = append(cands, c)
		}
		return true
	})
	for _, c := range cands {
		members := append([]int32(nil), pl.members[c]...)
		for _, t32 := range members {
			t := int(t32)
			if t == s || p.IsLocked(t) || p.PinOf(t) >= 0 {
				continue
			}
			// Where t would go, with c excluded.
			best := -1
			var bestD levels
			pl.coldFirst(func(d int) bool {
				if pl.cold.key[d] == negInf {
					return false
				}
				if d == c || !pl.feasibleMove(&ch, t, d) {
					return true
				}
				dl := st.delta(&ch)
				if best < 0 || lexLess(&dl, &bestD, st.nLevels) {
					best, bestD = d, dl
				}
				return true
			})
			if best < 0 {
				continue
			}
			pl.move(t, int32(best))
			if pl.feasibleMove(&ch, s, c) {
				pl.move(s, int32(c))
				done = true
				break
			}
			pl.move(t, int32(c))
		}
		if done {
			return true
		}
	}
	return false
}

// lastChancePasses bounds explainForced's passes.
const lastChancePasses = 4

// explainForced makes a last attempt to move every unlocked shard that still
// breaks a hard constraint where it is (best feasible child, else making room),
// and explains those that stay. When clk's budget runs out (clk may be nil) it
// stops there (cut is true; Finish then reports the plan as partial unless a
// shard is explained) and explains every such shard but those of untried —
// the ones the repair never reached, which were not found infeasible.
func (pl *placer) explainForced(k int, clk *clock, untried []int) (out []interfaces.Infeasible, cut bool) {
	expired := func() bool { return clk != nil && clk.expired() }
	// A placement late in a pass can make room for a shard tried earlier, so
	// passes repeat while they reduce the number of forced shards — a few at
	// most: with many shards that fit nowhere each pass costs an ejection
	// attempt per shard.
	for pass, before := 0, pl.forcedCount(); before > 0 && pass < lastChancePasses && !cut; pass++ {
		for s := 0; s < pl.st.N; s++ {
			if pl.st.p.IsLocked(s) || !pl.stillForced(s) {
				continue
			}
			if cut = expired(); cut {
				break
			}
			if dst := pl.bestDestination(s, k); dst >= 0 {
				pl.move(s, int32(dst))
				continue
			}
			pl.eject(s, k)
		}
		after := pl.forcedCount()
		if after >= before {
			break
		}
		before = after
	}
	var skip []bool
	if cut && len(untried) > 0 {
		skip = make([]bool, pl.st.N)
		for _, s := range untried {
			skip[s] = true
		}
	}
	for s := 0; s < pl.st.N; s++ {
		if pl.st.p.IsLocked(s) || !pl.stillForced(s) || skip != nil && skip[s] {
			continue
		}
		inf, _ := pl.st.explain(s)
		out = append(out, inf)
	}
	return out, cut
}

// forcedCount counts the unlocked shards that still break a hard constraint.
func (pl *placer) forcedCount() int {
	n := 0
	for s := 0; s < pl.st.N; s++ {
		if !pl.st.p.IsLocked(s) && pl.stillForced(s) {
			n++
		}
	}
	return n
}
