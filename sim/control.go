package sim

import (
	"context"
	"fmt"
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
	// Accepted are the moves that passed Decision.Admit and the commit's
	// verification; Applied those the caller carried out.
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
// of the rest (budget, anti-bounce, emergency scope), the admitted moves are
// verified as the daemons' commit verifies them (balancer.VerifyRules with the
// tier's rules less its capacity limits, balancer.CommitRules; a shard's own
// anti-affinity group is the policy's to keep, not checked at commit), apply
// carries out the accepted moves and returns those it applied, and ctl.Observe
// gets the result (a failed solve applies nothing: the last good assignment is
// kept). The caller must mark the
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
		// What the daemons' commit checks (tierd's verifyMoves): owner,
		// epoch, in-flight, target state, the shard's own constraints and the
		// child's capacity, then the tier's rules less its capacity limits
		// (balancer.CommitRules), counted with the moves accepted before.
		verdict := balancer.VerifyRules(vs, balancer.CommitRules(sv.Constraints), admitted)
		for _, r := range verdict.Rejected {
			out.Rejected = append(out.Rejected, Rejection{Move: r.Move, Why: r.Err().Error()})
		}
		out.Accepted = verdict.Accepted
		junk = append(junk, verdict.Rejected...)
	}
	// As the daemons: the commit's rejections go back to the controller,
	// which holds a move rejected HoldAfter rounds in a row (control.Backoff).
	obs.Rejected = junk
	if len(out.Accepted) > 0 && apply != nil {
		out.Applied = apply(out.Accepted)
	}
	obs.Planned, obs.Applied = len(plan.Moves), out.Applied
	return out, ctl.Observe(obs)
}

const nres = 4 // the built-in resources, in interfaces.BuiltinResources order

func vec(l interfaces.Load) [nres]float64 { return [nres]float64{l.CPU, l.Mem, l.Net, l.Tasks} }

// FailoverAfter is how long after a host fails (or a region is lost) its tier
// instance first re-places its shards, unless the mass-failure guard holds:
// the lease expires detect_after after the failure and the controller declares
// the child failed its grace later.
func (sc *Scenario) FailoverAfter(p PolicySpec) time.Duration {
	return sc.Model.DetectAfter.D() + sc.ControlConfig(p).Grace
}
