package packtier

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/tiers"
)

// Name is the name the policy is registered under; a tier selects it with
// "policy: {name: pack}".
const Name = "pack"

// Pack is the policy. It has no configuration.
type Pack struct{}

var _ interfaces.Policy = Pack{}

func init() {
	// One call makes the policy selectable by name in every tier's config.
	tiers.MustRegister(Name, func(cfg interfaces.PolicyConfig) (interfaces.Policy, error) {
		if len(cfg) > 0 {
			return nil, fmt.Errorf("policy %s takes no configuration: %w", Name, interfaces.ErrInvalid)
		}
		return Pack{}, nil
	})
}

// Name returns "pack".
func (Pack) Name() string { return Name }

// Plan packs every shard that is not in flight onto the first active children
// that have room and that its own constraints and the tier's (v.Constraints)
// allow, largest shards first. In-flight moves count as done: their load is on
// their target. It reads only the view: no clock, no global randomness, no I/O.
func (Pack) Plan(_ context.Context, v *interfaces.View) (interfaces.Plan, error) {
	plan := interfaces.Plan{Tier: v.Tier, Status: interfaces.StatusOK}
	owner := map[interfaces.ShardID]interfaces.Assignment{}
	for _, a := range v.Assignments {
		owner[a.Shard] = a
	}
	r := newRules(v)
	moving := map[interfaces.ShardID]interfaces.ChildID{}
	for _, m := range v.InFlight { // in-flight moves count as done
		moving[m.Shard] = m.To
	}
	used := map[interfaces.ChildID]interfaces.Load{}
	shards := make([]interfaces.Shard, 0, len(v.Shards))
	for _, s := range v.Shards {
		if to, ok := moving[s.ID]; ok {
			used[to] = used[to].Add(s.Load)
			r.place(s, to)
			continue
		}
		shards = append(shards, s)
	}
	sort.SliceStable(shards, func(i, j int) bool { return shards[i].Load.CPU > shards[j].Load.CPU })
	for _, s := range shards {
		from := owner[s.ID]
		placed := false
		excluded := map[interfaces.ChildID]string{}
		for i := range v.Children {
			c := &v.Children[i]
			if why := r.excludes(s, c); why != "" {
				excluded[c.ID] = why
				continue
			}
			if !used[c.ID].Add(s.Load).Fits(r.capacity[c.ID]) {
				excluded[c.ID] = "capacity"
				continue
			}
			used[c.ID] = used[c.ID].Add(s.Load)
			r.place(s, c.ID)
			placed = true
			if c.ID != from.Child {
				plan.Moves = append(plan.Moves, interfaces.Move{
					Shard: s.ID, From: from.Child, To: c.ID, Epoch: from.Epoch,
					Reason: fmt.Sprintf("pack: first child with room for %s", s.ID), Goal: "pack",
				})
			}
			break
		}
		if !placed {
			plan.Status = interfaces.StatusInfeasible
			plan.Infeasible = append(plan.Infeasible, interfaces.Infeasible{Shard: s.ID, Excluded: excluded})
		}
	}
	plan.Moves = order(v, r.capacity, plan.Moves)
	return plan, nil
}

// rules are the hard constraints pack keeps, as the tier checks them when it
// commits a plan: each shard's own (pin, allowed children, labels,
// anti-affinity group) and the tier's in v.Constraints (pin, allowed, capacity
// limits, anti-affinity). avoid is a preference and max_moves the tier's
// budget: pack leaves them to the tier.
type rules struct {
	capacity map[interfaces.ChildID]interfaces.Load // usable: capacity within the limits
	view     *interfaces.View
	tier     map[interfaces.ShardID][]int // indices in view.Constraints of the pin, allowed and anti-affinity rules naming the shard
	// groups counts the placed shards of each anti-affinity group per child:
	// "shard:<name>" for a shard's own group, "rule:<index>" for a tier rule.
	groups map[string]map[interfaces.ChildID]int
}

func newRules(v *interfaces.View) *rules {
	r := &rules{capacity: map[interfaces.ChildID]interfaces.Load{}, view: v, tier: map[interfaces.ShardID][]int{},
		groups: map[string]map[interfaces.ChildID]int{}}
	for _, c := range v.Children {
		r.capacity[c.ID] = c.Capacity
	}
	for i, k := range v.Constraints {
		switch k.Kind {
		case interfaces.ConstraintCapacity:
			for _, id := range k.Children {
				if c, ok := r.capacity[id]; ok {
					r.capacity[id] = withLimit(c, k.Limit)
				}
			}
		case interfaces.ConstraintPin, interfaces.ConstraintAllowed, interfaces.ConstraintAntiAffinity:
			for _, id := range k.Shards {
				if l := r.tier[id]; len(l) == 0 || l[len(l)-1] != i { // a shard listed twice counts once
					r.tier[id] = append(l, i)
				}
			}
		}
	}
	return r
}

// withLimit lowers c to limit in every dimension where limit is above zero.
func withLimit(c, limit interfaces.Load) interfaces.Load {
	for _, name := range interfaces.UnionNames(c, limit) {
		if l := limit.Get(name); l > 0 && l < c.Get(name) {
			c = c.With(name, l)
		}
	}
	return c
}

// excludes says why shard s may not go to child c, or "".
func (r *rules) excludes(s interfaces.Shard, c *interfaces.Child) string {
	if c.State != interfaces.ChildActive {
		return "child is " + c.State.String()
	}
	if why := s.Constraints.Excludes(c); why != "" {
		return why
	}
	if g := s.Constraints.AntiAffinity; g != "" && r.groups["shard:"+g][c.ID] >= max(s.Constraints.MaxPerChild, 1) {
		return "anti-affinity group " + g + " is full on this child"
	}
	for _, i := range r.tier[s.ID] {
		k := &r.view.Constraints[i]
		switch {
		case k.Kind == interfaces.ConstraintPin && len(k.Children) > 0 && k.Children[0] != c.ID:
			return "pinned to " + string(k.Children[0]) + " by the tier"
		case k.Kind == interfaces.ConstraintAllowed && !slices.Contains(k.Children, c.ID):
			return "not among the children the tier allows"
		case k.Kind == interfaces.ConstraintAntiAffinity && r.groups[ruleKey(i)][c.ID] >= max(k.Max, 1):
			return "the tier's anti-affinity rule is full on this child"
		}
	}
	return ""
}

// place counts shard s on child c in its anti-affinity groups.
func (r *rules) place(s interfaces.Shard, c interfaces.ChildID) {
	count := func(key string) {
		if r.groups[key] == nil {
			r.groups[key] = map[interfaces.ChildID]int{}
		}
		r.groups[key][c]++
	}
	if g := s.Constraints.AntiAffinity; g != "" {
		count("shard:" + g)
	}
	for _, i := range r.tier[s.ID] {
		if r.view.Constraints[i].Kind == interfaces.ConstraintAntiAffinity {
			count(ruleKey(i))
		}
	}
}

func ruleKey(i int) string { return "rule:" + strconv.Itoa(i) }

// order puts the moves in an order the tier can carry out one by one: the tier
// verifies (and commits) moves in plan order, so a move into a child must come
// after the moves that make room on it. A move whose target never gets room
// within this plan stays at the end; the tier rejects it with the reason and a
// later round tries again. capacity is each child's usable capacity.
func order(v *interfaces.View, capacity map[interfaces.ChildID]interfaces.Load, moves []interfaces.Move) []interfaces.Move {
	load := map[interfaces.ShardID]interfaces.Load{}
	for _, s := range v.Shards {
		load[s.ID] = s.Load
	}
	on := map[interfaces.ShardID]interfaces.ChildID{}
	for _, a := range v.Assignments {
		on[a.Shard] = a.Child
	}
	for _, m := range v.InFlight { // counted on their targets, as the tier does
		on[m.Shard] = m.To
	}
	used := map[interfaces.ChildID]interfaces.Load{}
	for _, s := range v.Shards { // in view order: the sums do not depend on map order
		if c := on[s.ID]; c != "" {
			used[c] = used[c].Add(s.Load)
		}
	}
	out := make([]interfaces.Move, 0, len(moves))
	left := append([]interfaces.Move(nil), moves...)
	for len(left) > 0 {
		progressed := false
		rest := left[:0]
		for _, m := range left {
			if used[m.To].Add(load[m.Shard]).Fits(capacity[m.To]) {
				used[m.To] = used[m.To].Add(load[m.Shard])
				if m.From != "" {
					used[m.From] = used[m.From].Sub(load[m.Shard])
				}
				out = append(out, m)
				progressed = true
				continue
			}
			rest = append(rest, m)
		}
		left = rest
		if !progressed {
			return append(out, left...)
		}
	}
	return out
}
