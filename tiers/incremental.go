package tiers

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/interfaces"
)

// IncrementalPolicy is a tier policy that keeps its solver state between
// rounds and is fed what changed, so that a steady-state round costs in
// proportion to the changes rather than to every shard (balancer.Incremental
// does the planning). It is an optional power, found by type assertion: a
// tier that tracks its changes calls Observe then Round; any other caller
// keeps calling Plan with a whole view, which the policy diffs against its
// state (O(shards) to read, but the solve still only looks at what changed).
//
// Every FullEvery-th round is a full solve instead (the local solver over the
// whole state, the sums recomputed): the guard against drift.
type IncrementalPolicy interface {
	interfaces.Policy
	// Observe records changes since the last round; nothing is planned.
	Observe(ch Changes) error
	// Round plans from the state kept and applies the plan to it (its
	// moves count as done; a tier that fails to carry one out says so with
	// Observe(Changes{Assigned: ...})). seed seeds a full solve.
	Round(ctx context.Context, seed int64) (interfaces.Plan, error)
}

// Changes is what changed at a tier since its last round.
type Changes struct {
	// Children added or changed (capacity, state), and their capacity
	// shape when they are aggregates (regions): by ID.
	Children []interfaces.Child
	Shapes   map[interfaces.ChildID]CapacityShape
	// Added shards, unplaced unless Assigned says otherwise; Removed shards;
	// Loads: shards whose measured load changed (recorded only past the
	// policy's load_threshold).
	Added   []interfaces.Shard
	Removed []interfaces.ShardID
	Loads   []ShardLoad
	// Assigned are owners set outside the policy's rounds (Child "" =
	// unplaced): a move that failed, an operator's.
	Assigned []interfaces.Assignment
}

// ShardLoad is one shard's measured load.
type ShardLoad struct {
	Shard interfaces.ShardID
	Load  interfaces.Load
}

// CapacityShape is what a region tells its parent about its capacity beyond
// the sum, so the parent knows where a shard can fit: its host count, its
// largest host, the most free capacity one host has, and per resource a
// histogram of its hosts' free capacity (ShapeBuckets buckets of equal width
// over [0, Largest]; the last holds the hosts with all of Largest free).
//
// NOTE for the merge: the objectives work (branch objectives24) defines a
// region capacity shape in interfaces/ for the fair decoupled baseline; this
// type and that one are meant to become one.
type CapacityShape struct {
	Hosts       int
	Largest     interfaces.Load
	LargestFree interfaces.Load
	// FreeHistogram[r][b] counts the hosts whose free capacity of resource r
	// is in bucket b.
	FreeHistogram map[interfaces.Resource][]int
}

// ShapeBuckets is the number of buckets of a CapacityShape's histograms.
const ShapeBuckets = 8

// incResources are the resources an incremental policy balances.
var incResources = []interfaces.Resource{interfaces.CPU, interfaces.Mem, interfaces.Net, interfaces.Tasks}

// ShapeOf computes the capacity shape of hosts, used[i] being what host i
// carries (nil = nothing). Hosts that are not active are left out.
func ShapeOf(hosts []interfaces.Child, used []interfaces.Load) CapacityShape {
	var sh CapacityShape
	free := make([]interfaces.Load, 0, len(hosts))
	for i, h := range hosts {
		if h.State != interfaces.ChildActive {
			continue
		}
		sh.Hosts++
		f := h.Capacity
		if used != nil {
			u := used[i]
			f = interfaces.Load{CPU: max(0, f.CPU-u.CPU), Mem: max(0, f.Mem-u.Mem), Net: max(0, f.Net-u.Net), Tasks: max(0, f.Tasks-u.Tasks)}
		}
		free = append(free, f)
		for _, r := range incResources {
			sh.Largest = sh.Largest.With(r, math.Max(sh.Largest.Get(r), h.Capacity.Get(r)))
			sh.LargestFree = sh.LargestFree.With(r, math.Max(sh.LargestFree.Get(r), f.Get(r)))
		}
	}
	sh.FreeHistogram = make(map[interfaces.Resource][]int, len(incResources))
	for _, r := range incResources {
		hist := make([]int, ShapeBuckets)
		top := sh.Largest.Get(r)
		for _, f := range free {
			b := ShapeBuckets - 1
			if top > 0 {
				b = min(ShapeBuckets-1, int(f.Get(r)/top*ShapeBuckets))
			}
			hist[b]++
		}
		sh.FreeHistogram[r] = hist
	}
	return sh
}

// incrementalKeys documents the configuration keys of the incremental policy.
var incrementalKeys = map[string]string{
	"tolerance":          "utilization a child may carry above the mean, as a fraction of it, before it sheds (default 0.01)",
	"load_threshold":     "relative change of a shard's load below which a measurement is not recorded (default 0.05; 0 records every change)",
	"full_every":         "every n-th round is a full solve with the local solver, the guard against drift (default 100; 0 = never)",
	"largest_first":      "place unplaced shards largest first (true/false; default true)",
	"candidates":         "the full solve's local solver: coldest children tried per shard (0 = 8)",
	"target_max_over_lb": "the full solve's local solver: stop improving at this max/LB (0 = none, else ≥ 1)",
}

// Incremental is the built-in IncrementalPolicy ("incremental").
type Incremental struct {
	name      string
	x         *balancer.Incremental
	threshold float64
	fullEvery int
	full      balancer.Options
	rounds    int

	childIdx map[interfaces.ChildID]int32
	children []interfaces.Child
	shardIdx map[interfaces.ShardID]int32
	shards   []interfaces.ShardID
	epoch    []interfaces.Epoch
	buf      []balancer.IncMove
}

var _ IncrementalPolicy = (*Incremental)(nil)

// NewIncremental returns the incremental policy configured by cfg (keys:
// tolerance, load_threshold, full_every, largest_first, candidates).
func NewIncremental(cfg interfaces.PolicyConfig) (*Incremental, error) {
	p := &Incremental{name: "incremental", x: balancer.NewIncremental(len(incResources)), threshold: 0.05, fullEvery: 100,
		childIdx: map[interfaces.ChildID]int32{}, shardIdx: map[interfaces.ShardID]int32{}}
	p.x.LargestFirst = true
	keys := make([]string, 0, len(cfg))
	for k := range cfg {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := cfg[k]
		var err error
		switch k {
		case "tolerance":
			p.x.Tolerance, err = strconv.ParseFloat(v, 64)
			if err == nil && !(p.x.Tolerance > 0 && p.x.Tolerance < 1) {
				err = fmt.Errorf("must be in (0, 1)")
			}
		case "load_threshold":
			p.threshold, err = strconv.ParseFloat(v, 64)
			if err == nil && !(p.threshold >= 0 && p.threshold < 1) {
				err = fmt.Errorf("must be in [0, 1)")
			}
		case "full_every":
			p.fullEvery, err = nonNegInt(v)
		case "largest_first":
			p.x.LargestFirst, err = strconv.ParseBool(v)
		case "candidates":
			p.full.Candidates, err = nonNegInt(v)
		case "target_max_over_lb":
			p.full.TargetMaxOverLB, err = strconv.ParseFloat(v, 64)
			if err == nil && !balancer.ValidTargetMaxOverLB(p.full.TargetMaxOverLB) {
				err = errors.New(balancer.TargetMaxOverLBRule)
			}
		default:
			known := make([]string, 0, len(incrementalKeys))
			for k := range incrementalKeys {
				known = append(known, k)
			}
			sort.Strings(known)
			return nil, fmt.Errorf("policy incremental: unknown key %q (known: %s): %w", k, strings.Join(known, ", "), interfaces.ErrInvalid)
		}
		if err != nil {
			return nil, fmt.Errorf("policy incremental: key %q: %v (got %q): %w", k, err, v, interfaces.ErrInvalid)
		}
	}
	return p, nil
}

// ShapeReporter is a policy that can say what capacity shape its children
// leave (a region's, for its parent): the incremental policy does, from the
// loads it keeps.
type ShapeReporter interface {
	Shape() CapacityShape
}

var _ ShapeReporter = (*Incremental)(nil)

// Shape is the capacity shape of the children with the loads kept.
func (p *Incremental) Shape() CapacityShape {
	used := make([]interfaces.Load, len(p.children))
	for i := range p.children {
		l := p.x.ChildLoad(int32(i))
		used[i] = interfaces.Load{CPU: l[0], Mem: l[1], Net: l[2], Tasks: l[3]}
	}
	return ShapeOf(p.children, used)
}

// Name returns "incremental".
func (p *Incremental) Name() string { return p.name }

func loadVec(l interfaces.Load, dst []float64) []float64 {
	return append(dst[:0], l.CPU, l.Mem, l.Net, l.Tasks)
}

func incState(st interfaces.ChildState) balancer.IncChildState {
	switch st {
	case interfaces.ChildDraining:
		return balancer.IncDraining
	case interfaces.ChildFailed:
		return balancer.IncFailed
	}
	return balancer.IncActive
}

// Observe records ch. Bad input is refused before anything of it is applied
// (an unknown shard or child, a load with extra dimensions).
func (p *Incremental) Observe(ch Changes) error {
	if err := p.check(ch); err != nil {
		return err
	}
	var vec [4]float64
	for _, c := range ch.Children {
		i, ok := p.childIdx[c.ID]
		if !ok {
			var err error
			if i, err = p.x.AddChild(loadVec(c.Capacity, vec[:0])); err != nil {
				return fmt.Errorf("children: %s: %w", c.ID, err)
			}
			p.childIdx[c.ID] = i
			p.children = append(p.children, c)
		} else {
			if err := p.x.SetCapacity(i, loadVec(c.Capacity, vec[:0])); err != nil {
				return fmt.Errorf("children: %s: %w", c.ID, err)
			}
			p.children[i] = c
		}
		if err := p.x.SetState(i, incState(c.State)); err != nil {
			return fmt.Errorf("children: %s: %w", c.ID, err)
		}
		// An aggregate child (a region) bounds what one shard can take
		// by its shape; a leaf's capacity bounds it.
		if sh, ok := ch.Shapes[c.ID]; ok {
			if err := p.x.SetFree(i, loadVec(sh.LargestFree, vec[:0])); err != nil {
				return fmt.Errorf("shapes: %s: %w", c.ID, err)
			}
		}
	}
	for _, s := range ch.Added {
		i, err := p.x.AddShard(loadVec(s.Load, vec[:0]), -1)
		if err != nil {
			return fmt.Errorf("added: %s: %w", s.ID, err)
		}
		p.shardIdx[s.ID] = i
		p.shards = append(p.shards, s.ID)
		p.epoch = append(p.epoch, 0)
	}
	for _, id := range ch.Removed {
		if err := p.x.RemoveShard(p.shardIdx[id]); err != nil {
			return fmt.Errorf("removed: %s: %w", id, err)
		}
		delete(p.shardIdx, id)
	}
	for _, l := range ch.Loads {
		i := p.shardIdx[l.Shard]
		v := loadVec(l.Load, vec[:0])
		if p.moved(p.x.Load(i), v) {
			if err := p.x.SetLoad(i, v); err != nil {
				return fmt.Errorf("loads: %s: %w", l.Shard, err)
			}
		}
	}
	for _, a := range ch.Assigned {
		i := p.shardIdx[a.Shard]
		c := int32(-1)
		if a.Child != "" {
			c = p.childIdx[a.Child]
		}
		if err := p.x.Assign(i, c); err != nil {
			return fmt.Errorf("assigned: %s: %w", a.Shard, err)
		}
		p.epoch[i] = a.Epoch
	}
	return nil
}

// check refuses changes that name what the policy does not know, before any
// is applied.
func (p *Incremental) check(ch Changes) error {
	seen := map[interfaces.ChildID]bool{}
	for i, c := range ch.Children {
		if len(c.Capacity.Extra) > 0 {
			return fmt.Errorf("children[%d] (%s): capacity: extra dimensions are not balanced by the incremental policy: %w", i, c.ID, interfaces.ErrInvalid)
		}
		seen[c.ID] = true
	}
	added := map[interfaces.ShardID]bool{}
	for i, s := range ch.Added {
		if _, dup := p.shardIdx[s.ID]; dup || added[s.ID] {
			return fmt.Errorf("added[%d]: shard %s: already known: %w", i, s.ID, interfaces.ErrInvalid)
		}
		if len(s.Load.Extra) > 0 {
			return fmt.Errorf("added[%d] (%s): load: extra dimensions are not balanced by the incremental policy: %w", i, s.ID, interfaces.ErrInvalid)
		}
		added[s.ID] = true
	}
	known := func(id interfaces.ShardID) bool {
		_, ok := p.shardIdx[id]
		return ok || added[id]
	}
	for i, id := range ch.Removed {
		if _, ok := p.shardIdx[id]; !ok {
			return fmt.Errorf("removed[%d]: shard %s: %w", i, id, interfaces.ErrNotFound)
		}
	}
	for i, l := range ch.Loads {
		if !known(l.Shard) {
			return fmt.Errorf("loads[%d]: shard %s: %w", i, l.Shard, interfaces.ErrNotFound)
		}
		if len(l.Load.Extra) > 0 {
			return fmt.Errorf("loads[%d] (%s): extra dimensions are not balanced by the incremental policy: %w", i, l.Shard, interfaces.ErrInvalid)
		}
	}
	for i, a := range ch.Assigned {
		if !known(a.Shard) {
			return fmt.Errorf("assigned[%d]: shard %s: %w", i, a.Shard, interfaces.ErrNotFound)
		}
		if _, ok := p.childIdx[a.Child]; a.Child != "" && !ok && !seen[a.Child] {
			return fmt.Errorf("assigned[%d]: child %s: %w", i, a.Child, interfaces.ErrNotFound)
		}
	}
	return nil
}

// moved reports whether load b differs from a by more than the threshold in
// some resource (relative to a; any change from 0).
func (p *Incremental) moved(a, b []float64) bool {
	for k := range a {
		if d := math.Abs(b[k] - a[k]); d > p.threshold*a[k] || (a[k] == 0 && b[k] != 0) {
			return true
		}
	}
	return false
}

// Round plans from the state and applies the plan to it.
func (p *Incremental) Round(ctx context.Context, seed int64) (interfaces.Plan, error) {
	p.rounds++
	if p.fullEvery > 0 && p.rounds%p.fullEvery == 0 {
		return p.fullSolve(ctx, seed)
	}
	moves, unplaced := p.x.Round(p.buf[:0])
	p.buf = moves[:0]
	plan := interfaces.Plan{Status: interfaces.StatusOK, Moves: make([]interfaces.Move, 0, len(moves))}
	for _, m := range moves {
		plan.Moves = append(plan.Moves, p.explain(m))
		p.epoch[m.Shard]++
	}
	for _, s := range unplaced {
		plan.Infeasible = append(plan.Infeasible, interfaces.Infeasible{Shard: p.shards[s], Excluded: map[interfaces.ChildID]string{"*": "no active child has room for it (largest free capacity, capacity)"}})
	}
	if len(unplaced) > 0 {
		plan.Status = interfaces.StatusPartial
	}
	return plan, nil
}

// explain turns a move into the contract's, with its reason.
func (p *Incremental) explain(m balancer.IncMove) interfaces.Move {
	mv := interfaces.Move{Shard: p.shards[m.Shard], To: p.children[m.To].ID, Epoch: p.epoch[m.Shard]}
	if m.From >= 0 {
		mv.From = p.children[m.From].ID
	}
	switch m.Kind {
	case balancer.IncPlace:
		mv.Goal = "place"
		mv.Reason = fmt.Sprintf("place: least utilized child it fits (%.3f after)", m.After)
	case balancer.IncEvacuate:
		mv.Goal = "drain"
		mv.Reason = fmt.Sprintf("evacuate %s (%s): least utilized child it fits (%.3f after)", mv.From, p.children[m.From].State, m.After)
	default:
		r := incResources[m.Resource]
		mv.Goal = "balance_" + string(r)
		mv.Reason = fmt.Sprintf("rebalance %s: %s at %.3f, above the limit %.3f (mean + tolerance); %s %.3f after", r, mv.From, m.Before, m.Limit, mv.To, m.After)
		mv.Delta = m.After - m.Before
	}
	return mv
}

// fullSolve runs the local solver over the whole state and adopts its plan.
func (p *Incremental) fullSolve(ctx context.Context, seed int64) (interfaces.Plan, error) {
	p.x.Resync()
	prob := p.problem()
	o := p.full
	o.Seed = uint64(seed)
	if ctx.Done() != nil {
		o.Deadline = func() bool { return ctx.Err() != nil }
	}
	res, err := balancer.Solve("local", prob, o)
	if err != nil {
		return interfaces.Plan{}, err
	}
	plan := res.Plan("")
	for _, m := range plan.Moves {
		i := p.shardIdx[m.Shard]
		if err := p.x.Assign(i, p.childIdx[m.To]); err != nil {
			return interfaces.Plan{}, err
		}
		p.epoch[i]++
	}
	return plan, nil
}

// problem is the state as a balancer.Problem.
func (p *Incremental) problem() *balancer.Problem {
	prob := &balancer.Problem{Resources: incResources}
	live := make([]int32, 0, len(p.shardIdx))
	for _, i := range p.shardIdx {
		live = append(live, i)
	}
	sort.Slice(live, func(a, b int) bool { return live[a] < live[b] })
	for _, c := range p.children {
		prob.ChildIDs = append(prob.ChildIDs, c.ID)
		prob.Capacity = append(prob.Capacity, c.Capacity.CPU, c.Capacity.Mem, c.Capacity.Net, c.Capacity.Tasks)
		prob.ChildState = append(prob.ChildState, c.State)
	}
	for _, i := range live {
		prob.ShardIDs = append(prob.ShardIDs, p.shards[i])
		prob.Load = append(prob.Load, p.x.Load(i)...)
		prob.Epoch = append(prob.Epoch, p.epoch[i])
		prob.Current = append(prob.Current, p.x.Owner(i))
	}
	return prob
}

// Plan diffs v against the state, then runs a Round. A view with what the
// incremental policy does not handle (constraints, in-flight moves, shard
// constraints, extra dimensions) is planned by the local solver instead, and
// the state is rebuilt from the next view.
func (p *Incremental) Plan(ctx context.Context, v *interfaces.View) (interfaces.Plan, error) {
	if !incrementalHandles(v) {
		pol, err := NewSolverPolicy("local", "local", interfaces.PolicyConfig{})
		if err != nil {
			return interfaces.Plan{}, err
		}
		p.reset()
		return pol.Plan(ctx, v)
	}
	var ch Changes
	inView := make(map[interfaces.ShardID]bool, len(v.Shards))
	childInView := make(map[interfaces.ChildID]bool, len(v.Children))
	for _, c := range v.Children {
		childInView[c.ID] = true
		i, ok := p.childIdx[c.ID]
		if !ok || p.children[i].State != c.State || !p.children[i].Capacity.Equal(c.Capacity) {
			ch.Children = append(ch.Children, c)
		}
	}
	// A child the view no longer lists is gone: its shards are re-placed.
	for _, c := range p.children {
		if !childInView[c.ID] && c.State != interfaces.ChildFailed {
			c.State = interfaces.ChildFailed
			ch.Children = append(ch.Children, c)
		}
	}
	for _, s := range v.Shards {
		inView[s.ID] = true
		if _, ok := p.shardIdx[s.ID]; !ok {
			ch.Added = append(ch.Added, s)
		} else {
			ch.Loads = append(ch.Loads, ShardLoad{Shard: s.ID, Load: s.Load})
		}
	}
	for id := range p.shardIdx {
		if !inView[id] {
			ch.Removed = append(ch.Removed, id)
		}
	}
	sort.Slice(ch.Removed, func(a, b int) bool { return ch.Removed[a] < ch.Removed[b] })
	owner := make(map[interfaces.ShardID]interfaces.Assignment, len(v.Assignments))
	for _, a := range v.Assignments {
		owner[a.Shard] = a
	}
	for _, s := range v.Shards {
		a, placed := owner[s.ID]
		i, ok := p.shardIdx[s.ID]
		cur := interfaces.ChildID("")
		if ok && p.x.Owner(i) >= 0 {
			cur = p.children[p.x.Owner(i)].ID
		}
		if !placed {
			a = interfaces.Assignment{Shard: s.ID}
		}
		if !ok || cur != a.Child || p.epoch[i] != a.Epoch {
			ch.Assigned = append(ch.Assigned, a)
		}
	}
	if err := p.Observe(ch); err != nil {
		return interfaces.Plan{}, err
	}
	plan, err := p.Round(ctx, v.Seed)
	plan.Tier = v.Tier
	return plan, err
}

// reset forgets the state.
func (p *Incremental) reset() {
	*p = Incremental{name: p.name, x: &balancer.Incremental{R: p.x.R, Tolerance: p.x.Tolerance, LargestFirst: p.x.LargestFirst, MaxScan: p.x.MaxScan},
		threshold: p.threshold, fullEvery: p.fullEvery, full: p.full, rounds: p.rounds,
		childIdx: map[interfaces.ChildID]int32{}, shardIdx: map[interfaces.ShardID]int32{}}
}

// incrementalHandles reports whether the incremental planner can plan v
// alone.
func incrementalHandles(v *interfaces.View) bool {
	if len(v.Constraints) > 0 || len(v.InFlight) > 0 {
		return false
	}
	for _, s := range v.Shards {
		c := s.Constraints
		if c.Pinned != "" || len(c.Allowed) > 0 || len(c.Labels) > 0 || c.AntiAffinity != "" || c.MaxPerChild != 0 || len(s.Load.Extra) > 0 {
			return false
		}
	}
	for _, c := range v.Children {
		if len(c.Capacity.Extra) > 0 {
			return false
		}
	}
	return true
}

func init() {
	MustRegister("incremental", func(cfg interfaces.PolicyConfig) (interfaces.Policy, error) {
		return NewIncremental(cfg)
	})
}
