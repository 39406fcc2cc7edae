package tierd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/tiers"
)

// A what-if plan: Plan solves the live state with the requested changes (children
// treated as draining, extra constraints, another policy) and commits nothing; it
// returns a token bound to the state index it saw. ApplyPlan carries out exactly
// that plan — the drains it assumed, then its moves, each verified again — and
// refuses when the state has changed since.

// planTTL is how long a plan token stays valid.
const planTTL = 10 * time.Minute

type pendingPlan struct {
	index uint64
	drain []interfaces.ChildID
	moves []interfaces.Move
	// stranded counts the plan's infeasible shards that are placed now (its
	// drains would leave them nowhere to go): such a plan is shown but never
	// applied.
	stranded int
	// rules are the tier-level constraints the policy planned under (the
	// rules in force and the request's): the moves are verified against them.
	rules []interfaces.Constraint
	// planned is the view's shards, with the loads the policy planned on:
	// the moves are verified on them (balancer.PlannedLoads).
	planned []interfaces.Shard
	created time.Time
	// used says how ApplyPlan used the token ("" while unused): a token is
	// applied at most once, and a second try says what became of the first.
	used string
}

// Plan returns the plan the policy would make for this instance under the
// requested changes, without applying anything.
func (d *Daemon) Plan(ctx context.Context, req *wire.AdminPlanRequest) (*wire.AdminPlanResponse, error) {
	if resp, ok, err := forward(ctx, d, func(c wire.AdminClient) (*wire.AdminPlanResponse, error) { return c.Plan(ctx, req) }); ok {
		return resp, err
	}
	policy := d.policy
	if name := req.GetPolicy(); name != "" {
		p, err := tiers.New(name, nil)
		if err != nil {
			return nil, wire.ToStatus(fmt.Errorf("policy: %w", err))
		}
		policy = p
	}
	// The view the control loop would plan from (baseView), with the
	// cooperation rules in force, without a round's side effects.
	d.decide.Lock()
	index := d.tier.FSM.AppliedIndex()
	view, _ := d.baseView(time.Now())
	d.decide.Unlock()
	view.Constraints = append(view.Constraints, d.rulesInForce(view)...)
	drain := make([]interfaces.ChildID, 0, len(req.GetDrainChildren()))
	for _, id := range req.GetDrainChildren() {
		found := false
		for i := range view.Children {
			if string(view.Children[i].ID) == id {
				found = true
				if view.Children[i].State == interfaces.ChildActive {
					view.Children[i].State = interfaces.ChildDraining
				}
			}
		}
		if !found {
			return nil, wire.ToStatus(fmt.Errorf("drain_children: child %q of %s/%s: %w", id, d.cfg.Tier, d.cfg.Instance, interfaces.ErrNotFound))
		}
		drain = append(drain, interfaces.ChildID(id))
	}
	for i, c := range req.GetConstraints() {
		dc, err := wire.ConstraintFromWire(c)
		if err != nil {
			return nil, wire.ToStatus(fmt.Errorf("constraints[%d]: %w", i, err))
		}
		view.Constraints = append(view.Constraints, dc)
	}
	view.Seed = req.GetSeed()
	if view.Seed == 0 {
		view.Seed = int64(index)
	}
	sctx, cancel := context.WithTimeout(ctx, d.cfg.SolveTimeout)
	plan, err := policy.Plan(sctx, view)
	cancel()
	if err != nil {
		return nil, wire.ToStatus(fmt.Errorf("policy %s: %w", policy.Name(), err))
	}
	token, err := newToken()
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	d.mu.Lock()
	if d.plans == nil {
		d.plans = map[string]pendingPlan{}
	}
	for t, p := range d.plans {
		if time.Since(p.created) > planTTL {
			delete(d.plans, t)
		}
	}
	stranded := strandedShards(view, plan)
	d.plans[token] = pendingPlan{index: index, drain: drain, moves: plan.Moves, stranded: stranded, rules: view.Constraints, planned: view.Shards, created: time.Now()}
	d.mu.Unlock()
	return &wire.AdminPlanResponse{Plan: wire.PlanToWire(plan), Token: token, StateIndex: index, Stranded: uint32(stranded)}, nil
}

// strandedShards counts the plan's infeasible shards that v has placed: the
// ones a drain would leave with nowhere to go. A shard unplaced before the plan
// and still unplaceable (one larger than any child) is not the plan's doing,
// and must not keep every plan from being applied.
func strandedShards(v *interfaces.View, plan interfaces.Plan) int {
	if len(plan.Infeasible) == 0 {
		return 0
	}
	placed := make(map[interfaces.ShardID]bool, len(v.Assignments))
	for _, a := range v.Assignments {
		placed[a.Shard] = true
	}
	n := 0
	for _, inf := range plan.Infeasible {
		if placed[inf.Shard] {
			n++
		}
	}
	return n
}

// ApplyPlan carries out a plan made by Plan, if the state has not changed since.
func (d *Daemon) ApplyPlan(ctx context.Context, req *wire.ApplyPlanRequest) (*wire.ApplyPlanResponse, error) {
	if resp, ok, err := forward(ctx, d, func(c wire.AdminClient) (*wire.ApplyPlanResponse, error) { return c.ApplyPlan(ctx, req) }); ok {
		return resp, err
	}
	// Under decide: two applies of one token are decided one after the other.
	d.decide.Lock()
	defer d.decide.Unlock()
	tok := req.GetToken()
	d.mu.Lock()
	p, ok := d.plans[tok]
	d.mu.Unlock()
	if !ok || time.Since(p.created) > planTTL {
		return nil, wire.ToStatus(fmt.Errorf("plan token %q: unknown or expired (tokens live %v on the leader that made them): %w", tok, planTTL, interfaces.ErrNotFound))
	}
	if p.used != "" {
		return nil, wire.ToStatus(fmt.Errorf("plan token %q was used already: %s; a token applies once, plan again: %w", tok, p.used, interfaces.ErrConflict))
	}
	if p.stranded > 0 {
		return nil, wire.ToStatus(fmt.Errorf("plan token %q: %s placed now could not be placed elsewhere (plan status infeasible), so the plan is not applied: its drains would leave them with nowhere to go; make room (undrain, add capacity) and plan again: %w", tok, shardCount(p.stranded), interfaces.ErrConflict))
	}
	if now := d.tier.FSM.AppliedIndex(); now != p.index {
		return nil, wire.ToStatus(fmt.Errorf("the state changed since the plan was made (index %d, now %d); plan again: %w", p.index, now, interfaces.ErrConflict))
	}
	// Marked used when the apply ends (d.decide keeps a second apply of it
	// waiting until then).
	markUsed := func(how string) {
		d.mu.Lock()
		if q, ok := d.plans[tok]; ok {
			q.used = how
			d.plans[tok] = q
		}
		d.mu.Unlock()
	}
	// The drains and the moves in one entry: all of the plan, or nothing.
	var drain []interfaces.ChildID
	for _, id := range p.drain {
		if c, ok := d.tier.FSM.Child(id); ok && c.State == interfaces.ChildActive {
			drain = append(drain, id)
		}
	}
	applied, rejected, err := d.commitPlanBatch(ctx, drain, p.moves, p.rules, p.planned, "plan applied by an operator")
	if err != nil {
		markUsed(fmt.Sprintf("its apply failed (%v)", err))
		return nil, wire.ToStatus(err)
	}
	markUsed(fmt.Sprintf("applied at %s, %d moves committed, %d refused (state index %d)", time.Now().UTC().Format(time.RFC3339), len(applied), rejected, d.tier.FSM.AppliedIndex()))
	d.poke()
	return &wire.ApplyPlanResponse{MovesCommitted: int64(len(applied)), MovesRefused: int64(len(p.moves) - len(applied)), StateIndex: d.tier.FSM.AppliedIndex()}, nil
}

// shardCount is "1 shard" or "N shards".
func shardCount(n int) string {
	if n == 1 {
		return "1 shard"
	}
	return fmt.Sprintf("%d shards", n)
}

func newToken() (string, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
