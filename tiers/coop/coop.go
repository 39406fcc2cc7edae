package coop

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// Config tunes cooperation. The zero value of a field takes its default.
type Config struct {
	// Target is the utilization (0..1] a tier instance keeps each of its
	// children under; usable headroom and shed requests are measured against
	// it. Default 0.8.
	Target float64
	// MaxShards bounds the shards one hint or derived rule names, and the
	// shards of one proposed constraint the parent accepts. Default 64.
	MaxShards int
	// Hold is how long the parent keeps a shed shard away from the child that
	// shed it. Default 10 minutes.
	Hold time.Duration
	// BudgetFraction and MinBudget set the move budget a parent sends a child:
	// ⌈BudgetFraction × the child's shards⌉, at least MinBudget. Defaults 0.25
	// and 4.
	BudgetFraction float64
	MinBudget      int
}

// Defaults of Config.
const (
	DefaultTarget         = 0.8
	DefaultMaxShards      = 64
	DefaultHold           = 10 * time.Minute
	DefaultBudgetFraction = 0.25
	DefaultMinBudget      = 4
)

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.Target == 0 {
		c.Target = DefaultTarget
	}
	if c.MaxShards == 0 {
		c.MaxShards = DefaultMaxShards
	}
	if c.Hold == 0 {
		c.Hold = DefaultHold
	}
	if c.BudgetFraction == 0 {
		c.BudgetFraction = DefaultBudgetFraction
	}
	if c.MinBudget == 0 {
		c.MinBudget = DefaultMinBudget
	}
	return c
}

// Validate checks c (before defaults) and names the field and the rule broken.
func (c Config) Validate() error {
	switch {
	case math.IsNaN(c.Target) || c.Target < 0 || c.Target > 1:
		return &interfaces.FieldError{Field: "coop.target", Rule: "must be in (0, 1] (0 = default 0.8)", Value: fmt.Sprint(c.Target)}
	case c.MaxShards < 0:
		return &interfaces.FieldError{Field: "coop.max_shards", Rule: "must be ≥ 0 (0 = default 64)", Value: fmt.Sprint(c.MaxShards)}
	case c.Hold < 0:
		return &interfaces.FieldError{Field: "coop.hold", Rule: "must be ≥ 0 (0 = default 10m)", Value: c.Hold.String()}
	case math.IsNaN(c.BudgetFraction) || c.BudgetFraction < 0 || c.BudgetFraction > 1:
		return &interfaces.FieldError{Field: "coop.budget_fraction", Rule: "must be in [0, 1] (0 = default 0.25)", Value: fmt.Sprint(c.BudgetFraction)}
	case c.MinBudget < 0:
		return &interfaces.FieldError{Field: "coop.min_budget", Rule: "must be ≥ 0 (0 = default 4)", Value: fmt.Sprint(c.MinBudget)}
	}
	return nil
}

// state is a tier instance's projected placement: each shard's owner with
// in-flight moves counted as done, and each child's load and anti-affinity
// group counts. It is changed only by the functions of this package, on
// copies.
type state struct {
	v        *interfaces.View
	childIdx map[interfaces.ChildID]int
	shardIdx map[interfaces.ShardID]int
	owner    []int // child index, -1 unplaced
	inFlight []bool
	load     []interfaces.Load
	group    map[string][]int // anti-affinity group → shards per child
	res      []interfaces.Resource
	rules    map[int][]int // shard index → indexes of the view's pin and allowed constraints naming it
}

func project(v *interfaces.View) *state {
	st := &state{
		v:        v,
		childIdx: make(map[interfaces.ChildID]int, len(v.Children)),
		owner:    make([]int, len(v.Shards)),
		inFlight: make([]bool, len(v.Shards)),
		load:     make([]interfaces.Load, len(v.Children)),
		group:    map[string][]int{},
	}
	caps := make([]interfaces.Load, 0, len(v.Children))
	for i, c := range v.Children {
		st.childIdx[c.ID] = i
		caps = append(caps, c.Capacity)
	}
	st.res = interfaces.UnionNames(caps...)
	st.shardIdx = make(map[interfaces.ShardID]int, len(v.Shards))
	shardIdx := st.shardIdx
	for i, s := range v.Shards {
		shardIdx[s.ID] = i
		st.owner[i] = -1
	}
	for k, c := range v.Constraints {
		if c.Kind != interfaces.ConstraintPin && c.Kind != interfaces.ConstraintAllowed {
			continue
		}
		for _, id := range c.Shards {
			if i, ok := shardIdx[id]; ok {
				if st.rules == nil {
					st.rules = map[int][]int{}
				}
				st.rules[i] = append(st.rules[i], k)
			}
		}
	}
	for _, a := range v.Assignments {
		if i, ok := shardIdx[a.Shard]; ok {
			if c, ok := st.childIdx[a.Child]; ok {
				st.owner[i] = c
			}
		}
	}
	for _, m := range v.InFlight {
		if i, ok := shardIdx[m.Shard]; ok {
			st.inFlight[i] = true
			if c, ok := st.childIdx[m.To]; ok {
				st.owner[i] = c
			}
		}
	}
	for i := range v.Shards {
		if c := st.owner[i]; c >= 0 {
			st.add(i, c, 1)
		}
	}
	return st
}

func (st *state) add(i, c int, sign int) {
	s := &st.v.Shards[i]
	if sign > 0 {
		st.load[c] = st.load[c].Add(s.Load)
	} else {
		st.load[c] = st.load[c].Sub(s.Load)
	}
	if g := s.Constraints.AntiAffinity; g != "" {
		cnt := st.group[g]
		if cnt == nil {
			cnt = make([]int, len(st.v.Children))
			st.group[g] = cnt
		}
		cnt[c] += sign
	}
}

func (st *state) active(c int) bool { return st.v.Children[c].State == interfaces.ChildActive }

// admits says whether shard i may live on child c by its own rules and the
// view's pin and allowed constraints (not capacity); "" means yes, otherwise
// the rule that excludes it. counted says whether the anti-affinity count
// already includes shard i on c.
func (st *state) admits(i, c int, counted bool) string {
	s := &st.v.Shards[i]
	ch := &st.v.Children[c]
	if ch.State != interfaces.ChildActive {
		return "child is " + ch.State.String()
	}
	sc := &s.Constraints
	if why := sc.Excludes(ch); why != "" {
		return why
	}
	if g := sc.AntiAffinity; g != "" {
		limit := max(sc.MaxPerChild, 1)
		n := 0
		if cnt := st.group[g]; cnt != nil {
			n = cnt[c]
		}
		if counted {
			n--
		}
		if n >= limit {
			return fmt.Sprintf("anti-affinity group %s full (%d per child)", g, limit)
		}
	}
	for _, x := range st.rules[i] {
		k := &st.v.Constraints[x]
		switch k.Kind {
		case interfaces.ConstraintPin:
			if len(k.Children) > 0 && k.Children[0] != ch.ID {
				return "pinned to " + string(k.Children[0]) + " by a constraint"
			}
		case interfaces.ConstraintAllowed:
			if !slices.Contains(k.Children, ch.ID) {
				return "not allowed by a constraint"
			}
		}
	}
	return ""
}

// fits says whether load l fits on child c below limit (a per-resource
// capacity vector); only resources the child has capacity for count, and
// resources it lacks reject any demand.
func (st *state) fits(c int, l, limit interfaces.Load) bool {
	for _, r := range st.res {
		if x := l.Get(r); x > 0 && st.load[c].Get(r)+x > limit.Get(r)+1e-9 {
			return false
		}
	}
	return true
}

// ChildHints derives the hints a tier instance sends its parent from its own
// view v (its children, the shards its parent gave it, their placement, and the
// children's reports). See the package documentation for what each hint means.
// The result is deterministic for the same view and config; an invalid config
// is an error naming the field.
func ChildHints(v *interfaces.View, cfg Config) ([]interfaces.Hint, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if v == nil {
		return nil, &interfaces.FieldError{Field: "view", Rule: "is required"}
	}
	cfg = cfg.WithDefaults()
	st := project(v)
	n := len(v.Children)
	target := make([]interfaces.Load, n)
	for c, ch := range v.Children {
		target[c] = ch.Capacity.Scale(cfg.Target)
	}
	order := make([]int, n)
	for c := range order {
		order[c] = c
	}
	sort.Slice(order, func(a, b int) bool { return v.Children[order[a]].ID < v.Children[order[b]].ID })

	var hints []interfaces.Hint

	// Shards the instance holds but cannot place on any child — no child's
	// rules admit them, or they are larger than every child that does — are
	// proposed to be kept elsewhere. Capacity counts here: a shard larger than
	// every host of a region is admitted by every host's rules, and without
	// this it would be named by no hint and run nowhere (issue 24). Unplaced
	// shards that would fit a child but find no room on any now are shed (the
	// parent may place them elsewhere) without a proposal: the instance could
	// hold them once load moves.
	var orphans, roomless []interfaces.ShardID
	orphanWhy, roomWhy := "", ""
	var orphanLoad, roomLoad interfaces.Load
	for i := range v.Shards {
		if len(orphans)+len(roomless) >= cfg.MaxShards {
			break
		}
		if st.owner[i] >= 0 {
			continue
		}
		s := &v.Shards[i]
		why, tooBig := "", ""
		admitted, room := false, false
		for _, c := range order {
			if w := st.admits(i, c, false); w != "" {
				if why == "" {
					why = w
				}
				continue
			}
			if x := st.exceeds(s.Load, v.Children[c].Capacity); x != "" {
				if tooBig == "" {
					tooBig = x
				}
				continue
			}
			admitted = true
			if st.fits(c, s.Load, v.Children[c].Capacity) {
				room = true
				break
			}
		}
		switch {
		case room:
		case admitted:
			roomless = append(roomless, s.ID)
			roomLoad = roomLoad.Add(s.Load)
			if roomWhy == "" {
				roomWhy = fmt.Sprintf("%s: no room on any child that admits it", s.ID)
			}
		default:
			orphans = append(orphans, s.ID)
			orphanLoad = orphanLoad.Add(s.Load)
			if orphanWhy == "" {
				orphanWhy = why
				if tooBig != "" {
					orphanWhy = "larger than every child that admits it (" + tooBig + ")"
				}
			}
		}
	}
	if len(orphans) > 0 {
		slices.Sort(orphans)
		reason := fmt.Sprintf("%s cannot place %d shards on any of its children (e.g. %s: %s)", v.Instance, len(orphans), orphans[0], orphanWhy)
		hints = append(hints, interfaces.Hint{Kind: interfaces.HintConstraint, Shards: orphans, Reason: reason,
			Constraint: &interfaces.Constraint{Kind: interfaces.ConstraintAvoid, Shards: orphans, Children: []interfaces.ChildID{interfaces.ChildID(v.Instance)}, Reason: reason}})
	}

	// Children above target: move their excess to other children below target
	// where the shards' rules allow (the instance will do that itself); what
	// cannot move is a shed request.
	// Shards it cannot place are load it cannot keep below target either: they
	// open the shed request.
	var shed []interfaces.ShardID
	var shedLoad interfaces.Load
	var hot []string
	shedWhy := ""
	if len(orphans) > 0 {
		shed = append(shed, orphans...)
		shedLoad = orphanLoad
		hot = append(hot, "none of its children (unplaceable)")
		shedWhy = fmt.Sprintf("%s: %s", orphans[0], orphanWhy)
	}
	if len(roomless) > 0 {
		shed = append(shed, roomless...)
		shedLoad = shedLoad.Add(roomLoad)
		hot = append(hot, "none of its children (no room)")
		if shedWhy == "" {
			shedWhy = roomWhy
		}
	}
	// Each child's shards, in index order (shards moved to a child are
	// appended as they move).
	on := make([][]int, len(v.Children))
	for i, o := range st.owner {
		if o >= 0 {
			on[o] = append(on[o], i)
		}
	}
	moved := map[int]bool{}
	for _, c := range order {
		if !st.active(c) {
			continue
		}
		excess := st.load[c].Sub(target[c]).Max(interfaces.Load{})
		if excess.IsZero() {
			continue
		}
		var onC []int
		for _, i := range on[c] {
			if st.owner[i] == c && !st.inFlight[i] {
				onC = append(onC, i)
			}
		}
		sort.SliceStable(onC, func(a, b int) bool {
			da, db := st.share(onC[a], c), st.share(onC[b], c)
			if da != db {
				return da > db
			}
			return v.Shards[onC[a]].ID < v.Shards[onC[b]].ID
		})
		var covered interfaces.Load
		shedHere := 0
		for _, i := range onC {
			if covers(covered, excess) {
				break
			}
			s := &v.Shards[i]
			if s.Constraints.Pinned == v.Children[c].ID {
				continue // pinned here: neither movable nor sheddable
			}
			best, bestU, why := -1, math.Inf(1), ""
			for _, d := range order {
				if d == c {
					continue
				}
				if w := st.admits(i, d, false); w != "" {
					if why == "" {
						why = w
					}
					continue
				}
				if !st.fits(d, s.Load, target[d]) {
					if why == "" {
						why = "no room below target"
					}
					continue
				}
				if u := st.utilAfter(d, s.Load); u < bestU {
					best, bestU = d, u
				}
			}
			covered = covered.Add(s.Load)
			st.add(i, c, -1)
			if best >= 0 {
				st.add(i, best, 1)
				st.owner[i] = best
				on[best] = append(on[best], i)
				moved[i] = true
				continue
			}
			st.owner[i] = -1
			if len(shed) < cfg.MaxShards {
				shed = append(shed, s.ID)
				shedLoad = shedLoad.Add(s.Load)
				shedHere++
				if shedWhy == "" {
					shedWhy = fmt.Sprintf("%s: %s", s.ID, why)
				}
			}
		}
		if shedHere > 0 {
			hot = append(hot, string(v.Children[c].ID))
		}
	}
	if len(shed) > 0 {
		hints = append(hints, interfaces.Hint{Kind: interfaces.HintShed, Amount: shedLoad, Shards: shed,
			Reason: fmt.Sprintf("%d shards (%s) above the %.0f%% target on %s that no other child of %s can take (e.g. %s)",
				len(shed), FormatLoad(shedLoad), 100*cfg.Target, strings.Join(hot, ", "), v.Instance, shedWhy)})
	}

	// Usable headroom: room below target, child by child, after the moves above.
	var usable, spare interfaces.Load
	live := 0
	for c, ch := range v.Children {
		if !st.active(c) {
			continue
		}
		live++
		usable = usable.Add(target[c].Sub(st.load[c]).Max(interfaces.Load{}))
		spare = spare.Add(ch.Capacity.Sub(st.load[c]).Max(interfaces.Load{}))
	}
	hints = append(hints, interfaces.Hint{Kind: interfaces.HintHeadroom, Amount: usable,
		Reason: fmt.Sprintf("room below the %.0f%% target on %d active children of %s: %s (spare capacity %s)", 100*cfg.Target, live, v.Instance, FormatLoad(usable), FormatLoad(spare))})

	// SLO at risk: shards that stay on a child whose measured p99 exceeds their SLO.
	for _, c := range order {
		rep, ok := v.Reports[v.Children[c].ID]
		if !ok || rep.LatencyP99 <= 0 || !st.active(c) {
			continue
		}
		var risk []interfaces.ShardID
		var worst time.Duration
		for _, i := range on[c] {
			s := &v.Shards[i]
			if len(risk) >= cfg.MaxShards {
				break
			}
			if st.owner[i] != c || moved[i] || s.LatencySLO <= 0 || s.LatencySLO >= rep.LatencyP99 {
				continue
			}
			risk = append(risk, s.ID)
			if worst == 0 || s.LatencySLO < worst {
				worst = s.LatencySLO
			}
		}
		if len(risk) > 0 {
			slices.Sort(risk)
			hints = append(hints, interfaces.Hint{Kind: interfaces.HintSLOAtRisk, Shards: risk,
				Reason: fmt.Sprintf("p99 %v on %s exceeds the SLO of %d shards (tightest %v)", rep.LatencyP99, v.Children[c].ID, len(risk), worst)})
		}
	}
	return hints, nil
}

// exceeds names the first resource in which load l is larger than capacity
// (a resource the child lacks counts as capacity 0), e.g. "cpu 9.6 > 8", or ""
// when l fits in an empty child of that capacity.
func (st *state) exceeds(l, capacity interfaces.Load) string {
	for _, r := range st.res {
		if x, cp := l.Get(r), capacity.Get(r); x > cp+1e-9 {
			return fmt.Sprintf("%s %.3g > %.3g", r, x, cp)
		}
	}
	return ""
}

// share is shard i's dominant share of child c's capacity.
func (st *state) share(i, c int) float64 {
	best := 0.0
	capacity := st.v.Children[c].Capacity
	for _, r := range st.res {
		if cp := capacity.Get(r); cp > 0 {
			best = math.Max(best, st.v.Shards[i].Load.Get(r)/cp)
		}
	}
	return best
}

// utilAfter is child c's largest utilization with l added.
func (st *state) utilAfter(c int, l interfaces.Load) float64 {
	best := 0.0
	capacity := st.v.Children[c].Capacity
	for _, r := range st.res {
		if cp := capacity.Get(r); cp > 0 {
			best = math.Max(best, (st.load[c].Get(r)+l.Get(r))/cp)
		}
	}
	return best
}

// covers says whether covered reaches excess in every dimension where excess
// is positive.
func covers(covered, excess interfaces.Load) bool {
	for _, r := range interfaces.UnionNames(excess) {
		if x := excess.Get(r); x > 0 && covered.Get(r) < x-1e-12 {
			return false
		}
	}
	return true
}

// FormatLoad prints the non-zero dimensions of a load compactly, for reasons.
func FormatLoad(l interfaces.Load) string {
	var parts []string
	for _, r := range interfaces.UnionNames(l) {
		x := l.Get(r)
		if x == 0 {
			continue
		}
		switch {
		case r == interfaces.Mem || r == interfaces.Net:
			parts = append(parts, fmt.Sprintf("%s %s", r, human(x)))
		default:
			parts = append(parts, fmt.Sprintf("%s %.3g", r, x))
		}
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

func human(x float64) string {
	const unit = 1024.0
	if math.Abs(x) < unit {
		return fmt.Sprintf("%.3g", x)
	}
	exp := 0
	for math.Abs(x) >= unit && exp < 5 {
		x /= unit
		exp++
	}
	return fmt.Sprintf("%.3g%ci", x, "KMGTP"[exp-1])
}
