package balancer

import (
	"fmt"
	"math"

	"github.com/strata-sched/strata/interfaces"
)

// Problem is one tier's placement problem in dense form: N shards, M children and R
// resources. Every hard constraint lives here (capacity with headroom, pins,
// allowed children, anti-affinity groups, drained/failed children, in-flight
// moves, the move budget); the soft goals live in Options.
//
// Build it with FromView, or fill the fields directly and call Validate. Solvers
// call Validate themselves and never modify a Problem. Optional per-shard slices
// may be nil, meaning "no such constraint for any shard".
//
// Index conventions: shard s, child c, resource r; matrices are row-major, so the
// load of shard s on resource r is Load[s*R+r] and the capacity of child c is
// Capacity[c*R+r].
type Problem struct {
	// Resources names the R dimensions, e.g. {"cpu", "mem"}.
	Resources []interfaces.Resource

	// ChildIDs names the M children.
	ChildIDs []interfaces.ChildID
	// Capacity is M×R; each child needs at least one dimension above zero.
	Capacity []float64
	// ChildState (M, nil = all active): draining and failed children take no
	// shards and must end empty.
	ChildState []interfaces.ChildState

	// ShardIDs names the N shards.
	ShardIDs []interfaces.ShardID
	// Load is N×R, every value finite and ≥ 0.
	Load []float64
	// StateBytes (N, nil = all 0) is what moving each shard costs in bytes.
	StateBytes []int64
	// Epoch (N, nil = all 0) is each shard's current epoch; moves carry it.
	Epoch []interfaces.Epoch
	// Current (N) is each shard's child index with the in-flight moves already
	// applied, or -1 when the shard is unplaced.
	Current []int32
	// Locked (N, nil = none) marks shards with an in-flight move: they stay at
	// Current (their in-flight destination) and are never moved again this round.
	Locked []bool
	// Pinned (N, nil = none) is the only child a shard may live on, or -1.
	Pinned []int32
	// Allowed (N, nil = any) lists, per shard, the child indices it may live on,
	// sorted ascending; a nil entry means any child, an empty non-nil one none.
	Allowed [][]int32
	// Unresolved (N, nil = none) says, per shard, which of its constraints
	// names a child this tier does not have ("" = none): a pin to such a
	// child, or an allowed list none of whose children exist. The shard's
	// Allowed entry is then empty (it may live on no child), so every solver
	// reports it infeasible, with this reason, and places every other shard: a
	// child named before it joins, or after it left, stops no tier.
	Unresolved []string
	// Groups (N, nil = none) lists the anti-affinity groups of each shard.
	Groups [][]int32
	// GroupLimit is, per group, the most shards of the group one child may hold
	// (≥ 1). GroupNames names the groups for explanations.
	GroupLimit []int32
	GroupNames []string

	// Headroom is the fraction of every capacity kept free, in [0, 1): a child may
	// carry at most (1-Headroom)×Capacity of each resource.
	Headroom float64
	// MaxMoves and MaxBytes bound the moves of one round (count and state bytes);
	// 0 means unlimited. In-flight moves do not count against them.
	MaxMoves int
	MaxBytes int64

	// Locality (optional) describes network distances for the locality goal:
	// ShardDomain (N, -1 = indifferent) is the domain each shard prefers (where its
	// sources and sinks are), ChildDomain (M, -1 = none) the domain of each child,
	// DomainDist a D×D cost matrix (nil: 0 within a domain, 1 across).
	ShardDomain []int32
	ChildDomain []int32
	DomainDist  []float64
	DomainNames []string
	// Avoid (N, nil = none) lists, per shard, children it should not use (a soft
	// constraint, e.g. "SLO at risk there"); each such placement costs 1 in the
	// locality goal.
	Avoid [][]int32

	// origOrder is set on a renumbered copy (renumber.go): its shards in the
	// order of the problem it was made from, the order plans list moves in.
	origOrder []int32
	// sizeW is set on a renumbered copy: the size weights of the problem it
	// was made from (placementOrder), which its placer sizes shards with.
	sizeW []float64
}

// NumShards returns N.
func (p *Problem) NumShards() int { return len(p.ShardIDs) }

// NumChildren returns M.
func (p *Problem) NumChildren() int { return len(p.ChildIDs) }

// NumResources returns R.
func (p *Problem) NumResources() int { return len(p.Resources) }

// Drained reports whether child c is draining or failed (takes no shards, must end
// empty).
func (p *Problem) Drained(c int) bool {
	return p.ChildState != nil && p.ChildState[c] != interfaces.ChildActive
}

// IsLocked reports whether shard s has an in-flight move and must stay put.
func (p *Problem) IsLocked(s int) bool { return p.Locked != nil && p.Locked[s] }

// PinOf returns the child shard s is pinned to, or -1.
func (p *Problem) PinOf(s int) int {
	if p.Pinned == nil {
		return -1
	}
	return int(p.Pinned[s])
}

// Limit returns the usable capacity of child c on resource r: (1-Headroom)×capacity.
func (p *Problem) Limit(c, r int) float64 {
	return p.Capacity[c*len(p.Resources)+r] * (1 - p.Headroom)
}

// Bytes returns the state size of shard s.
func (p *Problem) Bytes(s int) int64 {
	if p.StateBytes == nil {
		return 0
	}
	return p.StateBytes[s]
}

// AllowedOn reports whether shard s may live on child c according to its pin and
// allowed list (not capacity, drain or anti-affinity). A shard with an
// Unresolved constraint is allowed nowhere (its Allowed entry is empty).
func (p *Problem) AllowedOn(s, c int) bool {
	if pin := p.PinOf(s); pin >= 0 && pin != c {
		return false
	}
	if p.Allowed != nil && p.Allowed[s] != nil {
		return containsSorted(p.Allowed[s], int32(c))
	}
	return true
}

func containsSorted(xs []int32, x int32) bool {
	lo, hi := 0, len(xs)
	for lo < hi {
		mid := (lo + hi) / 2
		if xs[mid] < x {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo < len(xs) && xs[lo] == x
}

func invalid(field, rule string, value any) error {
	if value == nil {
		return fmt.Errorf("%s: %s: %w", field, rule, interfaces.ErrInvalid)
	}
	return fmt.Errorf("%s: %s (got %v): %w", field, rule, value, interfaces.ErrInvalid)
}

func notFound(field string, value any) error {
	return fmt.Errorf("%s: refers to a child that does not exist (got %v): %w", field, value, interfaces.ErrNotFound)
}

// Validate checks the shapes and values of every field and returns the first
// problem found, naming the field and the rule; the error wraps
// interfaces.ErrInvalid (or ErrNotFound for a reference to a missing child).
func (p *Problem) Validate() error {
	R, M, N := len(p.Resources), len(p.ChildIDs), len(p.ShardIDs)
	if R == 0 {
		return invalid("resources", "must name at least one resource", nil)
	}
	if M == 0 {
		return invalid("children", "must list at least one child", nil)
	}
	if M > math.MaxInt32 || N > math.MaxInt32 {
		return invalid("shards", "too many shards or children for 32-bit indices", N)
	}
	if len(p.Capacity) != M*R {
		return invalid("capacity", fmt.Sprintf("must have children×resources = %d values", M*R), len(p.Capacity))
	}
	if len(p.Load) != N*R {
		return invalid("load", fmt.Sprintf("must have shards×resources = %d values", N*R), len(p.Load))
	}
	if len(p.Current) != N {
		return invalid("current", fmt.Sprintf("must have one entry per shard (%d)", N), len(p.Current))
	}
	if math.IsNaN(p.Headroom) || p.Headroom < 0 || p.Headroom >= 1 {
		return invalid("headroom", "must be in [0, 1)", p.Headroom)
	}
	if p.MaxMoves < 0 {
		return invalid("max_moves", "must be ≥ 0 (0 = unlimited)", p.MaxMoves)
	}
	if p.MaxBytes < 0 {
		return invalid("max_bytes", "must be ≥ 0 (0 = unlimited)", p.MaxBytes)
	}
	for c := 0; c < M; c++ {
		positive := false
		for r := 0; r < R; r++ {
			v := p.Capacity[c*R+r]
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return invalid(fmt.Sprintf("child %q: capacity.%s", p.ChildIDs[c], p.Resources[r]), "must be a finite number ≥ 0", v)
			}
			if v > 0 {
				positive = true
			}
		}
		if !positive {
			return invalid(fmt.Sprintf("child %q: capacity", p.ChildIDs[c]), "must be > 0 in at least one resource", "all zero")
		}
	}
	if p.ChildState != nil {
		if len(p.ChildState) != M {
			return invalid("child_state", fmt.Sprintf("must have one entry per child (%d)", M), len(p.ChildState))
		}
		for c, st := range p.ChildState {
			if st > interfaces.ChildFailed {
				return invalid(fmt.Sprintf("child %q: state", p.ChildIDs[c]), "must be active, draining or failed", int(st))
			}
		}
	}
	for s := 0; s < N; s++ {
		for r := 0; r < R; r++ {
			v := p.Load[s*R+r]
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return invalid(fmt.Sprintf("shard %q: load.%s", p.ShardIDs[s], p.Resources[r]), "must be a finite number ≥ 0", v)
			}
		}
		if c := p.Current[s]; c < -1 || int(c) >= M {
			return notFound(fmt.Sprintf("shard %q: current", p.ShardIDs[s]), c)
		}
	}
	if err := checkLen("state_bytes", len(p.StateBytes), N, p.StateBytes == nil); err != nil {
		return err
	}
	for s, b := range p.StateBytes {
		if b < 0 {
			return invalid(fmt.Sprintf("shard %q: state_bytes", p.ShardIDs[s]), "must be ≥ 0", b)
		}
	}
	if err := checkLen("epoch", len(p.Epoch), N, p.Epoch == nil); err != nil {
		return err
	}
	if err := checkLen("locked", len(p.Locked), N, p.Locked == nil); err != nil {
		return err
	}
	for s, l := range p.Locked {
		if l && p.Current[s] < 0 {
			return invalid(fmt.Sprintf("shard %q: locked", p.ShardIDs[s]), "an in-flight shard must have a destination in current", -1)
		}
	}
	if err := checkLen("pinned", len(p.Pinned), N, p.Pinned == nil); err != nil {
		return err
	}
	for s, c := range p.Pinned {
		if c < -1 || int(c) >= M {
			return notFound(fmt.Sprintf("shard %q: pinned", p.ShardIDs[s]), c)
		}
	}
	if err := checkLen("allowed", len(p.Allowed), N, p.Allowed == nil); err != nil {
		return err
	}
	for s, list := range p.Allowed {
		for i, c := range list {
			if c < 0 || int(c) >= M {
				return notFound(fmt.Sprintf("shard %q: allowed[%d]", p.ShardIDs[s], i), c)
			}
			if i > 0 && list[i-1] >= c {
				return invalid(fmt.Sprintf("shard %q: allowed", p.ShardIDs[s]), "must be sorted ascending without duplicates", list)
			}
		}
	}
	if err := checkLen("unresolved", len(p.Unresolved), N, p.Unresolved == nil); err != nil {
		return err
	}
	for s, why := range p.Unresolved {
		if why != "" && (p.Allowed == nil || p.Allowed[s] == nil || len(p.Allowed[s]) > 0) {
			return invalid(fmt.Sprintf("shard %q: unresolved", p.ShardIDs[s]), "a shard with an unresolved constraint must have an empty allowed list", why)
		}
	}
	if err := checkLen("groups", len(p.Groups), N, p.Groups == nil); err != nil {
		return err
	}
	G := len(p.GroupLimit)
	if p.GroupNames != nil && len(p.GroupNames) != G {
		return invalid("group_names", fmt.Sprintf("must have one entry per group (%d)", G), len(p.GroupNames))
	}
	for g, k := range p.GroupLimit {
		if k < 1 {
			return invalid(fmt.Sprintf("group %d: limit", g), "must be ≥ 1", k)
		}
	}
	for s, gs := range p.Groups {
		for _, g := range gs {
			if g < 0 || int(g) >= G {
				return invalid(fmt.Sprintf("shard %q: groups", p.ShardIDs[s]), fmt.Sprintf("must index group_limit (0..%d)", G-1), g)
			}
		}
	}
	if p.ShardDomain != nil || p.ChildDomain != nil {
		if err := checkLen("shard_domain", len(p.ShardDomain), N, false); err != nil {
			return err
		}
		if err := checkLen("child_domain", len(p.ChildDomain), M, false); err != nil {
			return err
		}
		D := 0
		for _, d := range p.ShardDomain {
			if int(d)+1 > D {
				D = int(d) + 1
			}
			if d < -1 {
				return invalid("shard_domain", "must be ≥ -1", d)
			}
		}
		for _, d := range p.ChildDomain {
			if int(d)+1 > D {
				D = int(d) + 1
			}
			if d < -1 {
				return invalid("child_domain", "must be ≥ -1", d)
			}
		}
		if p.DomainDist != nil {
			if len(p.DomainDist) < D*D || !isSquare(len(p.DomainDist)) {
				return invalid("domain_dist", fmt.Sprintf("must be a square matrix covering %d domains", D), len(p.DomainDist))
			}
			for _, v := range p.DomainDist {
				if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
					return invalid("domain_dist", "must hold finite numbers ≥ 0", v)
				}
			}
		}
	}
	if err := checkLen("avoid", len(p.Avoid), N, p.Avoid == nil); err != nil {
		return err
	}
	for s, list := range p.Avoid {
		for _, c := range list {
			if c < 0 || int(c) >= M {
				return notFound(fmt.Sprintf("shard %q: avoid", p.ShardIDs[s]), c)
			}
		}
	}
	return nil
}

func isSquare(n int) bool {
	k := int(math.Sqrt(float64(n)))
	for k*k < n {
		k++
	}
	return k*k == n
}

func checkLen(field string, got, want int, absent bool) error {
	if absent || got == want {
		return nil
	}
	return invalid(field, fmt.Sprintf("must have %d entries or be absent", want), got)
}
