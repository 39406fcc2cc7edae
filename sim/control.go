package sim

import (
	"context"
	"fmt"

	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/interfaces"
)

// StepConfig tunes one control-loop step.
type StepConfig struct {
	// Trigger: a periodic round plans only when some resource's max/mean
	// utilization across active children exceeds Trigger ...
	Trigger float64
	// ... or some active child's utilization exceeds Target in any resource.
	Target float64
	// Floor: imbalance (max/mean above Trigger) in a resource counts only when
	// the busiest child is at or above Floor utilization in it; imbalance
	// among lightly loaded children costs no latency and is not worth moves.
	Floor float64
	// MoveBudget caps the relocations of a periodic round (0: no cap). The step
	// passes it to the policy as a max_moves constraint and enforces it;
	// emergency rounds (placing shards, evacuating failed or draining children)
	// have no budget, as they only obey hard constraints.
	MoveBudget int
	// Verify checks one move against the state the step has projected so far
	// (accepted moves counted as done). Nil uses VerifyMove.
	Verify func(st *Projection, m interfaces.Move) error
}

// Mode says why a round ran the policy.
type Mode string

// Round modes.
const (
	ModeIdle      Mode = "idle"      // nothing to do: the policy was not called
	ModePeriodic  Mode = "periodic"  // imbalance or overload above the trigger
	ModeEmergency Mode = "emergency" // unplaced shards or shards on failed/draining children
)

// Rejection is a planned move the step refused, with the rule it broke.
type Rejection struct {
	Move interfaces.Move
	Why  string
}

// StepResult is the outcome of one control-loop step: observe → detect → decide
// → act → explain.
type StepResult struct {
	Mode Mode
	// Why explains the mode for people.
	Why      string
	Plan     interfaces.Plan
	Accepted []interfaces.Move
	Rejected []Rejection
}

// ControlStep runs one round of a tier's control loop on a view. It is a pure
// function of its inputs (the policy must be deterministic for the view): it
// detects whether the tier needs a decision, asks the policy for a plan, and
// keeps only the moves that pass verification against the projected state, in
// plan order, within the move budgets of the view's constraints. An emergency
// round (unplaced shards, or shards on failed or draining children) applies only
// the moves of those shards; a periodic round applies at most MoveBudget
// relocations. The caller
// applies Accepted. It is meant to be shared with the daemons' control loop.
func ControlStep(ctx context.Context, pol interfaces.Policy, v *interfaces.View, cfg StepConfig) (StepResult, error) {
	st := NewProjection(v)
	mode, why := detect(st, cfg)
	res := StepResult{Mode: mode, Why: why}
	if mode == ModeIdle {
		return res, nil
	}
	if mode == ModePeriodic && cfg.MoveBudget > 0 {
		vv := *v
		vv.Constraints = append(append([]interfaces.Constraint(nil), v.Constraints...),
			interfaces.Constraint{Kind: interfaces.ConstraintMaxMoves, Max: cfg.MoveBudget, Reason: "control loop: move budget per periodic round"})
		v = &vv
		st.View = v
	}
	plan, err := pol.Plan(ctx, v)
	if err != nil {
		return res, fmt.Errorf("policy %s on %s %s: %w", pol.Name(), v.Tier, v.Instance, err)
	}
	res.Plan = plan
	verify := cfg.Verify
	if verify == nil {
		verify = VerifyMove
	}
	maxMoves, maxBytes := -1, int64(-1)
	for _, c := range v.Constraints {
		if c.Kind == interfaces.ConstraintMaxMoves {
			if c.Max > 0 && (maxMoves < 0 || c.Max < maxMoves) {
				maxMoves = c.Max
			}
			if c.MaxBytes > 0 && (maxBytes < 0 || c.MaxBytes < maxBytes) {
				maxBytes = c.MaxBytes
			}
		}
	}
	moved, bytes := 0, int64(0)
	needs := map[interfaces.ShardID]bool{}
	if mode == ModeEmergency {
		for i, s := range st.shards {
			if c := st.owner[i]; c < 0 || st.children[c].State != interfaces.ChildActive {
				needs[s.ID] = true
			}
		}
	}
	for _, m := range plan.Moves {
		if mode == ModeEmergency && !needs[m.Shard] {
			res.Rejected = append(res.Rejected, Rejection{Move: m, Why: "emergency round: only unplaced shards and shards of failed or draining children move"})
			continue
		}
		if err := verify(st, m); err != nil {
			res.Rejected = append(res.Rejected, Rejection{Move: m, Why: err.Error()})
			continue
		}
		if m.From != "" { // first placements are not relocations and cost no budget
			sb := st.shardBytes(m.Shard)
			if (maxMoves >= 0 && moved+1 > maxMoves) || (maxBytes >= 0 && bytes+sb > maxBytes) {
				res.Rejected = append(res.Rejected, Rejection{Move: m, Why: "over the round's move budget (max_moves constraint)"})
				continue
			}
			moved++
			bytes += sb
		}
		st.Apply(m)
		res.Accepted = append(res.Accepted, m)
	}
	// The balancer's plan verifier has the last word: only moves it accepts are
	// applied.
	if len(res.Accepted) > 0 {
		verdict, err := balancer.VerifyView(v, res.Accepted)
		if err != nil {
			return res, fmt.Errorf("verifying the plan of %s %s: %w", v.Tier, v.Instance, err)
		}
		for _, r := range verdict.Rejected {
			res.Rejected = append(res.Rejected, Rejection{Move: r.Move, Why: r.Err().Error()})
		}
		res.Accepted = verdict.Accepted
	}
	return res, nil
}

// detect decides whether the round must plan, and why.
func detect(st *Projection, cfg StepConfig) (Mode, string) {
	unplaced, evac := 0, 0
	for i := range st.shards {
		c := st.owner[i]
		switch {
		case c < 0:
			unplaced++
		case st.children[c].State != interfaces.ChildActive:
			evac++
		}
	}
	live := 0
	for _, ch := range st.children {
		if ch.State == interfaces.ChildActive {
			live++
		}
	}
	if (unplaced > 0 || evac > 0) && live == 0 {
		return ModeIdle, fmt.Sprintf("%d unplaced shards, %d on failed or draining children, but no active child to move them to", unplaced, evac)
	}
	if unplaced > 0 || evac > 0 {
		return ModeEmergency, fmt.Sprintf("%d unplaced shards, %d on failed or draining children", unplaced, evac)
	}
	var used, capSum [nres]float64
	var maxU [nres]float64
	active := 0
	for c, ch := range st.children {
		if ch.State != interfaces.ChildActive {
			continue
		}
		active++
		for r := 0; r < nres; r++ {
			cp := capOf(ch.Capacity, r)
			used[r] += st.load[c][r]
			capSum[r] += cp
			if cp > 0 {
				u := st.load[c][r] / cp
				if u > maxU[r] {
					maxU[r] = u
				}
			}
		}
	}
	if active < 2 {
		return ModeIdle, "fewer than two active children"
	}
	for r := 0; r < nres; r++ {
		if capSum[r] <= 0 || used[r] <= 0 {
			continue
		}
		mean := used[r] / capSum[r]
		// An overloaded child triggers a round only when there is room elsewhere
		// (the mean is below the target) and some imbalance to remove.
		if maxU[r] > cfg.Target && mean < cfg.Target && maxU[r]/mean > 1.02 {
			return ModePeriodic, fmt.Sprintf("a child is at %.2f %s (target %.2f, mean %.2f)", maxU[r], interfaces.BuiltinResources[r], cfg.Target, mean)
		}
		if ratio := maxU[r] / mean; ratio > cfg.Trigger && maxU[r] >= cfg.Floor {
			return ModePeriodic, fmt.Sprintf("%s max/mean %.3f above trigger %.3f", interfaces.BuiltinResources[r], ratio, cfg.Trigger)
		}
	}
	return ModeIdle, "balanced within the trigger"
}

const nres = 4 // the built-in resources, in interfaces.BuiltinResources order

func capOf(l interfaces.Load, r int) float64 {
	switch r {
	case 0:
		return l.CPU
	case 1:
		return l.Mem
	case 2:
		return l.Net
	}
	return l.Tasks
}

func vec(l interfaces.Load) [nres]float64 { return [nres]float64{l.CPU, l.Mem, l.Net, l.Tasks} }

// Projection is a tier's state as a control step sees it: every shard's owner
// with in-flight moves counted as done, and each child's load, updated as moves
// are accepted.
type Projection struct {
	View     *interfaces.View
	children []interfaces.Child
	shards   []interfaces.Shard
	childIdx map[interfaces.ChildID]int
	shardIdx map[interfaces.ShardID]int
	owner    []int // child index, -1 unplaced
	epoch    []interfaces.Epoch
	inflight []bool
	load     [][nres]float64
	group    map[string][]int // anti-affinity group → count per child
}

// NewProjection builds the projected state of a view.
func NewProjection(v *interfaces.View) *Projection {
	st := &Projection{
		View:     v,
		children: v.Children,
		shards:   v.Shards,
		childIdx: make(map[interfaces.ChildID]int, len(v.Children)),
		shardIdx: make(map[interfaces.ShardID]int, len(v.Shards)),
		owner:    make([]int, len(v.Shards)),
		epoch:    make([]interfaces.Epoch, len(v.Shards)),
		inflight: make([]bool, len(v.Shards)),
		load:     make([][nres]float64, len(v.Children)),
		group:    map[string][]int{},
	}
	for i, c := range v.Children {
		st.childIdx[c.ID] = i
	}
	for i, s := range v.Shards {
		st.shardIdx[s.ID] = i
		st.owner[i] = -1
	}
	for _, a := range v.Assignments {
		i, ok := st.shardIdx[a.Shard]
		if !ok {
			continue
		}
		st.epoch[i] = a.Epoch
		if c, ok := st.childIdx[a.Child]; ok {
			st.owner[i] = c
		}
	}
	for _, m := range v.InFlight {
		i, ok := st.shardIdx[m.Shard]
		if !ok {
			continue
		}
		st.inflight[i] = true
		if c, ok := st.childIdx[m.To]; ok {
			st.owner[i] = c
		}
	}
	for i, s := range v.Shards {
		if c := st.owner[i]; c >= 0 {
			st.add(c, i, 1)
		}
		_ = s
	}
	return st
}

func (st *Projection) add(c, i int, sign float64) {
	l := vec(st.shards[i].Load)
	for r := 0; r < nres; r++ {
		st.load[c][r] += sign * l[r]
	}
	if g := st.shards[i].Constraints.AntiAffinity; g != "" {
		cnt := st.group[g]
		if cnt == nil {
			cnt = make([]int, len(st.children))
			st.group[g] = cnt
		}
		cnt[c] += int(sign)
	}
}

func (st *Projection) shardBytes(id interfaces.ShardID) int64 {
	if i, ok := st.shardIdx[id]; ok {
		return st.shards[i].StateBytes
	}
	return 0
}

// Owner returns the projected owner of a shard ("" when unplaced or unknown).
func (st *Projection) Owner(id interfaces.ShardID) interfaces.ChildID {
	i, ok := st.shardIdx[id]
	if !ok || st.owner[i] < 0 {
		return ""
	}
	return st.children[st.owner[i]].ID
}

// Apply counts an accepted move as done.
func (st *Projection) Apply(m interfaces.Move) {
	i := st.shardIdx[m.Shard]
	if c := st.owner[i]; c >= 0 {
		st.add(c, i, -1)
	}
	c := st.childIdx[m.To]
	st.owner[i] = c
	st.inflight[i] = true
	st.add(c, i, 1)
}

// VerifyMove checks a move against the projected state: the shard exists, is not
// already moving, and still has the owner and epoch the move was planned against;
// the destination is an active child that the shard's own constraints and the
// tier's hard constraints (pin, allowed, capacity limits, anti-affinity) allow
// (avoid is soft: a preference for the policy, not checked here),
// and it has room for the shard in every resource.
func VerifyMove(st *Projection, m interfaces.Move) error {
	i, ok := st.shardIdx[m.Shard]
	if !ok {
		return fmt.Errorf("shard %s is not in this tier: %w", m.Shard, interfaces.ErrNotFound)
	}
	if st.inflight[i] {
		return fmt.Errorf("shard %s already has a move in flight: %w", m.Shard, interfaces.ErrConflict)
	}
	cur := st.Owner(m.Shard)
	if cur != m.From {
		return fmt.Errorf("shard %s is on %q, the move says from %q: %w", m.Shard, cur, m.From, interfaces.ErrConflict)
	}
	if m.From != "" && m.Epoch != st.epoch[i] {
		return fmt.Errorf("shard %s: move epoch %d, current %d: %w", m.Shard, m.Epoch, st.epoch[i], interfaces.ErrStaleEpoch)
	}
	c, ok := st.childIdx[m.To]
	if !ok {
		return fmt.Errorf("destination %s is not a child of this tier: %w", m.To, interfaces.ErrNotFound)
	}
	if m.To == m.From {
		return fmt.Errorf("shard %s: move to its own child: %w", m.Shard, interfaces.ErrInvalid)
	}
	ch := st.children[c]
	if ch.State != interfaces.ChildActive {
		return fmt.Errorf("destination %s is %s", m.To, ch.State)
	}
	sh := st.shards[i]
	sc := sh.Constraints
	if sc.Pinned != "" && sc.Pinned != m.To {
		return fmt.Errorf("shard %s is pinned to %s", m.Shard, sc.Pinned)
	}
	if len(sc.Allowed) > 0 && !containsChild(sc.Allowed, m.To) {
		return fmt.Errorf("shard %s may not use %s (allowed list)", m.Shard, m.To)
	}
	for k, want := range sc.Labels {
		if ch.Labels[k] != want {
			return fmt.Errorf("shard %s needs label %s=%s, %s has %q", m.Shard, k, want, m.To, ch.Labels[k])
		}
	}
	if g := sc.AntiAffinity; g != "" {
		limit := sc.MaxPerChild
		if limit == 0 {
			limit = 1
		}
		if cnt := st.group[g]; cnt != nil && cnt[c] >= limit {
			return fmt.Errorf("anti-affinity group %s already has %d shards on %s", g, cnt[c], m.To)
		}
	}
	l := vec(sh.Load)
	for _, k := range st.View.Constraints {
		listed := containsShard(k.Shards, m.Shard)
		switch k.Kind {
		case interfaces.ConstraintPin:
			if listed && len(k.Children) > 0 && k.Children[0] != m.To {
				return fmt.Errorf("constraint pin: %s stays on %s", m.Shard, k.Children[0])
			}
		case interfaces.ConstraintAllowed:
			if listed && !containsChild(k.Children, m.To) {
				return fmt.Errorf("constraint allowed: %s may not use %s", m.Shard, m.To)
			}
		case interfaces.ConstraintCapacity:
			if containsChild(k.Children, m.To) {
				lim := vec(k.Limit)
				for r := 0; r < nres; r++ {
					if lim[r] > 0 && st.load[c][r]+l[r] > lim[r] {
						return fmt.Errorf("constraint capacity: %s %s would reach %.4g, limit %.4g (%s)", m.To, interfaces.BuiltinResources[r], st.load[c][r]+l[r], lim[r], k.Reason)
					}
				}
			}
		}
	}
	capv := vec(ch.Capacity)
	for r := 0; r < nres; r++ {
		if l[r] > 0 && st.load[c][r]+l[r] > capv[r] {
			return fmt.Errorf("capacity: %s %s would reach %.4g of %.4g", m.To, interfaces.BuiltinResources[r], st.load[c][r]+l[r], capv[r])
		}
	}
	return nil
}

func containsChild(ids []interfaces.ChildID, id interfaces.ChildID) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func containsShard(ids []interfaces.ShardID, id interfaces.ShardID) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
