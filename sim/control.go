package sim

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/tiers/control"
)

// Rejection is a planned move the round refused, with the rule it broke (the
// controller's type: its own refusals are passed on as they are).
type Rejection = control.Rejection

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
// Decision.Apply's view, the moves refused whatever else the plan does are
// screened out (balancer.Screen), Decision.Admit keeps what the round allows
// of the rest (budget, anti-bounce, emergency scope), every admitted move is verified as the
// daemons' FSM does at commit (balancer.VerifyView) and then against the tier's
// constraints in the projected state, apply carries out the accepted moves and returns
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
	// As the daemons: the moves refused whatever else the plan does go before
	// admission (balancer.Screen), the rest is admitted, then verified.
	vs, err := balancer.NewViewState(sv)
	if err != nil {
		return out, fmt.Errorf("verifying the plan of %s %s: %w", sv.Tier, sv.Instance, err)
	}
	screened := plan
	var junk []balancer.Rejection
	screened.Moves, junk = balancer.Screen(vs, plan.Moves)
	for _, r := range junk {
		out.Rejected = append(out.Rejected, Rejection{Move: r.Move, Why: r.Err().Error()})
	}
	admitted, refused := dec.Admit(sv, screened)
	out.Rejected = append(out.Rejected, refused...)
	if len(admitted) > 0 {
		// What the FSM checks at commit (owner, epoch, in-flight, target state,
		// the shard's own constraints, capacity), then the tier's constraints.
		verdict, err := balancer.VerifyView(sv, admitted)
		if err != nil {
			return out, fmt.Errorf("verifying the plan of %s %s: %w", sv.Tier, sv.Instance, err)
		}
		for _, r := range verdict.Rejected {
			out.Rejected = append(out.Rejected, Rejection{Move: r.Move, Why: r.Err().Error()})
		}
		st := newProjection(sv)
		for _, m := range verdict.Accepted {
			if err := st.verifyTier(m); err != nil {
				out.Rejected = append(out.Rejected, Rejection{Move: m, Why: err.Error()})
				continue
			}
			st.apply(m)
			out.Accepted = append(out.Accepted, m)
		}
	}
	if len(out.Accepted) > 0 && apply != nil {
		out.Applied = apply(out.Accepted)
	}
	obs.Planned, obs.Applied = len(plan.Moves), out.Applied
	return out, ctl.Observe(obs)
}

const nres = 4 // the built-in resources, in interfaces.BuiltinResources order

func vec(l interfaces.Load) [nres]float64 { return [nres]float64{l.CPU, l.Mem, l.Net, l.Tasks} }

// projection is a tier's state as a control round checks accepted moves against
// its own constraints: every shard's owner with in-flight moves counted as done,
// each child's load and anti-affinity counts, updated as moves are accepted.
type projection struct {
	view     *interfaces.View
	childIdx map[interfaces.ChildID]int
	shardIdx map[interfaces.ShardID]int
	owner    []int // child index, -1 unplaced
	load     [][nres]float64
	group    map[string][]int // anti-affinity group → count per child
}

// newProjection builds the projected state of a view.
func newProjection(v *interfaces.View) *projection {
	st := &projection{
		view:     v,
		childIdx: make(map[interfaces.ChildID]int, len(v.Children)),
		shardIdx: make(map[interfaces.ShardID]int, len(v.Shards)),
		owner:    make([]int, len(v.Shards)),
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
	own := func(s interfaces.ShardID, c interfaces.ChildID) {
		if i, ok := st.shardIdx[s]; ok {
			if j, ok := st.childIdx[c]; ok {
				st.owner[i] = j
			}
		}
	}
	for _, a := range v.Assignments {
		own(a.Shard, a.Child)
	}
	for _, m := range v.InFlight {
		own(m.Shard, m.To)
	}
	for i, c := range st.owner {
		if c >= 0 {
			st.add(c, i, 1)
		}
	}
	return st
}

func (st *projection) add(c, i int, sign float64) {
	sh := &st.view.Shards[i]
	l := vec(sh.Load)
	for r := 0; r < nres; r++ {
		st.load[c][r] += sign * l[r]
	}
	if g := sh.Constraints.AntiAffinity; g != "" {
		cnt := st.group[g]
		if cnt == nil {
			cnt = make([]int, len(st.view.Children))
			st.group[g] = cnt
		}
		cnt[c] += int(sign)
	}
}

// apply counts an accepted move as done.
func (st *projection) apply(m interfaces.Move) {
	i := st.shardIdx[m.Shard]
	if c := st.owner[i]; c >= 0 {
		st.add(c, i, -1)
	}
	c := st.childIdx[m.To]
	st.owner[i] = c
	st.add(c, i, 1)
}

// verifyTier checks a move that balancer.Verify accepted against what only the
// tier knows: its anti-affinity groups and its constraints (pin, allowed,
// capacity limits) in the projected state (avoid is soft: a preference for the
// policy, not checked here).
func (st *projection) verifyTier(m interfaces.Move) error {
	i, c := st.shardIdx[m.Shard], st.childIdx[m.To]
	sh := &st.view.Shards[i]
	sc := sh.Constraints
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
	for _, k := range st.view.Constraints {
		listed := slices.Contains(k.Shards, m.Shard)
		switch k.Kind {
		case interfaces.ConstraintPin:
			if listed && len(k.Children) > 0 && k.Children[0] != m.To {
				return fmt.Errorf("constraint pin: %s stays on %s", m.Shard, k.Children[0])
			}
		case interfaces.ConstraintAllowed:
			if listed && !slices.Contains(k.Children, m.To) {
				return fmt.Errorf("constraint allowed: %s may not use %s", m.Shard, m.To)
			}
		case interfaces.ConstraintCapacity:
			if slices.Contains(k.Children, m.To) {
				lim := vec(k.Limit)
				for r := 0; r < nres; r++ {
					if lim[r] > 0 && st.load[c][r]+l[r] > lim[r] {
						return fmt.Errorf("constraint capacity: %s %s would reach %.4g, limit %.4g (%s)", m.To, interfaces.BuiltinResources[r], st.load[c][r]+l[r], lim[r], k.Reason)
					}
				}
			}
		}
	}
	return nil
}

// FailoverAfter is how long after a host fails (or a region is lost) its tier
// instance first re-places its shards, unless the mass-failure guard holds:
// the lease expires detect_after after the failure and the controller declares
// the child failed its grace later.
func (sc *Scenario) FailoverAfter(p PolicySpec) time.Duration {
	return sc.Model.DetectAfter.D() + sc.ControlConfig(p).Grace
}
