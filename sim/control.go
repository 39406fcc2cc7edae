package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/tiers/control"
)

// Rejection is a planned move the round refused, with the rule it broke.
type Rejection struct {
	Move interfaces.Move
	Why  string
}

// RoundOutcome is what one control round of a tier instance did.
type RoundOutcome struct {
	// Decision is the controller's (tiers/control) decision for the round: its
	// mode, budget, declared failures, alerts and Record.
	Decision control.Decision
	// Plan is the policy's plan (empty when the round held or the solve failed);
	// SolveErr the policy's error.
	Plan     interfaces.Plan
	SolveErr error
	// Accepted are the moves that passed Decision.Admit and verification against
	// the projected state; Applied those the caller carried out.
	Accepted []interfaces.Move
	Applied  []interfaces.Move
	Rejected []Rejection
	// Findings are the control policies' findings this round (ControlRoundWith).
	Findings []control.Finding
}

// ControlRound runs one round of a tier instance's control loop the way the
// daemons do (coordinator/tierd's round): ctl.Step decides from the input
// (observe → detect → decide); when it solves, the policy plans on
// Decision.Apply's view, Decision.Admit keeps what the round allows (budget,
// anti-bounce, emergency scope), every admitted move is verified against the
// projected state (VerifyMove, then balancer.VerifyView has the last word) as the
// daemons' FSM does at commit, apply carries out the accepted moves and returns
// those it applied, and ctl.Observe gets the result (a failed solve applies
// nothing: the last good assignment is kept). The caller must mark the
// Decision's DeclareFailed children failed in the views it builds from then on.
//
// An error from the policy is not an error of the round (it is in SolveErr);
// only bad input to the controller is.
func ControlRound(ctx context.Context, ctl *control.Controller, pol interfaces.Policy, in control.Input, apply func([]interfaces.Move) []interfaces.Move) (RoundOutcome, error) {
	return ControlRoundWith(ctx, ctl, nil, pol, in, apply)
}

// ControlRoundWith is ControlRound with the instance's control policies
// (tiers/control: straggler, doctor, autoscale), run as the daemons run them
// right after the controller's step: their findings are in the outcome, their
// constraints and evictions join the decision (Controller.Merge) and their
// alerts its alerts. The simulator models no process failures and no job
// resizes: quarantines and resizes a policy asks for are counted in the
// outcome, not carried out. pols may be nil.
func ControlRoundWith(ctx context.Context, ctl *control.Controller, pols *control.Policies, pol interfaces.Policy, in control.Input, apply func([]interfaces.Move) []interfaces.Move) (RoundOutcome, error) {
	dec, err := ctl.Step(in)
	if err != nil {
		return RoundOutcome{}, fmt.Errorf("%s %s: controller: %w", in.View.Tier, in.View.Instance, err)
	}
	var findings []control.Finding
	if pols != nil {
		po, err := pols.Run(control.PolicyInput{Now: in.Now, View: in.View})
		if err != nil {
			return RoundOutcome{}, fmt.Errorf("%s %s: control policies: %w", in.View.Tier, in.View.Instance, err)
		}
		ctl.Merge(&dec, &po)
		findings = po.Findings
	}
	out := RoundOutcome{Decision: dec, Findings: findings}
	obs := control.RoundResult{Round: dec.Round, At: in.Now, P99: control.WorstP99(in.View), MovesActive: len(in.View.InFlight)}
	if !dec.Solve() || len(in.View.Shards) == 0 {
		return out, ctl.Observe(obs)
	}
	sv := dec.Apply(in.View)
	plan, err := pol.Plan(ctx, sv)
	if err != nil {
		out.SolveErr = fmt.Errorf("policy %s on %s %s: %w", pol.Name(), sv.Tier, sv.Instance, err)
		obs.SolveErr = out.SolveErr
		return out, ctl.Observe(obs)
	}
	out.Plan = plan
	admitted, refused := dec.Admit(sv, plan)
	for _, r := range refused {
		out.Rejected = append(out.Rejected, Rejection{Move: r.Move, Why: r.Why})
	}
	st := NewProjection(sv)
	var verified []interfaces.Move
	for _, m := range admitted {
		if err := VerifyMove(st, m); err != nil {
			out.Rejected = append(out.Rejected, Rejection{Move: m, Why: err.Error()})
			continue
		}
		st.Apply(m)
		verified = append(verified, m)
	}
	if len(verified) > 0 {
		verdict, err := balancer.VerifyView(sv, verified)
		if err != nil {
			return out, fmt.Errorf("verifying the plan of %s %s: %w", sv.Tier, sv.Instance, err)
		}
		for _, r := range verdict.Rejected {
			out.Rejected = append(out.Rejected, Rejection{Move: r.Move, Why: r.Err().Error()})
		}
		out.Accepted = verdict.Accepted
	}
	if len(out.Accepted) > 0 && apply != nil {
		out.Applied = apply(out.Accepted)
	}
	obs.Planned, obs.Applied = len(plan.Moves), out.Applied
	return out, ctl.Observe(obs)
}

const nres = 4 // the built-in resources, in interfaces.BuiltinResources order

func vec(l interfaces.Load) [nres]float64 { return [nres]float64{l.CPU, l.Mem, l.Net, l.Tasks} }

// Projection is a tier's state as a control round verifies moves against it:
// every shard's owner with in-flight moves counted as done, and each child's
// load, updated as moves are accepted.
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

// FailoverAfter is how long after a host fails (or a region is lost) its tier
// instance first re-places its shards, unless the mass-failure guard holds:
// the lease expires detect_after after the failure and the controller declares
// the child failed its grace later.
func (sc *Scenario) FailoverAfter(p PolicySpec) time.Duration {
	return sc.Model.DetectAfter.D() + sc.ControlConfig(p).Grace
}
