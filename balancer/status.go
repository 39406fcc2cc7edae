package balancer

import (
	"fmt"
	"slices"
)

// provenUnplaceable reports whether some shard is certainly left unplaced
// by every assignment that keeps the hard constraints, and why; a solver's
// result is Infeasible only then (Finish), else a plan with shards it did not
// place is Partial: its search stopped short of them. The proofs, each cheap:
//
//   - a shard of unplaced (the shards the result leaves unplaced or breaking a
//     constraint) fits no child it may use even when that child holds only
//     the shards no solver may move (pinned there, or in flight to it):
//     pin, allowed list, drain, capacity, anti-affinity;
//   - a resource's load is above the usable capacity of the active children;
//   - a counting bound per resource: child c can hold at most k_c shards
//     (the most of the smallest loads that fit its usable capacity), and
//     Σ_c k_c is below the number of shards;
//   - an anti-affinity group has more shards than limit × active children;
//   - more shards must move (unplaced, on a drained child, off their pin or
//     allowed set) than the move budget allows.
func provenUnplaceable(p *Problem, unplaced []int) (bool, string) {
	R, M, N := p.NumResources(), p.NumChildren(), p.NumShards()
	if len(unplaced) > 0 {
		// What no solver can take off a child: its pinned and locked shards.
		fixed := make([]float64, M*R)
		fixedOf := make([]int32, N)
		groupFixed := map[int64]int32{}
		for s := 0; s < N; s++ {
			fixedOf[s] = -1
			c := int32(p.PinOf(s))
			if p.IsLocked(s) {
				c = p.Current[s]
			}
			if c < 0 {
				continue
			}
			fixedOf[s] = c
			for r := 0; r < R; r++ {
				fixed[int(c)*R+r] += p.Load[s*R+r]
			}
			if p.Groups != nil {
				for _, g := range p.Groups[s] {
					groupFixed[int64(g)*int64(M)+int64(c)]++
				}
			}
		}
		for _, s := range unplaced {
			if p.IsLocked(s) {
				continue
			}
			ok := false
			for c := 0; c < M && !ok; c++ {
				if p.Drained(c) || !p.AllowedOn(s, c) {
					continue
				}
				self := fixedOf[s] == int32(c) // s itself is pinned there
				fits := true
				for r := 0; r < R && fits; r++ {
					base := fixed[c*R+r]
					if self {
						base -= p.Load[s*R+r]
					}
					fits = base+p.Load[s*R+r] <= p.Limit(c, r)*(1+capTolerance)
				}
				if fits && p.Groups != nil {
					for _, g := range p.Groups[s] {
						n := groupFixed[int64(g)*int64(M)+int64(c)]
						if self {
							n--
						}
						if n+1 > p.GroupLimit[g] {
							fits = false
						}
					}
				}
				ok = fits
			}
			if !ok {
				return true, fmt.Sprintf("shard %q fits no child it may use, even with only the pinned and in-flight shards there", p.ShardIDs[s])
			}
		}
	}
	// Shards that count: all but the locked ones held by drained children.
	counted := make([]bool, N)
	n := 0
	for s := 0; s < N; s++ {
		if p.IsLocked(s) && p.Drained(int(p.Current[s])) {
			continue
		}
		counted[s] = true
		n++
	}
	active := 0
	for c := 0; c < M; c++ {
		if !p.Drained(c) {
			active++
		}
	}
	loads := make([]float64, 0, n)
	for r := 0; r < R; r++ {
		loads = loads[:0]
		sum := 0.0
		for s := 0; s < N; s++ {
			if counted[s] {
				loads = append(loads, p.Load[s*R+r])
				sum += p.Load[s*R+r]
			}
		}
		limit := 0.0
		for c := 0; c < M; c++ {
			if !p.Drained(c) {
				limit += p.Limit(c, r)
			}
		}
		if sum > limit*(1+capTolerance) {
			return true, fmt.Sprintf("the shards' %s (%.6g) is above the usable capacity of the active children (%.6g)", p.Resources[r], sum, limit)
		}
		slices.Sort(loads)
		prefix := make([]float64, len(loads)+1)
		for i, v := range loads {
			prefix[i+1] = prefix[i] + v
		}
		most := 0
		for c := 0; c < M && most < n; c++ {
			if p.Drained(c) {
				continue
			}
			lim := p.Limit(c, r) * (1 + capTolerance)
			// the largest k with prefix[k] ≤ lim
			lo, hi := 0, len(loads)
			for lo < hi {
				mid := (lo + hi + 1) / 2
				if prefix[mid] <= lim {
					lo = mid
				} else {
					hi = mid - 1
				}
			}
			most += lo
		}
		if most < n {
			return true, fmt.Sprintf("by %s, the active children can hold at most %d of the %d shards", p.Resources[r], most, n)
		}
	}
	if p.Groups != nil {
		cnt := make([]int, len(p.GroupLimit))
		for s, gs := range p.Groups {
			if counted[s] {
				for _, g := range gs {
					cnt[g]++
				}
			}
		}
		for g, k := range cnt {
			if k > int(p.GroupLimit[g])*active {
				name := fmt.Sprint(g)
				if p.GroupNames != nil {
					name = p.GroupNames[g]
				}
				return true, fmt.Sprintf("anti-affinity group %s has %d shards, more than %d per child × %d active children", name, k, p.GroupLimit[g], active)
			}
		}
	}
	if p.MaxMoves > 0 {
		must := 0
		for s := 0; s < N; s++ {
			c := p.Current[s]
			if !p.IsLocked(s) && (c < 0 || p.Drained(int(c)) || !p.AllowedOn(s, int(c))) {
				must++
			}
		}
		if must > p.MaxMoves {
			return true, fmt.Sprintf("%d shards must move and the move budget is %d", must, p.MaxMoves)
		}
	}
	return false, ""
}
