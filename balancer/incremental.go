package balancer

import (
	"fmt"
	"math"
	"sort"

	"github.com/strata-sched/strata/interfaces"
)

// Incremental is a placement kept between rounds and fed changes, so that a
// round costs in proportion to what changed rather than to every shard: a
// tier policy owns one (tiers.IncrementalPolicy) and tells it of shards
// added, removed or whose load moved, of children added, failed or drained,
// then asks it for the round's moves (Round).
//
// A round does two things, both from sums kept up to date by the changes:
//
//  1. place: every shard without a child (new, or evacuated from a failed or
//     draining child) goes to the child where its busiest resource ends least
//     utilized, among the active children it fits (Fits: the child's largest
//     free capacity per resource — a host's own free capacity, or the
//     largest free host of an aggregate child such as a region, from its
//     capacity shape); largest first when LargestFirst is set.
//  2. rebalance: every active child whose utilization of some resource is
//     above the mean utilization times (1 + Tolerance) sheds shards to the
//     least utilized children that stay below that limit, until it is
//     within it or MaxScan of its shards were tried.
//
// Only the children above the limit, the shards they shed and the shards
// placed are looked at, besides one pass over the children (jobs ×
// children, with one job): with no change, a round looks at the children
// only. The moves are applied to the state as they are returned (a tier
// counts its decided moves as done).
//
// Sums drift under many float updates: Resync recomputes them from the
// shards (O(shards)); a tier calls it with its periodic full solve.
//
// Shards and children are dense handles the caller keeps (the tier policy
// maps IDs to them). Incremental is deterministic: no clock, no randomness,
// ties broken by handle.
type Incremental struct {
	// R is the number of resources; set by NewIncremental.
	R int
	// Tolerance is the utilization a child may carry above the mean, as a
	// fraction of the mean, before it sheds (0 = 0.01).
	Tolerance float64
	// LargestFirst places the unplaced shards largest first (by their
	// largest load relative to the mean capacity) — better packing for
	// leaf children; otherwise in handle order.
	LargestFirst bool
	// MaxScan bounds the shards of one over-limit child a round tries
	// (0 = 256). Breadth bounds the children a shard's destination is
	// chosen among, the least loaded first (0 = 128; all when none of them
	// fits).
	MaxScan, Breadth int

	ccap, cload, cfree []float64 // per child × R
	cstate             []IncChildState
	members            [][]int32 // child → its shards
	cursor             []int     // child → where shedding resumes in members

	sload   []float64 // per shard × R
	owner   []int32   // shard → child, -1 none
	pos     []int32   // shard → index in members[owner]
	alive   []bool
	pending []int32 // unplaced shards (alive, owner -1), possibly repeated
	queued  []bool
}

// IncChildState is what a child of an Incremental can take.
type IncChildState uint8

// The child states.
const (
	// IncActive children take shards.
	IncActive IncChildState = iota
	// IncDraining children take none; their shards move off in the next
	// round (planned moves from the child).
	IncDraining
	// IncFailed children take none; their shards are re-placed in the next
	// round (emergency moves).
	IncFailed
	// IncRemoved children are gone; they must be empty.
	IncRemoved
)

// IncMove is one move of a round.
type IncMove struct {
	Shard    int32
	From, To int32 // From -1: a placement
	// Kind is IncPlace, IncEvacuate or IncRebalance; Resource is the
	// resource whose limit drove a rebalance (-1 otherwise).
	Kind     IncMoveKind
	Resource int
	// Before and After are the utilization of that resource (the shard's
	// busiest for a placement) on From before the move and on To after it;
	// Limit is the limit a rebalance restored.
	Before, After, Limit float64
}

// IncMoveKind says why a move was made.
type IncMoveKind uint8

// The kinds of moves.
const (
	IncPlace IncMoveKind = iota
	IncEvacuate
	IncRebalance
)

// NewIncremental returns an empty placement over r resources.
func NewIncremental(r int) *Incremental {
	return &Incremental{R: r}
}

// NumShards and NumChildren count the handles given out.
func (x *Incremental) NumShards() int   { return len(x.owner) }
func (x *Incremental) NumChildren() int { return len(x.cstate) }

// AddChild adds an active child with capacity (R values) and returns its
// handle. Its largest free capacity is its free capacity until SetFree.
func (x *Incremental) AddChild(capacity []float64) (int32, error) {
	if err := x.checkVec("capacity", capacity); err != nil {
		return -1, err
	}
	c := int32(len(x.cstate))
	x.ccap = append(x.ccap, capacity...)
	x.cload = append(x.cload, make([]float64, x.R)...)
	x.cfree = append(x.cfree, capacity...)
	x.cstate = append(x.cstate, IncActive)
	x.members = append(x.members, nil)
	x.cursor = append(x.cursor, 0)
	return c, nil
}

// SetCapacity changes child c's capacity.
func (x *Incremental) SetCapacity(c int32, capacity []float64) error {
	if err := x.checkChild(c); err != nil {
		return err
	}
	if err := x.checkVec("capacity", capacity); err != nil {
		return err
	}
	copy(x.ccap[int(c)*x.R:], capacity)
	return nil
}

// SetFree sets child c's largest free capacity per resource: for an
// aggregate child (a region), the most a single shard can take there, from
// its capacity shape; a shard fits c only if its load is at most this in
// every resource. It is a bound per shard, kept until the next SetFree
// (the child's own tier places the shard exactly and reports its new
// shape); the total is bounded by the capacity. A leaf child needs none: its
// capacity bounds it.
func (x *Incremental) SetFree(c int32, free []float64) error {
	if err := x.checkChild(c); err != nil {
		return err
	}
	if err := x.checkVec("free", free); err != nil {
		return err
	}
	copy(x.cfree[int(c)*x.R:], free)
	return nil
}

// SetState changes child c's state. Draining or failing a child queues its
// shards for the next round; a removed child must be empty.
func (x *Incremental) SetState(c int32, st IncChildState) error {
	if err := x.checkChild(c); err != nil {
		return err
	}
	if st == IncRemoved && len(x.members[c]) > 0 {
		return fmt.Errorf("child %d: cannot be removed with %d shards on it: %w", c, len(x.members[c]), interfaces.ErrInvalid)
	}
	x.cstate[c] = st
	return nil
}

// AddShard adds a shard with load (R values) on child c (-1 = unplaced,
// placed in the next round) and returns its handle.
func (x *Incremental) AddShard(load []float64, c int32) (int32, error) {
	if err := x.checkVec("load", load); err != nil {
		return -1, err
	}
	if c >= 0 {
		if err := x.checkChild(c); err != nil {
			return -1, err
		}
	}
	s := int32(len(x.owner))
	x.sload = append(x.sload, load...)
	x.owner = append(x.owner, -1)
	x.pos = append(x.pos, -1)
	x.alive = append(x.alive, true)
	x.queued = append(x.queued, false)
	if c >= 0 {
		x.attach(s, c)
	} else {
		x.queue(s)
	}
	return s, nil
}

// RemoveShard removes shard s; its handle is not reused.
func (x *Incremental) RemoveShard(s int32) error {
	if err := x.checkShard(s); err != nil {
		return err
	}
	x.detach(s)
	x.alive[s] = false
	return nil
}

// SetLoad records shard s's new load.
func (x *Incremental) SetLoad(s int32, load []float64) error {
	if err := x.checkShard(s); err != nil {
		return err
	}
	if err := x.checkVec("load", load); err != nil {
		return err
	}
	if c := x.owner[s]; c >= 0 {
		base, cb := int(s)*x.R, int(c)*x.R
		for k := 0; k < x.R; k++ {
			x.cload[cb+k] += load[k] - x.sload[base+k]
		}
	}
	copy(x.sload[int(s)*x.R:], load)
	return nil
}

// Load returns shard s's recorded load (R values, not to be modified).
func (x *Incremental) Load(s int32) []float64 { return x.sload[int(s)*x.R : int(s+1)*x.R] }

// Owner returns shard s's child (-1 none).
func (x *Incremental) Owner(s int32) int32 { return x.owner[s] }

// Assign records that shard s is on child c (-1 = unplaced) without a
// round: a move decided elsewhere (an operator's, a full solve's).
func (x *Incremental) Assign(s, c int32) error {
	if err := x.checkShard(s); err != nil {
		return err
	}
	if c >= 0 {
		if err := x.checkChild(c); err != nil {
			return err
		}
	}
	x.detach(s)
	if c >= 0 {
		x.attach(s, c)
	} else {
		x.queue(s)
	}
	return nil
}

// ChildLoad returns child c's summed load (R values, not to be modified).
func (x *Incremental) ChildLoad(c int32) []float64 { return x.cload[int(c)*x.R : int(c+1)*x.R] }

// Resync recomputes every child's summed load from its shards (the guard
// against float drift; O(shards)).
func (x *Incremental) Resync() {
	clear(x.cload)
	for s, c := range x.owner {
		if c >= 0 {
			for k := 0; k < x.R; k++ {
				x.cload[int(c)*x.R+k] += x.sload[s*x.R+k]
			}
		}
	}
}

// Round places the unplaced shards, evacuates draining and failed children,
// rebalances the children above the limit, applies the moves to the state
// and returns them (appended to dst). unplaced lists the shards that fit no
// active child (they stay queued for the next round).
func (x *Incremental) Round(dst []IncMove) (moves []IncMove, unplaced []int32) {
	moves = dst
	// Evacuate children that take no shards.
	for c, st := range x.cstate {
		if st == IncDraining || st == IncFailed {
			for _, s := range x.members[c] {
				x.queue(s)
			}
		}
	}
	order := x.pending[:0:0]
	for _, s := range x.pending {
		if x.alive[s] && x.queued[s] {
			x.queued[s] = false
			order = append(order, s)
		}
	}
	x.pending = x.pending[:0]
	if x.LargestFirst {
		size := func(s int32) float64 {
			m := 0.0
			for k := 0; k < x.R; k++ {
				m = math.Max(m, x.sload[int(s)*x.R+k])
			}
			return m
		}
		sort.SliceStable(order, func(i, j int) bool { return size(order[i]) > size(order[j]) })
	}
	h := x.utilHeap()
	for _, s := range order {
		from := x.owner[s]
		c := h.bestFit(x, s, -1)
		if c < 0 {
			unplaced = append(unplaced, s)
			x.queue(s)
			continue
		}
		kind := IncPlace
		before := 0.0
		if from >= 0 {
			kind = IncEvacuate
			before = x.maxUtil(from)
		}
		x.detach(s)
		x.attach(s, c)
		h.fix(x, c)
		moves = append(moves, IncMove{Shard: s, From: from, To: c, Kind: kind, Resource: -1, Before: before, After: x.maxUtil(c)})
	}
	return x.rebalance(moves, h), unplaced
}

// rebalance sheds from every active child above the limit.
func (x *Incremental) rebalance(moves []IncMove, h *utilHeap) []IncMove {
	tol := x.Tolerance
	if tol <= 0 {
		tol = 0.01
	}
	mean := x.meanUtil()
	limit := make([]float64, x.R)
	for k := range limit {
		limit[k] = mean[k] * (1 + tol)
	}
	for ci, st := range x.cstate {
		c := int32(ci)
		if st != IncActive {
			continue
		}
		k := x.overResource(c, limit)
		if k < 0 {
			continue
		}
		scan := x.MaxScan
		if scan <= 0 {
			scan = 256
		}
		for tried := 0; k >= 0 && tried < scan && len(x.members[c]) > 0; {
			// Among the next few shards, the move that lowers Σ utilization⁸
			// over both children most: its gain on c less its cost on the
			// child where it costs least.
			n := len(x.members[c])
			best, bestTo, bestNet := int32(-1), int32(-1), -1e-12
			for j := 0; j < 16 && j < n && tried < scan; j++ {
				tried++
				s := x.members[c][(x.cursor[c]+j)%n]
				if x.sload[int(s)*x.R+k] <= 0 {
					continue
				}
				to := h.bestFit(x, s, c)
				if to < 0 {
					continue
				}
				if net := x.keyWith(to, s) - x.gain(c, s); net < bestNet {
					best, bestTo, bestNet = s, to, net
				}
			}
			x.cursor[c] += 16
			if best < 0 {
				continue
			}
			before := x.util(c, k)
			x.detach(best)
			x.attach(best, bestTo)
			h.fix(x, c)
			h.fix(x, bestTo)
			moves = append(moves, IncMove{Shard: best, From: c, To: bestTo, Kind: IncRebalance, Resource: k, Before: before, After: x.util(bestTo, k), Limit: limit[k]})
			k = x.overResource(c, limit)
		}
		if n := len(x.members[c]); n > 0 {
			x.cursor[c] %= n
		} else {
			x.cursor[c] = 0
		}
	}
	return moves
}

// MaxUtil returns, per resource, the busiest active child's utilization.
func (x *Incremental) MaxUtil() []float64 {
	out := make([]float64, x.R)
	for c, st := range x.cstate {
		if st == IncRemoved {
			continue
		}
		for k := 0; k < x.R; k++ {
			out[k] = math.Max(out[k], x.util(int32(c), k))
		}
	}
	return out
}

// meanUtil is Σload/Σcapacity per resource over the active children, all
// shards counted (placed or not).
func (x *Incremental) meanUtil() []float64 {
	load := make([]float64, x.R)
	capa := make([]float64, x.R)
	for c, st := range x.cstate {
		if st == IncActive {
			for k := 0; k < x.R; k++ {
				capa[k] += x.ccap[c*x.R+k]
			}
		}
		for k := 0; k < x.R; k++ {
			load[k] += x.cload[c*x.R+k]
		}
	}
	for _, s := range x.pending {
		if x.alive[s] && x.owner[s] < 0 {
			for k := 0; k < x.R; k++ {
				load[k] += x.sload[int(s)*x.R+k]
			}
		}
	}
	for k := range load {
		load[k] = util(load[k], capa[k])
	}
	return load
}

// overResource returns the resource of child c furthest above limit
// (relative to it), or -1.
func (x *Incremental) overResource(c int32, limit []float64) int {
	best, worst := -1, 1.0
	for k := 0; k < x.R; k++ {
		if limit[k] <= 0 {
			continue
		}
		if r := x.util(c, k) / limit[k]; r > worst*(1+1e-12) {
			best, worst = k, r
		}
	}
	return best
}

func (x *Incremental) util(c int32, k int) float64 {
	return util(x.cload[int(c)*x.R+k], x.ccap[int(c)*x.R+k])
}

func (x *Incremental) maxUtil(c int32) float64 {
	m := 0.0
	for k := 0; k < x.R; k++ {
		m = math.Max(m, x.util(c, k))
	}
	return m
}

// fits reports whether shard s fits child c: within its largest free
// capacity and its capacity.
func (x *Incremental) fits(s, c int32) bool {
	if x.cstate[c] != IncActive {
		return false
	}
	sb, cb := int(s)*x.R, int(c)*x.R
	for k := 0; k < x.R; k++ {
		l := x.sload[sb+k]
		if l > x.cfree[cb+k]*(1+1e-12) {
			return false
		}
		if x.cload[cb+k]+l > x.ccap[cb+k]*(1+1e-12) {
			return false
		}
	}
	return true
}

func (x *Incremental) attach(s, c int32) {
	x.owner[s] = c
	x.pos[s] = int32(len(x.members[c]))
	x.members[c] = append(x.members[c], s)
	sb, cb := int(s)*x.R, int(c)*x.R
	for k := 0; k < x.R; k++ {
		x.cload[cb+k] += x.sload[sb+k]
	}
}

func (x *Incremental) detach(s int32) {
	c := x.owner[s]
	if c < 0 {
		return
	}
	m := x.members[c]
	i := x.pos[s]
	last := m[len(m)-1]
	m[i] = last
	x.pos[last] = i
	x.members[c] = m[:len(m)-1]
	sb, cb := int(s)*x.R, int(c)*x.R
	for k := 0; k < x.R; k++ {
		x.cload[cb+k] -= x.sload[sb+k]
	}
	x.owner[s], x.pos[s] = -1, -1
}

func (x *Incremental) queue(s int32) {
	if !x.queued[s] {
		x.queued[s] = true
		x.pending = append(x.pending, s)
	}
}

func (x *Incremental) checkVec(field string, v []float64) error {
	if len(v) != x.R {
		return fmt.Errorf("%s: must have %d values, one per resource (got %d): %w", field, x.R, len(v), interfaces.ErrInvalid)
	}
	for k, f := range v {
		if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
			return fmt.Errorf("%s[%d]: must be a finite number ≥ 0 (got %g): %w", field, k, f, interfaces.ErrInvalid)
		}
	}
	return nil
}

func (x *Incremental) checkChild(c int32) error {
	if c < 0 || int(c) >= len(x.cstate) || x.cstate[c] == IncRemoved {
		return fmt.Errorf("child %d: no such child: %w", c, interfaces.ErrInvalid)
	}
	return nil
}

func (x *Incremental) checkShard(s int32) error {
	if s < 0 || int(s) >= len(x.owner) || !x.alive[s] {
		return fmt.Errorf("shard %d: no such shard: %w", s, interfaces.ErrInvalid)
	}
	return nil
}

// key is child c's Σ utilization⁸ over the resources: a smooth stand-in
// for its busiest resource's utilization (the 8th power makes the busiest
// dominate) whose changes add up, so a move that lowers the sum of the
// keys of its two children improves the balance, and placing a shard where
// it raises the key least fills every resource evenly.
func pow8(u float64) float64 {
	u *= u
	u *= u
	return u * u
}

// key is child c's Σ utilization⁸ (pow8).
func (x *Incremental) key(c int32) float64 {
	q := 0.0
	for k := 0; k < x.R; k++ {
		q += pow8(x.util(c, k))
	}
	return q
}

// keyWith is key(c) with shard s added, less key(c): what placing s there
// costs.
func (x *Incremental) keyWith(c, s int32) float64 {
	q := 0.0
	sb, cb := int(s)*x.R, int(c)*x.R
	for k := 0; k < x.R; k++ {
		q += pow8(util(x.cload[cb+k]+x.sload[sb+k], x.ccap[cb+k])) - pow8(util(x.cload[cb+k], x.ccap[cb+k]))
	}
	return q
}

// gain is what removing shard s from child c (its owner) lowers key(c) by.
func (x *Incremental) gain(c, s int32) float64 {
	q := 0.0
	sb, cb := int(s)*x.R, int(c)*x.R
	for k := 0; k < x.R; k++ {
		q += pow8(util(x.cload[cb+k], x.ccap[cb+k])) - pow8(util(x.cload[cb+k]-x.sload[sb+k], x.ccap[cb+k]))
	}
	return q
}

// utilHeap orders the children by key (least first, then by handle): where
// a shard goes.
type utilHeap struct {
	key  []float64 // child → key
	heap []int32   // heap of children
	at   []int     // child → index in heap, -1 not in it
}

func (x *Incremental) utilHeap() *utilHeap {
	h := &utilHeap{key: make([]float64, len(x.cstate)), at: make([]int, len(x.cstate))}
	for c := range x.cstate {
		h.at[c] = -1
		if x.cstate[c] == IncActive {
			h.key[c] = x.key(int32(c))
			h.at[c] = len(h.heap)
			h.heap = append(h.heap, int32(c))
		}
	}
	for i := len(h.heap)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
	return h
}

func (h *utilHeap) less(i, j int) bool {
	a, b := h.heap[i], h.heap[j]
	if h.key[a] != h.key[b] {
		return h.key[a] < h.key[b]
	}
	return a < b
}

func (h *utilHeap) swap(i, j int) {
	h.heap[i], h.heap[j] = h.heap[j], h.heap[i]
	h.at[h.heap[i]], h.at[h.heap[j]] = i, j
}

func (h *utilHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *utilHeap) down(i int) {
	n := len(h.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h.swap(i, m)
		i = m
	}
}

// fix restores child c's place after its load changed.
func (h *utilHeap) fix(x *Incremental, c int32) {
	i := h.at[c]
	if i < 0 {
		return
	}
	h.key[c] = x.key(c)
	h.up(i)
	h.down(h.at[c])
}

// bestFit returns the child shard s fits (see fits) where it raises the key
// least, other than skip (-1 = none), or -1. It looks at the Breadth
// children nearest the heap's root (breadth first: about the least keyed)
// and, when none of them fits, at all.
func (h *utilHeap) bestFit(x *Incremental, s, skip int32) int32 {
	breadth := x.Breadth
	if breadth <= 0 {
		breadth = 128
	}
	best, bestKey := int32(-1), math.Inf(1)
	try := func(c int32) {
		if c != skip && x.fits(s, c) {
			if key := x.keyWith(c, s); key < bestKey || (key == bestKey && c < best) {
				best, bestKey = c, key
			}
		}
	}
	n := min(breadth, len(h.heap))
	// Breadth first from the root is the heap's array order.
	for i := 0; i < n; i++ {
		try(h.heap[i])
	}
	if best < 0 {
		for i := n; i < len(h.heap); i++ {
			try(h.heap[i])
		}
	}
	return best
}
