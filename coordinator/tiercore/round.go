package tiercore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/tiers/control"
)

// RoundConfig is what a tier instance's control round is made of. The
// controller and the control policies keep state across rounds (the PI
// integrator, anti-bounce, backoff, the policies' memories): the driver makes
// them once per leadership and passes the same ones to every round.
type RoundConfig struct {
	// Controller decides each round's mode, budget and who is lost
	// (tiers/control). Required.
	Controller *control.Controller
	// Policies are the instance's control policies (straggler, doctor,
	// autoscale); nil for none.
	Policies *control.Policies
	// Policy is the tier policy that solves. Required.
	Policy interfaces.Policy
	// ApplyResizes lets the round ask for the job resizes autoscale applies:
	// only the top tier holds the jobs' specs.
	ApplyResizes bool
}

// Round is one tier instance's control round, pure: the driver
// (coordinator/tierd's loop, the simulator's engine) builds its input, carries
// out the commands it returns — through Raft in the daemons, directly in the
// simulator — and tells it the results; it never does I/O, reads a clock or
// starts a goroutine. A round runs in phases, so that the driver can hold its
// locks around the parts that read the committed state and release them for
// the solve:
//
//	p, err := r.Start(in)           // 1 controller, 2 control policies
//	tells := p.Carried(results)     //   the driver carried out p.Commands()
//	if p.Solves() { p.Solve(ctx) }  // 3 solve
//	batch := p.Verify(state, leave) // 4 screen, 5 admit, 6 verify
//	out := p.End(ops, err)          // 7 commit (the driver's), 8 send: out.Tell
type Round struct {
	cfg RoundConfig
	// The stages, in order (NewRound says why this order).
	decide []stage
	plan   []stage
}

// A stage is one step of the round on its pass. An error of an optional
// stage is the pass's (the round goes on without the stage's output); any
// other stops the round.
type stage struct {
	name     string
	run      func(*Pass) error
	optional bool
}

// NewRound wires the round's stages, in the order they run. It is the one
// place that order is written down; the daemons and the simulator run it
// unchanged.
func NewRound(cfg RoundConfig) (*Round, error) {
	if cfg.Controller == nil {
		return nil, fmt.Errorf("round: controller: is required: %w", interfaces.ErrInvalid)
	}
	if cfg.Policy == nil {
		return nil, fmt.Errorf("round: policy: is required: %w", interfaces.ErrInvalid)
	}
	r := &Round{cfg: cfg}
	r.decide = []stage{
		// 1. The controller first: observe → detect → decide. It picks the
		//    mode (hold, periodic, emergency), the budget and the anti-bounce
		//    and backoff rules, and says who is lost (silent past lease and
		//    grace, unless the mass-failure guard holds). Everything after it
		//    sees the lost children as failed.
		{"controller", (*Pass).controller, false},
		// 2. The control policies (detect → diagnose → resolve) on that view:
		//    quarantines and resizes become commands; their constraints,
		//    evictions and alerts join the controller's decision once the
		//    commands are carried out (Carried), so that a shard they removed
		//    is planned by nobody.
		{"control policies", (*Pass).controlPolicies, true},
	}
	r.plan = []stage{
		// 4. Screen: the moves the tier refuses whatever else the plan does
		//    (unknown shard or child, stale epoch, wrong source, in flight,
		//    duplicate) go before admission, so that junk spends no budget.
		{"screen", (*Pass).screen, false},
		// 5. Admit what the decision allows of the rest: the budget, the
		//    emergency scope, anti-bounce, held moves (control.Backoff).
		{"admit", (*Pass).admit, false},
		// 6. Verify only the admitted moves, in plan order, against the
		//    committed state on the loads the plan was made on and the tier's
		//    rules (capacity counted with the moves accepted before): whether
		//    a move fits depends on the moves before it, and a move admission
		//    dropped must not keep a later one out.
		{"verify", (*Pass).verify, false},
	}
	// 3. Solve runs between the two groups (Pass.Solve) without the driver's
	//    locks; 7. the commit is the driver's (one entry for the batch) and
	//    8. the sends follow from its results (Pass.End).
	return r, nil
}

// RoundInput is what a round starts from.
type RoundInput struct {
	// Now is the round's time; nothing in the round reads a clock.
	Now time.Time
	// View is the instance as the driver sees it: the committed state with
	// the children's reports (measured loads in place of declared ones), the
	// cooperation rules of this round in Constraints, and without the
	// quarantined shards. It is not modified.
	View *interfaces.View
	// Quarantined maps the quarantined shards (left out of View) to why.
	Quarantined map[interfaces.ShardID]string
	// Silent maps each live child whose lease has expired (from this leader's
	// view) to the expiry: the controller counts the grace from there.
	Silent map[interfaces.ChildID]time.Time
	// AckMassFailure is an operator's acknowledgement of a mass failure.
	AckMassFailure bool
	// Failures are the shard process failures reported since the last round.
	Failures []control.Failure
	// Unreachable lists, sorted, the live children that have gone quiet but
	// still hold their leases (Unreachable): the round leaves them alone —
	// their shards pinned, no other shard placed on them, no move to or off
	// them — unless the controller declares them failed in this round.
	Unreachable []interfaces.ChildID
	// NoParentLease says the tier's own parent lease has run out: its shards
	// may be given away and its children's leases run out with its own, so
	// the round decides nothing (and needs no View).
	NoParentLease bool
}

// CommandKind says what a RoundCommand asks the driver to commit.
type CommandKind uint8

// Command kinds.
const (
	// DeclareFailed: commit Child as failed (the controller found it lost).
	// The driver may refuse (a lease granted since keeps the child).
	DeclareFailed CommandKind = iota + 1
	// Quarantine: commit Shard as quarantined for Reason; when done, the
	// round tells its owner to stop it.
	Quarantine
	// Resize: change a job's shard count (autoscale in mode apply).
	Resize
)

var commandNames = [...]string{"?", "declare-failed", "quarantine", "resize"}

func (k CommandKind) String() string {
	if int(k) < len(commandNames) {
		return commandNames[k]
	}
	return "unknown"
}

// RoundCommand is a change of the committed state the round asks for before it
// solves. The driver carries out a pass's commands in order.
type RoundCommand struct {
	Kind   CommandKind
	Child  interfaces.ChildID // DeclareFailed
	Shard  interfaces.ShardID // Quarantine
	Reason string             // Quarantine
	// Owner and Epoch are where the quarantined shard runs (Owner "" when
	// nowhere), as the round's view has it.
	Owner  interfaces.ChildID
	Epoch  interfaces.Epoch
	Resize control.Resize // Resize
}

// CommandResult is what became of a RoundCommand.
type CommandResult struct {
	// Done says the command committed (a declared child is failed, a shard
	// quarantined, a job resized).
	Done bool
	// Deleted are the shards a resize deleted (even when a later step of it
	// failed): they leave the round.
	Deleted []interfaces.ShardID
}

// Tell is a message the round asks the driver to send a child: Assign or
// Revoke of Shard at the tier's epoch Epoch (the driver composes the wire
// epoch and passes every Assign through MayAssign).
type Tell struct {
	Child interfaces.ChildID
	Kind  Kind
	Shard interfaces.ShardID
	Epoch interfaces.Epoch
}

// OpResult is the commit's result for one move of a Batch, in order: the
// shard's epoch after it, or why it failed.
type OpResult struct {
	Epoch interfaces.Epoch
	Err   error
}

// Pass is one run of a Round. Its methods are the round's phases, called in
// order; a phase called out of order does nothing.
type Pass struct {
	r     *Round
	in    RoundInput
	phase int

	// view is the round's view: the input's with the lost children marked
	// failed and the shards the commands removed left out (copied).
	view *interfaces.View
	dec  control.Decision
	// pol is the control policies' outcome (ran: they ran without error).
	pol     control.Outcome
	ran     bool
	cmds    []RoundCommand
	evict   map[interfaces.ShardID]control.Eviction
	skipped string

	sv       *interfaces.View // the view the policy solves
	plan     interfaces.Plan
	solved   bool
	solveErr error

	moves    []interfaces.Move // the moves passed from stage to stage
	rejected []balancer.Rejection
	refused  []control.Rejection
	batch    Batch
	st       State
	// policyErr is the control policies' error this round.
	policyErr error
	// frozen are the unreachable children the round leaves alone, and
	// droppedFrozen the planned moves to or off them it dropped.
	frozen        []interfaces.ChildID
	droppedFrozen int
}

const (
	phaseStarted = iota + 1
	phaseCarried
	phaseSolved
	phaseVerified
	phaseEnded
)

// Start runs stages 1 and 2: the controller's step and the control policies.
// The driver then carries out Commands and calls Carried. An error is bad
// input to the controller (the round does nothing); the control policies'
// errors are the pass's (PoliciesErr), and the round goes on without them.
func (r *Round) Start(in RoundInput) (*Pass, error) {
	p := &Pass{r: r, in: in, view: in.View, phase: phaseStarted}
	if in.NoParentLease {
		p.skipped = "no-parent-lease" // the view may be nil: nothing is observed
		return p, nil
	}
	if in.View == nil {
		return nil, fmt.Errorf("round: view: is required: %w", interfaces.ErrInvalid)
	}
	return p, p.run(r.decide)
}

// run runs stages in order.
func (p *Pass) run(stages []stage) error {
	for _, s := range stages {
		err := s.run(p)
		if err == nil {
			continue
		}
		err = fmt.Errorf("%s %s: %s: %w", p.in.View.Tier, p.in.View.Instance, s.name, err)
		if !s.optional {
			return err
		}
		p.policyErr = err
	}
	return nil
}

// controller is stage 1.
func (p *Pass) controller() error {
	dec, err := p.r.cfg.Controller.Step(control.Input{Now: p.in.Now, View: p.in.View, Silent: p.in.Silent, AckMassFailure: p.in.AckMassFailure})
	if err != nil {
		return err
	}
	p.dec = dec
	for _, id := range dec.DeclareFailed {
		p.cmds = append(p.cmds, RoundCommand{Kind: DeclareFailed, Child: id})
	}
	if len(dec.DeclareFailed) > 0 {
		v := *p.view
		v.Children = slices.Clone(v.Children)
		for i := range v.Children {
			if slices.Contains(dec.DeclareFailed, v.Children[i].ID) {
				v.Children[i].State = interfaces.ChildFailed
			}
		}
		p.view = &v
	}
	return nil
}

// controlPolicies is stage 2.
func (p *Pass) controlPolicies() error {
	pols := p.r.cfg.Policies
	if pols == nil {
		return nil
	}
	out, err := pols.Run(control.PolicyInput{Now: p.in.Now, View: p.view, Failures: p.in.Failures, Quarantined: p.in.Quarantined})
	if err != nil {
		return err
	}
	p.pol, p.ran = out, true
	moving := make(map[interfaces.ShardID]bool, len(p.view.InFlight))
	for _, m := range p.view.InFlight {
		moving[m.Shard] = true
	}
	known := make(map[interfaces.ShardID]bool, len(p.view.Shards))
	for i := range p.view.Shards {
		known[p.view.Shards[i].ID] = true
	}
	owner := make(map[interfaces.ShardID]interfaces.Assignment, len(p.view.Assignments))
	for _, a := range p.view.Assignments {
		owner[a.Shard] = a
	}
	for _, a := range out.Actions.Quarantine {
		// Not a shard quarantined already (not in the view) or in flight.
		if !known[a.Shard] || moving[a.Shard] || p.in.Quarantined[a.Shard] != "" {
			continue
		}
		o := owner[a.Shard]
		p.cmds = append(p.cmds, RoundCommand{Kind: Quarantine, Shard: a.Shard, Reason: a.Reason, Owner: o.Child, Epoch: o.Epoch})
	}
	if p.r.cfg.ApplyResizes {
		for _, rz := range out.Actions.Resize {
			if rz.Apply && rz.Target != rz.Current {
				p.cmds = append(p.cmds, RoundCommand{Kind: Resize, Resize: rz})
			}
		}
	}
	return nil
}

// PoliciesErr is the control policies' error this round (they were skipped).
func (p *Pass) PoliciesErr() error { return p.policyErr }

// Skipped says why the round decided nothing ("" when it ran).
func (p *Pass) Skipped() string { return p.skipped }

// Decision is the controller's decision, with the control policies' merged
// once Carried ran.
func (p *Pass) Decision() control.Decision { return p.dec }

// Findings are the control policies' findings this round.
func (p *Pass) Findings() []control.Finding { return p.pol.Findings }

// View is the round's view: the input's with the lost children marked failed
// and the shards the commands removed left out.
func (p *Pass) View() *interfaces.View { return p.view }

// Commands are the state changes to carry out before the solve, in order: the
// lost children declared failed, then quarantines, then resizes.
func (p *Pass) Commands() []RoundCommand { return p.cmds }

// Carried takes the results of Commands (one per command, in order; missing
// ones count as not done) and merges the control policies' outcome into the
// decision, without the shards the commands removed. It returns the messages
// to send now: a Revoke to the owner of each shard quarantined.
func (p *Pass) Carried(results []CommandResult) []Tell {
	if p.phase != phaseStarted {
		return nil
	}
	p.phase = phaseCarried
	if p.skipped != "" || !p.ran {
		return nil
	}
	var tell []Tell
	gone := map[interfaces.ShardID]bool{}
	held := len(p.in.Quarantined) // quarantined before and by this round
	for i, c := range p.cmds {
		var res CommandResult
		if i < len(results) {
			res = results[i]
		}
		switch c.Kind {
		case Quarantine:
			if !res.Done {
				continue
			}
			gone[c.Shard] = true
			held++
			if c.Owner != "" {
				tell = append(tell, Tell{Child: c.Owner, Kind: Revoke, Shard: c.Shard, Epoch: c.Epoch}) // it may still run there
			}
		case Resize:
			for _, id := range res.Deleted {
				gone[id] = true // deleted even when a later step failed
			}
		}
	}
	out := &p.pol
	// Quarantined shards stay an operator's business until released: one
	// alert while any is.
	if held > 0 {
		out.Actions.Alerts = append(out.Actions.Alerts, control.Alert{Code: control.AlertQuarantine,
			Message: fmt.Sprintf("%d shards quarantined at %s/%s (strata shards; release with strata shards release SHARD)", held, p.view.Tier, p.view.Instance)})
	}
	if len(gone) > 0 {
		isGone := func(id interfaces.ShardID) bool { return gone[id] }
		v := *p.view
		DropShards(&v, isGone)
		p.view = &v
		out.Actions.Constraints = dropFromConstraints(out.Actions.Constraints, isGone)
		keep := out.Actions.Evict[:0:0]
		for _, e := range out.Actions.Evict {
			if !gone[e.Shard] {
				keep = append(keep, e)
			}
		}
		out.Actions.Evict = keep
	}
	p.r.cfg.Controller.Merge(&p.dec, out)
	if len(out.Actions.Evict) > 0 {
		p.evict = make(map[interfaces.ShardID]control.Eviction, len(out.Actions.Evict))
		for _, e := range out.Actions.Evict {
			p.evict[e.Shard] = e
		}
	}
	return tell
}

// Solves reports whether the round runs its policy: the controller decided to
// and there is a shard to place.
func (p *Pass) Solves() bool {
	return p.skipped == "" && p.dec.Solve() && len(p.view.Shards) > 0
}

// Solve is stage 3: the tier policy plans on the decision's view (the round's
// view with the decision's constraints: budget, anti-bounce). The driver
// gives ctx its solve deadline. A failed solve applies nothing: the last good
// assignment is kept (SolveErr).
func (p *Pass) Solve(ctx context.Context) {
	if p.phase == phaseStarted {
		p.Carried(nil)
	}
	if p.phase != phaseCarried || !p.Solves() {
		return
	}
	p.phase = phaseSolved
	p.sv = p.dec.Apply(p.view)
	// Frozen after the controller's decision: a child it declared failed in
	// this round is evacuated, not frozen.
	p.frozen = slices.DeleteFunc(slices.Clone(p.in.Unreachable), func(c interfaces.ChildID) bool { return slices.Contains(p.dec.DeclareFailed, c) })
	if k := Freeze(p.sv, p.frozen); len(k) > 0 {
		p.sv.Constraints = append(slices.Clone(p.sv.Constraints), k...)
	}
	plan, err := p.r.cfg.Policy.Plan(ctx, p.sv)
	if err != nil {
		p.solveErr = err
		return
	}
	p.plan, p.solved = plan, true
}

// Planned returns a pass past its solve: dec is the round's decision, plan
// the policy's plan on sv. For a driver's tests of the stages after the
// solve (Verify, End); End's report to the controller fails unless dec is
// its pending decision (RoundOutcome.ObserveErr).
func (r *Round) Planned(dec control.Decision, sv *interfaces.View, plan interfaces.Plan) *Pass {
	return &Pass{r: r, in: RoundInput{Now: sv.Now, View: sv}, view: sv, sv: sv, dec: dec, plan: plan, solved: true, phase: phaseSolved}
}

// SolveView is the view the policy solved (nil before Solve).
func (p *Pass) SolveView() *interfaces.View { return p.sv }

// Plan is the policy's plan (empty when the round did not solve or the solve
// failed).
func (p *Pass) Plan() interfaces.Plan { return p.plan }

// Verify runs stages 4 to 6 on the plan against st, the committed state as of
// now (the driver holds whatever keeps it still until the commit), and
// returns the batch to commit: the moves accepted, each committed directly or
// begun (revoke → ack → commit). Moves of shards leaving (the tier's own
// parent is taking them back; nil for none) are dropped first.
func (p *Pass) Verify(st State, leaving func(interfaces.ShardID) bool) Batch {
	if p.phase != phaseSolved || !p.solved {
		return Batch{}
	}
	p.phase = phaseVerified
	p.st = st
	p.moves = DropLeaving(p.plan.Moves, leaving)
	p.moves, p.droppedFrozen = Reachable(p.moves, p.frozen)
	if len(p.moves) == 0 {
		return Batch{}
	}
	if err := p.run(p.r.plan); err != nil {
		return Batch{} // the plan stages return no error
	}
	return p.batch
}

// screen is stage 4.
func (p *Pass) screen() error {
	p.moves, p.rejected = p.st.Screen(p.moves)
	return nil
}

// admit is stage 5. The admitted moves of evicted shards carry the control
// policy's evidence as their reason.
func (p *Pass) admit() error {
	plan := p.plan
	plan.Moves = p.moves
	p.moves, p.refused = p.dec.Admit(p.sv, plan)
	explainEvictions(p.moves, p.evict)
	return nil
}

// verify is stage 6.
func (p *Pass) verify() error {
	if len(p.moves) > 0 {
		p.batch, p.rejected = VerifyMoves(p.st, p.moves, p.sv.Constraints, p.sv.Shards, p.DefaultReason(), p.rejected)
	}
	return nil
}

// End closes the round with the commit's results: ops are the results of the
// Verify batch's moves in order (err: the commit failed as a whole, nothing
// applied). It tells the controller what happened (the commit's rejections
// count towards control.Backoff) and returns the outcome, with the messages
// the committed moves need (stage 8). The driver calls End for every pass
// that started, whether it solved or not.
func (p *Pass) End(ops []OpResult, err error) RoundOutcome {
	if p.phase == phaseStarted {
		p.Carried(nil)
	}
	out := RoundOutcome{Decision: p.dec, Findings: p.pol.Findings, Skipped: p.skipped, DroppedUnreachable: p.droppedFrozen}
	if p.phase == phaseEnded || p.skipped != "" {
		return out
	}
	p.phase = phaseEnded
	out.Solved, out.Plan, out.SolveErr = p.solved, p.plan, p.solveErr
	out.Refused, out.Rejected, out.Accepted = p.refused, p.rejected, p.batch.Moves
	out.CommitErr = err
	if p.solved {
		out.Infeasible = Infeasible(p.plan)
	}
	if err == nil && len(p.batch.Moves) > 0 {
		out.Applied, out.Tell, out.Failed = CarryOut(p.batch, ops)
	}
	obs := control.RoundResult{Round: p.dec.Round, At: p.in.Now, P99: control.WorstP99(p.view), MovesActive: len(p.view.InFlight), SolveErr: p.solveErr}
	if p.solved {
		obs.Planned, obs.Applied, obs.Rejected = len(p.plan.Moves), out.Applied, p.rejected
	}
	out.ObserveErr = p.r.cfg.Controller.Observe(obs)
	out.Decision = p.dec
	if p.solved {
		out.Held = p.r.cfg.Controller.Held(p.in.Now)
	}
	return out
}

// RoundOutcome is what one round did.
type RoundOutcome struct {
	// Decision is the controller's, with the control policies' merged;
	// Findings the control policies'.
	Decision control.Decision
	Findings []control.Finding
	// Skipped says why the round decided nothing ("" when it ran).
	Skipped string
	// Solved says the policy planned (Plan); SolveErr is its error.
	Solved   bool
	Plan     interfaces.Plan
	SolveErr error
	// Infeasible maps each shard the plan placed nowhere to why
	// (InfeasibleWhy): one shard's pin to a missing child is its own, never
	// the tier's.
	Infeasible map[interfaces.ShardID]string
	// Refused are the moves admission kept out (budget, emergency scope,
	// anti-bounce, held); Rejected the screen's and the verification's
	// rejections (what the controller's backoff counts).
	Refused  []control.Rejection
	Rejected []balancer.Rejection
	// Accepted are the verified moves the batch committed (or tried to);
	// Applied those that committed; Failed the ones whose commit failed;
	// CommitErr the commit's error as a whole.
	Accepted  []interfaces.Move
	Applied   []interfaces.Move
	Failed    int
	CommitErr error
	// Tell are the messages the committed moves need: an Assign to the new
	// owner of a direct move, a Revoke to the old owner of a begun one.
	Tell []Tell
	// Held are the moves the controller holds back after the round
	// (control.Backoff), when it solved.
	Held []control.Held
	// ObserveErr is the controller's error taking the round's result.
	ObserveErr error
	// DroppedUnreachable counts the planned moves to or off an unreachable
	// child that the round dropped (RoundInput.Unreachable).
	DroppedUnreachable int
}

// DefaultReason is the reason given to the round's moves that carry none.
func (p *Pass) DefaultReason() string { return "policy " + p.r.cfg.Policy.Name() }

// explainEvictions gives the moves of evicted shards the policy's evidence as
// their reason (what strata explain shows) and the policy as their goal.
func explainEvictions(moves []interfaces.Move, ev map[interfaces.ShardID]control.Eviction) {
	for i := range moves {
		e, ok := ev[moves[i].Shard]
		if !ok || moves[i].From != e.From {
			continue
		}
		moves[i].Reason = e.Reason
		if pol, _, ok := strings.Cut(e.Reason, ":"); ok {
			moves[i].Goal = pol
		}
	}
}
