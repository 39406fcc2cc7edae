package balancer

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/strata-sched/strata/interfaces"
)

// SolverLocal is the name of the local-search solver.
const SolverLocal = "local"

func init() { RegisterSolver(SolverLocal, func() Solver { return localSolver{} }) }

// localSolver is local search from the current assignment.
type localSolver struct{}

var _ Solver = localSolver{}

func (localSolver) Name() string { return SolverLocal }

// Solve improves the current assignment:
//
//  1. repair: shards the start forces to move (unplaced, on a drained or failed
//     child, off their pin or allowed set, above an anti-affinity limit, on a
//     child above its usable capacity) go to their best feasible child, largest
//     first; those that fit nowhere are explained in Result.Infeasible;
//  2. improve: repeatedly take the hottest child (max over resources of
//     utilization/LB) and apply the best improving single move of one of its
//     shards to one of the Candidates coldest feasible children, else the best
//     improving two-way swap with one of the coldest children; each candidate is
//     scored incrementally (O(goals·R + log M)) and accepted only when it
//     improves the objective lexicographically, so no higher-priority level ever
//     gets worse. A child where nothing improves is set aside until its load
//     changes; the search ends at a local optimum (a full pass without a move) or
//     when a budget (time, deadline, iterations) runs out — the plan at that
//     moment is the best found (anytime) — or, with Options.TargetMaxOverLB,
//     as soon as every balanced resource's max/LB is within the target;
//     Small problems (N·M ≤ 400) also try every pair of single moves at a
//     local optimum;
//  3. kicks (iterated local search, small problems by default): alternately a
//     few seeded random feasible moves and a ruin-and-recreate of up to 8 shards
//     (shards still breaking a constraint get the freed room first), then
//     improve again; the best plan is kept, fewer shards breaking a constraint
//     first, then the objective.
//
// A forced shard that fits nowhere is given room by moving one other shard off
// a child it may use (possibly into its own place: a swap) before it is
// explained as infeasible.
//
// Same problem, options and seed give the same plan unless a time budget or a
// deadline cut the solve short.
//
// Big problems that are mostly placement are solved renumbered (renumber.go).
func (localSolver) Solve(p *Problem, o Options) (Result, error) {
	goals, err := prepare(p, &o)
	if err != nil {
		return Result{}, err
	}
	ord, sizeW := placementOrder(p, goals)
	return solveRenumbered(p, ord, sizeW, func(p *Problem) (Result, error) {
		return solveLocal(p, o, goals)
	})
}

func solveLocal(p *Problem, o Options, goals []Goal) (Result, error) {
	clk := newClock(&o)
	run := runLocal(p, &o, goals, p.Current, clk)
	if n := len(run.infeasible); n > 0 && !run.partial {
		// Feasibility first: when first-fit decreasing places more shards
		// than the search did (balancing spreads load, and a large shard
		// may then find no child with room), start again from its
		// placement: local search only makes feasible moves, so it keeps
		// them all placed while it balances.
		ffd := firstFitDecreasing(p, goals, o.Latency, p.Current)
		if p.MaxMoves == 0 && p.MaxBytes == 0 {
			// Without a move budget, also from scratch: every shard but
			// the in-flight ones taken off its child first.
			scratch := append([]int32(nil), p.Current...)
			for s := range scratch {
				if !p.IsLocked(s) {
					scratch[s] = -1
				}
			}
			if alt := firstFitDecreasing(p, goals, o.Latency, scratch); placed(alt) > placed(ffd) {
				ffd = alt
			}
		}
		if placed(ffd) > placed(run.assign) && budgetKept(p, ffd) {
			if again := runLocal(p, &o, goals, ffd, clk); placed(again.assign) >= placed(ffd) {
				again.iters += run.iters
				run = again
			}
		}
	}
	res, err := Finish(p, o, SolverLocal, run.assign, clk.started, run.partial, run.infeasible)
	res.Iterations = run.iters
	return res, err
}

// localRun is the outcome of one runLocal.
type localRun struct {
	assign     []int32
	partial    bool
	infeasible []interfaces.Infeasible
	iters      int
}

// runLocal is local search from start: repair, improve, kicks, and the
// explanation of what still breaks a constraint.
func runLocal(p *Problem, o *Options, goals []Goal, start []int32, clk *clock) localRun {
	st := newState(p, goals, o.Latency, start)
	pl := newPlacer(st)
	k := o.Candidates
	if k == 0 {
		k = 8
	}
	pl.keepOrder(4 * k)
	ls := &localSearch{pl: pl, clk: clk, o: o, k: k, goals: goals, widened: make([]bool, st.M),
		rng: rand.New(rand.NewPCG(o.Seed, 0x9e3779b97f4a7c15))}
	untried, partial := pl.repair(4*k, clk)
	if !partial {
		partial = ls.improve()
	}
	if !partial {
		partial = ls.kick()
	}
	// Explain what still breaks a constraint in the final assignment (kicks may
	// have placed shards the repair could not).
	infeasible, cut := pl.explainForced(4*k, clk, untried)
	return localRun{assign: st.assign, partial: partial || cut, infeasible: infeasible, iters: ls.iters}
}

// placed counts the placed shards of assign.
func placed(assign []int32) int {
	n := 0
	for _, c := range assign {
		if c >= 0 {
			n++
		}
	}
	return n
}

// budgetKept reports whether assign keeps p's move budget.
func budgetKept(p *Problem, assign []int32) bool {
	moves, bytes := 0, int64(0)
	for s, c := range assign {
		if c >= 0 && c != p.Current[s] {
			moves++
			bytes += p.Bytes(s)
		}
	}
	return (p.MaxMoves == 0 || moves <= p.MaxMoves) && (p.MaxBytes == 0 || bytes <= p.MaxBytes)
}

type localSearch struct {
	pl    *placer
	clk   *clock
	o     *Options
	goals []Goal
	k     int
	rng   *rand.Rand
	iters int
	cands []int32
	fast  []int32 // step: the hot child's movable unrestricted shards
	win   [2 * window]int32
	other []int32
	// widened[c] is set once child c's step has scanned every child.
	widened []bool
	// inKick is set while kicks run: the pair neighbourhood is then only
	// searched for tiny problems (N·M ≤ kickPairLimit).
	inKick bool
}

// budgetOut reports whether the iteration, time or deadline budget has run out.
func (ls *localSearch) budgetOut() bool {
	if ls.o.MaxIterations > 0 && ls.iters >= ls.o.MaxIterations {
		return true
	}
	return ls.clk.expired()
}

// improve runs hot-to-cold moves and swaps to a local optimum. It reports
// whether a budget ended it early.
func (ls *localSearch) improve() bool {
	pl := ls.pl
	movesSinceClear := 0
	for {
		if ls.budgetOut() {
			return true
		}
		if ls.targetMet() {
			return false
		}
		h := pl.hot.top()
		if pl.hot.key[h] == negInf {
			if movesSinceClear == 0 {
				// A local optimum for moves and swaps; small problems also try
				// every pair of moves before giving up.
				if (!ls.inKick || ls.pl.st.N*ls.pl.st.M <= kickPairLimit) && ls.pairStep() {
					movesSinceClear++
					ls.iters++
					continue
				}
				return false
			}
			movesSinceClear = 0
			for c := range pl.stuck {
				if pl.stuck[c] {
					pl.stuck[c] = false
					pl.refresh(c)
				}
			}
			continue
		}
		if ls.step(h) {
			movesSinceClear++
			ls.iters++
			continue
		}
		pl.stuck[h] = true
		pl.hot.set(h, negInf)
	}
}

// targetMet reports whether Options.TargetMaxOverLB is set and every balanced
// resource's busiest child is within it.
func (ls *localSearch) targetMet() bool {
	t := ls.o.TargetMaxOverLB
	if t <= 0 {
		return false
	}
	pl := ls.pl
	st := pl.st
	for r := 0; r < st.R; r++ {
		if pl.lbInv[r] == 0 {
			continue
		}
		mx := 0.0
		if h := st.uheap[r]; h != nil {
			mx = h.key[h.top()]
		} else {
			for c := 0; c < st.M; c++ {
				mx = math.Max(mx, st.u(c, r))
			}
		}
		if mx*pl.lbInv[r] > t {
			return false
		}
	}
	return true
}

// coldest fills ls.cands with up to k of the coldest active children other than
// h.
func (ls *localSearch) coldest(h, k int) []int32 {
	pl := ls.pl
	ls.cands = ls.cands[:0]
	pl.coldFirst(func(c int) bool {
		if pl.cold.key[c] == negInf {
			return false
		}
		if c != h {
			ls.cands = append(ls.cands, int32(c))
		}
		return len(ls.cands) < k
	})
	return ls.cands
}

// widen visits, coldest first, the active children other than h after the
// first skip of them (the sample coldest already gave), until visit returns
// false.
func (ls *localSearch) widen(h, skip int, visit func(c int) bool) {
	pl := ls.pl
	i := 0
	pl.coldFirst(func(c int) bool {
		if pl.cold.key[c] == negInf {
			return false
		}
		if c == h {
			return true
		}
		if i++; i <= skip {
			return true
		}
		return visit(c)
	})
}

// movable reports whether shard s may leave its child at all.
func (ls *localSearch) movable(s int) bool {
	p := ls.pl.st.p
	return !p.IsLocked(s) && p.PinOf(s) < 0
}

// hotResource returns the balanced resource on which child h is hottest
// (relative to the LB).
func (ls *localSearch) hotResource(h int) int {
	pl := ls.pl
	hr, hu := 0, -1.0
	for r := 0; r < pl.st.R; r++ {
		if pl.lbInv[r] > 0 {
			if v := pl.st.u(h, r) * pl.lbInv[r]; v > hu {
				hr, hu = r, v
			}
		}
	}
	return hr
}

// widenSample turns on the widening of a step's sample to every child (see
// step). Off: with it on, coordinator/tierd's TestDeposedLeaderGrantsNoLease
// no longer re-placed a failed child's shards (not yet understood; issue 23).
const widenSample = false

// window is how many shards on each side of the ideal size the fast pass of a
// step scores per cold child.
const window = 3

// sortWindowsMin is the fewest candidates for which a step's fast pass sorts
// the hot child's shards once (windowAround) rather than selecting each
// candidate's window from the unsorted list (nearLoad).
const sortWindowsMin = 4

// windowAround returns the shards of sorted (by load on resource r, ties by
// index: byLoadOn) in the window around target: the window largest with load
// below target and the window smallest from target up — nearLoad's answer
// for the same shards in any order.
func windowAround(sorted []int32, load []float64, R, r int, target float64) []int32 {
	i := sort.Search(len(sorted), func(i int) bool { return load[int(sorted[i])*R+r] >= target })
	return sorted[max(i-window, 0):min(i+window, len(sorted))]
}

// byLoadOn orders shards by their load on resource r (rows of R in load), ties
// by index.
func byLoadOn(load []float64, R, r int) func(x, y int32) int {
	return func(x, y int32) int {
		if c := cmp.Compare(load[int(x)*R+r], load[int(y)*R+r]); c != 0 {
			return c
		}
		return cmp.Compare(x, y)
	}
}

// nearLoad returns the shards of list that sorting list by load on resource r
// (ties by index) would place in the window around target: the window largest
// with load below target and the window smallest from target up, in that
// order. It selects them in one pass instead of sorting (buf holds them).
func nearLoad(list []int32, load []float64, R, r int, target float64, buf *[2 * window]int32) []int32 {
	by := byLoadOn(load, R, r)
	less := func(x, y int32) bool { return by(x, y) < 0 }
	var below, above [window]int32 // ascending
	nb, na := 0, 0
	for _, x := range list {
		if load[int(x)*R+r] < target {
			switch {
			case nb < window:
				i := nb
				for ; i > 0 && less(x, below[i-1]); i-- {
					below[i] = below[i-1]
				}
				below[i] = x
				nb++
			case less(below[0], x):
				i := 0
				for ; i+1 < window && less(below[i+1], x); i++ {
					below[i] = below[i+1]
				}
				below[i] = x
			}
			continue
		}
		if na < window || less(x, above[na-1]) {
			i := na
			if na == window {
				i = window - 1
			} else {
				na++
			}
			for ; i > 0 && less(x, above[i-1]); i-- {
				above[i] = above[i-1]
			}
			above[i] = x
		}
	}
	out := buf[:0]
	out = append(out, below[:nb]...)
	return append(out, above[:na]...)
}

// step applies the best improving move, else the best improving swap, out of
// child h. It reports whether it changed anything.
//
// Moves are scored in two passes. The fast pass ranks h's movable shards by
// their load on h's hottest resource and, for each cold candidate c, scores only
// the shards whose size is closest to the one that would equalize h and c on that
// resource (nearLoad, or windowAround on the shards sorted once when there are
// sortWindowsMin or more candidates). Only when the fast pass finds nothing does the full pass score every
// shard of h against every candidate, so a child is declared stuck only after
// the full neighbourhood was searched.
func (ls *localSearch) step(h int) bool {
	pl := ls.pl
	st := pl.st
	p := st.p
	R := st.R
	// Small problems search the whole neighbourhood: every child, every swap,
	// and the best of moves and swaps.
	small := st.N*st.M <= pairLimit
	k := ls.k
	if small {
		k = st.M
	}
	cands := ls.coldest(h, k)
	hr := ls.hotResource(h)
	var ch change
	bestS, bestC := -1, -1
	var bestD levels
	consider := func(s, c int) {
		if !pl.feasibleMove(&ch, s, c) {
			return
		}
		if d, ok := st.deltaBelow(&ch, &bestD); ok {
			bestS, bestC, bestD = s, c, d
		}
	}
	// Fast pass over unrestricted shards.
	ls.fast = ls.fast[:0]
	for _, s32 := range pl.members[h] {
		s := int(s32)
		if ls.movable(s) && (p.Allowed == nil || p.Allowed[s] == nil) {
			ls.fast = append(ls.fast, s32)
		}
	}
	if !small && len(ls.fast) > 2*window+1 {
		// With several candidates, sorting h's shards once and searching each
		// window beats selecting it from the whole list per candidate (the
		// same windows).
		sorted := len(cands) >= sortWindowsMin
		if sorted {
			slices.SortFunc(ls.fast, byLoadOn(p.Load, R, hr))
		}
		for _, c32 := range cands {
			c := int(c32)
			gap := st.u(h, hr) - st.u(c, hr)
			if gap <= 0 {
				continue
			}
			target := gap / (st.inv[h*R+hr] + st.inv[c*R+hr])
			near := ls.fast
			if sorted {
				near = windowAround(near, p.Load, R, hr, target)
			} else {
				near = nearLoad(near, p.Load, R, hr, target, &ls.win)
			}
			for _, s32 := range near {
				consider(int(s32), c)
			}
		}
		if bestS >= 0 {
			pl.move(bestS, int32(bestC))
			return true
		}
	}
	// Full pass: each shard's moves through shardMoves (consider's answers;
	// with many candidates, what they share is computed once per shard).
	var m *shardMoves
	var d levels
	fit := 0 // feasible candidates of the current shard
	scored := func(s, c int) {
		if !m.feasible(c) {
			return
		}
		fit++
		if m.below(c, &bestD, &d) {
			bestS, bestC, bestD = s, c, d
		}
	}
	for _, s32 := range pl.members[h] {
		s := int(s32)
		if !ls.movable(s) {
			continue
		}
		if p.Allowed != nil && p.Allowed[s] != nil {
			// Restricted shard: its own allowed children, coldest first.
			// Its own allowed children, coldest first, until k of them fit.
			m = pl.movesOf(s, ls.k)
			fit = 0
			pl.coldFirst(func(c int) bool {
				if pl.cold.key[c] == negInf || fit >= ls.k {
					return false
				}
				if c != h && p.AllowedOn(s, c) {
					scored(s, c)
				}
				return true
			})
			continue
		}
		m = pl.movesOf(s, len(cands))
		for _, c := range cands {
			scored(s, int(c))
		}
	}
	if widenSample && bestS < 0 && !small && len(cands) < st.M-1 && !ls.widened[h] {
		ls.widened[h] = true
		// No shard of h has an improving move into the sample: the coldest
		// children relative to their size may all be too small to take one
		// (an empty small host is coldest and fits nothing large). Widen to
		// every child (adaptive sampling) before declaring h stuck — once
		// per child and search, so that a pass costs O(N·M) at most.
		for _, s32 := range pl.members[h] {
			s := int(s32)
			if !ls.movable(s) || p.Allowed != nil && p.Allowed[s] != nil {
				continue
			}
			m = pl.movesOf(s, st.M)
			ls.widen(h, len(cands), func(c int) bool {
				scored(s, c)
				return true
			})
		}
	}
	if bestS >= 0 && !small {
		pl.move(bestS, int32(bestC))
		return true
	}
	// Two-way swaps with the few coldest children.
	sw := len(cands)
	if sw > 4 && !small {
		sw = 4
	}
	win := window
	if small {
		win = st.N
	}
	bx, by := -1, -1
	byLoad := byLoadOn(p.Load, R, hr)
	for _, c32 := range cands[:sw] {
		c := int(c32)
		gap := st.u(h, hr) - st.u(c, hr)
		if gap <= 0 {
			continue
		}
		invC := st.inv[c*R+hr]
		target := gap / (st.inv[h*R+hr] + invC)
		// c's movable shards by load on the hot resource; for each x on h, score
		// the few y whose load is closest to load(x) - target (the swap that
		// would equalize h and c on that resource).
		other := ls.other[:0]
		for _, y32 := range pl.members[c] {
			if ls.movable(int(y32)) {
				other = append(other, y32)
			}
		}
		slices.SortFunc(other, byLoad)
		ls.other = other
		for _, x32 := range pl.members[h] {
			x := int(x32)
			if !ls.movable(x) {
				continue
			}
			lx := p.Load[x*R+hr]
			want := lx - target
			i := sort.Search(len(other), func(i int) bool { return p.Load[int(other[i])*R+hr] >= want })
			lo, hi := i-win, i+win
			if lo < 0 {
				lo = 0
			}
			if hi > len(other) {
				hi = len(other)
			}
			for _, y32 := range other[lo:hi] {
				y := int(y32)
				d := lx - p.Load[y*R+hr]
				// Prefilter on the hot resource: the swap must shift load from h
				// to c without making c hotter than h was.
				if d <= 0 || d*invC >= gap {
					continue
				}
				if !pl.feasibleSwap(&ch, x, y) {
					continue
				}
				if dl, ok := st.deltaBelow(&ch, &bestD); ok {
					bx, by, bestD = x, y, dl
				}
			}
		}
	}
	if bx >= 0 {
		a, b := st.assign[bx], st.assign[by]
		pl.move(bx, b)
		pl.move(by, a)
		return true
	}
	if bestS >= 0 {
		pl.move(bestS, int32(bestC))
		return true
	}
	return false
}

// kickPairLimit bounds N·M for the pair neighbourhood inside kicks, which run
// it at every local optimum they reach.
const kickPairLimit = 32

// pairLimit bounds N·M for the pair-move neighbourhood, which scores every pair
// of single moves ((N·M)² candidates).
const pairLimit = 400

// pairStep applies the best improving pair of single moves (either of which may
// be worse alone, e.g. when a move budget or a full child blocks every single
// move and swap). Only for problems with N·M ≤ pairLimit. It reports whether it
// changed anything.
func (ls *localSearch) pairStep() bool {
	pl := ls.pl
	st := pl.st
	if st.N*st.M > pairLimit {
		return false
	}
	n := st.nLevels
	var ch change
	var bestD levels
	b1, c1, b2, c2 := -1, -1, -1, -1
	for s := 0; s < st.N; s++ {
		if !ls.movable(s) || st.assign[s] < 0 {
			continue
		}
		from := st.assign[s]
		for c := 0; c < st.M; c++ {
			if !pl.feasibleMove(&ch, s, c) {
				continue
			}
			d1 := st.delta(&ch)
			pl.move(s, int32(c))
			for t := 0; t < st.N; t++ {
				if t == s || !ls.movable(t) || st.assign[t] < 0 {
					continue
				}
				for c2x := 0; c2x < st.M; c2x++ {
					if !pl.feasibleMove(&ch, t, c2x) {
						continue
					}
					d := st.delta(&ch)
					for i := 0; i < n; i++ {
						d[i] += d1[i]
					}
					if better(&d, n) && (b1 < 0 || lexLess(&d, &bestD, n)) {
						b1, c1, b2, c2, bestD = s, c, t, c2x, d
					}
				}
			}
			pl.move(s, from)
		}
	}
	if b1 < 0 {
		return false
	}
	pl.move(b1, int32(c1))
	pl.move(b2, int32(c2))
	return true
}

// randomMoves perturbs the assignment with 1-3 random feasible moves or swaps.
func (ls *localSearch) randomMoves(ch *change) {
	pl := ls.pl
	st := pl.st
	steps := 1 + ls.rng.IntN(3)
	for j := 0; j < steps; j++ {
		s := ls.rng.IntN(st.N)
		if !ls.movable(s) || st.assign[s] < 0 {
			continue
		}
		if ls.rng.IntN(2) == 0 {
			c := ls.rng.IntN(st.M)
			if pl.feasibleMove(ch, s, c) {
				pl.move(s, int32(c))
			}
		} else {
			y := ls.rng.IntN(st.N)
			if ls.movable(y) && pl.feasibleSwap(ch, s, y) {
				a, b := st.assign[s], st.assign[y]
				pl.move(s, b)
				pl.move(y, a)
			}
		}
	}
}

// ruinRecreate takes up to 8 random movable shards off their children and puts
// them back one by one, in random order, each on its best feasible child
// (large-neighbourhood search: it reaches placements that every single move,
// swap or pair would pass through an infeasible state to get to). When a shard
// fits nowhere, every ruined shard goes back where it was.
func (ls *localSearch) ruinRecreate() {
	pl := ls.pl
	st := pl.st
	snapshot := append([]int32(nil), st.assign...)
	k := 1 + ls.rng.IntN(min(st.N, 8))
	// Shards that still break a constraint (pinned ones off their pin too: they
	// may go there), listed before the ruin.
	var forced []int
	isForced := make([]bool, st.N)
	for _, s := range ls.rng.Perm(st.N) {
		if !st.p.IsLocked(s) && pl.stillForced(s) {
			forced = append(forced, s)
			isForced[s] = true
		}
	}
	var ruined []int
	isRuined := make([]bool, st.N)
	for _, s := range ls.rng.Perm(st.N) {
		if len(ruined) == k {
			break
		}
		if st.assign[s] >= 0 && (ls.movable(s) || isForced[s]) {
			isRuined[s] = true
			ruined = append(ruined, s)
			pl.move(s, -1)
		}
	}
	// Shards that still break a constraint get the freed room first.
	for _, s := range forced {
		if isRuined[s] {
			continue // re-inserted below
		}
		if !pl.stillForced(s) {
			continue
		}
		if c := pl.bestDestination(s, st.M); c >= 0 {
			pl.move(s, int32(c))
		}
	}
	for _, s := range ruined {
		c := pl.bestDestination(s, st.M)
		switch {
		case c >= 0:
			pl.move(s, int32(c))
		default:
			// A ruined shard fits nowhere now: undo the whole kick (putting it
			// back could break a constraint that held before).
			for x := range snapshot {
				if st.assign[x] != snapshot[x] {
					pl.move(x, -1)
				}
			}
			for x := range snapshot {
				if st.assign[x] != snapshot[x] {
					pl.move(x, snapshot[x])
				}
			}
			return
		}
	}
}

// kicks returns the number of perturbation restarts to run.
func (ls *localSearch) kicks() int {
	k := ls.o.Kicks
	if k < 0 {
		return 0
	}
	if k > 0 {
		return k
	}
	st := ls.pl.st
	switch {
	case st.N*st.M <= 128:
		return 100
	case st.N <= 64 && st.M <= 16:
		return 60
	case st.N*st.M <= 20000:
		return 10
	}
	return 0
}

// kick runs iterated local search: perturb the best plan (alternately with a
// few random feasible moves and with a ruin-and-recreate of a few shards),
// improve, keep the result when it is better. It reports whether
// a budget ended it early.
func (ls *localSearch) kick() bool {
	n := ls.kicks()
	if n == 0 || ls.pl.st.N == 0 || ls.targetMet() {
		return false
	}
	pl := ls.pl
	st := pl.st
	p := st.p
	ls.inKick = true
	defer func() { ls.inKick = false }()
	best := append([]int32(nil), st.assign...)
	bestObj := evaluate(p, ls.goals, ls.o.Latency, best)
	bestForced := pl.forcedCount()
	var ch change
	// better reports whether the current assignment beats the best: fewer shards
	// breaking a constraint first, then the objective.
	better := func() (bool, Objective, int) {
		f := pl.forcedCount()
		obj := evaluate(p, ls.goals, ls.o.Latency, st.assign)
		if f != bestForced {
			return f < bestForced, obj, f
		}
		return Compare(obj, bestObj, 1e-12) < 0, obj, f
	}
	restore := func() {
		for s := range best {
			if st.assign[s] != best[s] {
				pl.move(s, -1)
			}
		}
		for s := range best {
			if st.assign[s] != best[s] {
				pl.move(s, best[s])
			}
		}
	}
	for i := 0; i < n; i++ {
		if ls.budgetOut() {
			restore()
			return true
		}
		if i%2 == 1 {
			ls.ruinRecreate()
		} else {
			ls.randomMoves(&ch)
		}
		cut := ls.improve()
		if ok, obj, f := better(); ok {
			best = append(best[:0], st.assign...)
			bestObj, bestForced = obj, f
		}
		restore()
		if cut {
			return true
		}
	}
	return false
}
