package sim

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/tiers/control"
)

// fixedPolicy returns the same moves whatever the view, and counts its calls.
type fixedPolicy struct {
	moves []interfaces.Move
	calls *int
}

func (p fixedPolicy) Name() string { return "fixed" }
func (p fixedPolicy) Plan(context.Context, *interfaces.View) (interfaces.Plan, error) {
	*p.calls++
	return interfaces.Plan{Moves: p.moves}, nil
}

func cpu(x float64) interfaces.Load { return interfaces.Load{CPU: x} }

// view: children a, b (cpu 10 each) and c; shards s1..s4 of 2 cpu.
func testView(cState interfaces.ChildState, place map[string]string) *interfaces.View {
	v := &interfaces.View{Tier: "region", Instance: "r"}
	for _, id := range []string{"a", "b", "c"} {
		st := interfaces.ChildActive
		if id == "c" {
			st = cState
		}
		v.Children = append(v.Children, interfaces.Child{ID: interfaces.ChildID(id), Tier: "host", Capacity: cpu(10), State: st})
	}
	for _, id := range []string{"s1", "s2", "s3", "s4"} {
		v.Shards = append(v.Shards, interfaces.Shard{ID: interfaces.ShardID(id), Job: "j", Load: cpu(2)})
		if c, ok := place[id]; ok {
			v.Assignments = append(v.Assignments, interfaces.Assignment{Shard: interfaces.ShardID(id), Child: interfaces.ChildID(c), Epoch: 3})
		}
	}
	return v
}

func mv(shard, from, to string) interfaces.Move {
	return interfaces.Move{Shard: interfaces.ShardID(shard), From: interfaces.ChildID(from), To: interfaces.ChildID(to), Epoch: 3}
}

func newCtl(t *testing.T) *control.Controller {
	t.Helper()
	c, err := control.New(control.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func input(v *interfaces.View, sec int) control.Input {
	v.Now = Epoch.Add(time.Duration(sec) * time.Second)
	return control.Input{Now: v.Now, View: v}
}

func all(ms []interfaces.Move) []interfaces.Move { return ms }

// TestControlRoundHoldsWhenBalanced: the round is the controller's — a balanced
// tier holds without calling the policy; an imbalanced one solves, with the
// controller's budget in the policy's view.
func TestControlRoundHoldsWhenBalanced(t *testing.T) {
	calls := 0
	ctl := newCtl(t)
	v := testView(interfaces.ChildActive, map[string]string{"s1": "a", "s2": "b", "s3": "c", "s4": "c"})
	v.Children[2].Capacity = cpu(20) // a 0.2, b 0.2, c 0.2
	out, err := ControlRound(context.Background(), ctl, fixedPolicy{calls: &calls}, input(v, 1), all)
	if err != nil || out.Decision.Mode != control.ModeHold || calls != 0 {
		t.Fatalf("balanced: mode %s calls %d err %v; want hold without calling the policy", out.Decision.Mode, calls, err)
	}
	// a: 4, b: 2, c: 2 → max/LB = 0.4/0.267 = 1.5, far outside the dead band.
	v = testView(interfaces.ChildActive, map[string]string{"s1": "a", "s2": "b", "s3": "c", "s4": "a"})
	var seen *interfaces.View
	out, err = ControlRound(context.Background(), ctl, viewSpy{fixedPolicy{moves: []interfaces.Move{mv("s4", "a", "b")}, calls: &calls}, &seen}, input(v, 2), all)
	if err != nil || out.Decision.Mode != control.ModePeriodic || calls != 1 {
		t.Fatalf("imbalanced: mode %s calls %d err %v", out.Decision.Mode, calls, err)
	}
	budget := false
	for _, c := range seen.Constraints {
		if c.Kind == interfaces.ConstraintMaxMoves && c.Max == out.Decision.MaxMoves && c.Max > 0 {
			budget = true
		}
	}
	if !budget {
		t.Errorf("the policy was not given the round's budget (%d moves): %+v", out.Decision.MaxMoves, seen.Constraints)
	}
	if len(v.Constraints) != 0 {
		t.Error("ControlRound modified the caller's view")
	}
	if len(out.Applied) != 1 || ctl.History()[1].Applied != 1 {
		t.Errorf("applied %v; the controller's record says %d", out.Applied, ctl.History()[1].Applied)
	}
}

func TestControlRoundEmergencyMovesOnlyWhatNeedsIt(t *testing.T) {
	calls := 0
	v := testView(interfaces.ChildFailed, map[string]string{"s1": "a", "s2": "c", "s3": "b"})
	plan := []interfaces.Move{
		mv("s2", "c", "b"), // evacuation: accepted
		mv("s4", "", "a"),  // first placement: accepted
		mv("s1", "a", "b"), // rebalancing in an emergency: rejected
	}
	out, err := ControlRound(context.Background(), newCtl(t), fixedPolicy{moves: plan, calls: &calls}, input(v, 1), all)
	if err != nil {
		t.Fatal(err)
	}
	if out.Decision.Mode != control.ModeEmergency {
		t.Fatalf("mode %s", out.Decision.Mode)
	}
	if len(out.Accepted) != 2 || out.Accepted[0].Shard != "s2" || out.Accepted[1].Shard != "s4" {
		t.Errorf("accepted %+v", out.Accepted)
	}
	if len(out.Rejected) != 1 || !strings.Contains(out.Rejected[0].Why, "emergency") {
		t.Errorf("rejected %+v", out.Rejected)
	}
}

// TestControlRoundVerifies: what the controller admits is still verified, as
// the daemons' commit verifies it.
func TestControlRoundVerifies(t *testing.T) {
	calls := 0
	v := testView(interfaces.ChildFailed, map[string]string{"s1": "a", "s2": "a", "s3": "a", "s4": "a"})
	v.Children[1].Capacity = cpu(3)                                                                                                     // b fits one shard
	v.Shards = append(v.Shards, interfaces.Shard{ID: "s5", Job: "j", Load: cpu(1)}, interfaces.Shard{ID: "s6", Job: "j", Load: cpu(1)}) // unplaced → emergency
	plan := []interfaces.Move{
		mv("s5", "", "c"), // c is failed
		mv("s6", "", "b"), // fits b (1 of 3)
		mv("s6", "", "a"), // s6 already has a move in this plan
		mv("s5", "", "b"), // so has s5 (a plan moves a shard once, as the FSM checks)
	}
	out, err := ControlRound(context.Background(), newCtl(t), fixedPolicy{moves: plan, calls: &calls}, input(v, 1), all)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Accepted) != 1 || out.Accepted[0].Shard != "s6" || out.Accepted[0].To != "b" {
		t.Errorf("accepted %+v", out.Accepted)
	}
	if len(out.Rejected) != 3 || !strings.Contains(out.Rejected[0].Why, "failed") ||
		!strings.Contains(out.Rejected[1].Why, "earlier in this plan") || !strings.Contains(out.Rejected[2].Why, "earlier in this plan") {
		t.Fatalf("rejected %+v", out.Rejected)
	}

	// Periodic round: over capacity, stale epoch and wrong source are refused.
	v = testView(interfaces.ChildActive, map[string]string{"s1": "a", "s2": "a", "s3": "a", "s4": "b"})
	v.Children[1].Capacity = cpu(3)
	badEpoch := mv("s2", "a", "c")
	badEpoch.Epoch = 2
	plan = []interfaces.Move{
		mv("s1", "a", "b"), // b: 2+2 > 3
		badEpoch,
		mv("s3", "b", "c"), // s3 is on a
		mv("s4", "b", "c"), // fine
	}
	out, err = ControlRound(context.Background(), newCtl(t), fixedPolicy{moves: plan, calls: &calls}, input(v, 1), all)
	if err != nil {
		t.Fatal(err)
	}
	if out.Decision.Mode != control.ModePeriodic || len(out.Accepted) != 1 || out.Accepted[0].Shard != "s4" {
		t.Fatalf("mode %s accepted %+v rejected %+v", out.Decision.Mode, out.Accepted, out.Rejected)
	}
	// The stale epoch and the wrong source are screened out before admission
	// (refused whatever else the plan does), capacity is verified after it.
	for i, want := range []string{"epoch", "expects it on", "capacity"} {
		if !strings.Contains(out.Rejected[i].Why, want) {
			t.Errorf("rejection %d: %q does not mention %q", i, out.Rejected[i].Why, want)
		}
	}
}

// TestControlRoundAntiBounce: a shard the round moved may not go back within
// the bounce window: the policy's view forbids it and Admit refuses it.
func TestControlRoundAntiBounce(t *testing.T) {
	calls := 0
	ctl := newCtl(t)
	v := testView(interfaces.ChildActive, map[string]string{"s1": "a", "s2": "a", "s3": "b", "s4": "c"})
	out, err := ControlRound(context.Background(), ctl, fixedPolicy{moves: []interfaces.Move{mv("s1", "a", "b")}, calls: &calls}, input(v, 1), all)
	if err != nil || len(out.Applied) != 1 {
		t.Fatalf("first round: applied %v, rejected %v, err %v", out.Applied, out.Rejected, err)
	}
	// s1 is on b now; b is the busiest; the policy wants it back on a.
	v = testView(interfaces.ChildActive, map[string]string{"s1": "b", "s2": "a", "s3": "b", "s4": "c"})
	for i := range v.Assignments {
		if v.Assignments[i].Shard == "s1" {
			v.Assignments[i].Epoch = 4
		}
	}
	back := mv("s1", "b", "a")
	back.Epoch = 4
	var seen *interfaces.View
	pol := viewSpy{fixedPolicy{moves: []interfaces.Move{back}, calls: &calls}, &seen}
	for sec := 2; sec < 60 && seen == nil; sec++ { // past the cooldown
		v.Constraints = nil
		if out, err = ControlRound(context.Background(), ctl, pol, input(v, sec*30), all); err != nil {
			t.Fatal(err)
		}
	}
	if seen == nil {
		t.Fatal("the controller never solved again")
	}
	forbidden := false
	for _, c := range seen.Constraints {
		if c.Kind == interfaces.ConstraintAllowed && slices.Contains(c.Shards, "s1") && !slices.Contains(c.Children, "a") {
			forbidden = true
		}
	}
	if !forbidden {
		t.Errorf("the policy's view does not forbid s1 → a: %+v", seen.Constraints)
	}
	if len(out.Applied) != 0 || len(out.Rejected) != 1 || !strings.Contains(out.Rejected[0].Why, "anti-bounce") {
		t.Errorf("s1 went back: applied %v rejected %+v", out.Applied, out.Rejected)
	}
}

// TestControlRoundGuard: most children silent at once → the mass-failure guard
// holds the round (no solve, nobody declared failed) and raises the alert; an
// operator's acknowledgement fails them over.
func TestControlRoundGuard(t *testing.T) {
	calls := 0
	ctl := newCtl(t)
	v := testView(interfaces.ChildActive, map[string]string{"s1": "a", "s2": "b", "s3": "c", "s4": "c"})
	in := input(v, 100)
	in.Silent = map[interfaces.ChildID]time.Time{"b": Epoch, "c": Epoch} // 2 of 3, long past the grace
	out, err := ControlRound(context.Background(), ctl, fixedPolicy{moves: []interfaces.Move{mv("s2", "b", "a")}, calls: &calls}, in, all)
	if err != nil {
		t.Fatal(err)
	}
	d := out.Decision
	if d.Mode != control.ModeHold || !d.Record.Guard || len(d.DeclareFailed) != 0 || calls != 0 || len(out.Applied) != 0 {
		t.Fatalf("mode %s guard %v declared %v calls %d applied %v", d.Mode, d.Record.Guard, d.DeclareFailed, calls, out.Applied)
	}
	if len(d.Alerts) == 0 || d.Alerts[0].Code != control.AlertMassFailure {
		t.Errorf("alerts %v", d.Alerts)
	}
	in = input(v, 130)
	in.Silent = map[interfaces.ChildID]time.Time{"b": Epoch, "c": Epoch}
	in.AckMassFailure = true
	out, err = ControlRound(context.Background(), ctl, fixedPolicy{moves: []interfaces.Move{mv("s2", "b", "a")}, calls: &calls}, in, all)
	if err != nil {
		t.Fatal(err)
	}
	if out.Decision.Mode != control.ModeEmergency || len(out.Decision.DeclareFailed) != 2 || len(out.Applied) != 1 {
		t.Errorf("acknowledged: mode %s declared %v applied %v rejected %v", out.Decision.Mode, out.Decision.DeclareFailed, out.Applied, out.Rejected)
	}
}

type failingPolicy struct{}

func (failingPolicy) Name() string { return "failing" }
func (failingPolicy) Plan(context.Context, *interfaces.View) (interfaces.Plan, error) {
	return interfaces.Plan{}, errors.New("boom")
}

// TestControlRoundSolveError: a failed solve applies nothing and is not an
// error of the round; the controller records it.
func TestControlRoundSolveError(t *testing.T) {
	ctl := newCtl(t)
	v := testView(interfaces.ChildActive, map[string]string{"s1": "a", "s2": "b", "s3": "c", "s4": "a"})
	out, err := ControlRound(context.Background(), ctl, failingPolicy{}, input(v, 1), all)
	if err != nil {
		t.Fatal(err)
	}
	if out.SolveErr == nil || len(out.Applied) != 0 || !strings.Contains(ctl.History()[0].SolveError, "boom") {
		t.Errorf("solve error %v applied %v record %+v", out.SolveErr, out.Applied, ctl.History()[0])
	}
}

type viewSpy struct {
	fixedPolicy
	seen **interfaces.View
}

func (p viewSpy) Plan(ctx context.Context, v *interfaces.View) (interfaces.Plan, error) {
	*p.seen = v
	return p.fixedPolicy.Plan(ctx, v)
}

func TestControlRoundNoActiveChild(t *testing.T) {
	calls := 0
	v := testView(interfaces.ChildFailed, map[string]string{"s1": "c"})
	v.Children[0].State = interfaces.ChildFailed
	v.Children[1].State = interfaces.ChildDraining
	out, err := ControlRound(context.Background(), newCtl(t), fixedPolicy{calls: &calls}, input(v, 1), all)
	if err != nil || out.Decision.Mode != control.ModeHold || calls != 0 || !strings.Contains(out.Decision.Record.Why, "no active child") {
		t.Fatalf("mode %s why %q calls %d err %v", out.Decision.Mode, out.Decision.Record.Why, calls, err)
	}
}

// TestControlRoundVerifiesTierConstraints: after admission, an accepted move
// must keep what the daemons' commit checks (balancer.VerifyRules with
// balancer.CommitRules): the tier's pin, allowed and anti_affinity rules and
// the child's own capacity, counted with the moves accepted before it in the
// round. The tier's capacity limits are left to planning, as at the daemons'
// commit: a move over one is accepted.
func TestControlRoundVerifiesTierConstraints(t *testing.T) {
	calls := 0
	view := func(cCapacity float64) *interfaces.View {
		v := testView(interfaces.ChildActive, map[string]string{"s1": "a", "s2": "a", "s3": "a", "s4": "b"})
		for _, id := range []string{"s5", "s6"} {
			v.Shards = append(v.Shards, interfaces.Shard{ID: interfaces.ShardID(id), Job: "j", Load: cpu(2)})
			v.Assignments = append(v.Assignments, interfaces.Assignment{Shard: interfaces.ShardID(id), Child: "a", Epoch: 3})
		}
		v.Children[2].Capacity = cpu(cCapacity)
		v.Constraints = []interfaces.Constraint{
			{Kind: interfaces.ConstraintPin, Shards: []interfaces.ShardID{"s3"}, Children: []interfaces.ChildID{"a"}},
			{Kind: interfaces.ConstraintAllowed, Shards: []interfaces.ShardID{"s1"}, Children: []interfaces.ChildID{"a", "c"}},
			{Kind: interfaces.ConstraintAntiAffinity, Shards: []interfaces.ShardID{"s2", "s4"}, Max: 1, Reason: "apart"},
			{Kind: interfaces.ConstraintCapacity, Children: []interfaces.ChildID{"c"}, Limit: cpu(3), Reason: "test limit"},
		}
		return v
	}
	// The round's budget is 4 moves: two rounds.
	for _, tc := range []struct {
		cCapacity float64
		plan      []interfaces.Move
		accepted  []string
		want      []string
	}{
		{10, []interfaces.Move{
			mv("s5", "a", "c"), // c: 2 of its limit 3
			mv("s6", "a", "c"), // c: 4 > its limit 3, left to planning
			mv("s2", "a", "b"), // s4 of the same rule is on b
			mv("s3", "a", "b"), // pinned to a
		}, []string{"s5", "s6"}, []string{"the child already holds 1 of the shards of the tier's anti_affinity rule: apart", "pinned to \"a\" by the tier's pin rule"}},
		{3, []interfaces.Move{
			mv("s1", "a", "b"), // allowed on a and c only
			mv("s5", "a", "c"), // c: 2 of its capacity 3
			mv("s6", "a", "c"), // c: 4 > its capacity 3 with s5 counted
		}, []string{"s5"}, []string{"not among the children the tier's allowed rule allows", `target child "c" would carry cpu=4, capacity 3`}},
	} {
		out, err := ControlRound(context.Background(), newCtl(t), fixedPolicy{moves: tc.plan, calls: &calls}, input(view(tc.cCapacity), 1), all)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range out.Accepted {
			got = append(got, string(m.Shard))
		}
		if !slices.Equal(got, tc.accepted) || len(out.Rejected) != len(tc.want) {
			t.Fatalf("mode %s accepted %v rejected %+v; want %v accepted", out.Decision.Mode, got, out.Rejected, tc.accepted)
		}
		for i, w := range tc.want {
			if !strings.Contains(out.Rejected[i].Why, w) {
				t.Errorf("rejection %d: %q does not mention %q", i, out.Rejected[i].Why, w)
			}
		}
	}
}

// daemonAccepts is coordinator/tierd's act → commitMoves on the same view,
// written out as an oracle: Screen, Admit, then balancer.VerifyRules with the
// tier's rules less its capacity limits (tierd's commit leaves those to
// planning).
func daemonAccepts(t *testing.T, v *interfaces.View, plan []interfaces.Move) []interfaces.Move {
	t.Helper()
	dec, err := newCtl(t).Step(input(v, 1))
	if err != nil {
		t.Fatal(err)
	}
	sv := dec.Apply(v)
	st, err := balancer.NewViewState(sv)
	if err != nil {
		t.Fatal(err)
	}
	kept, _ := balancer.Screen(st, plan)
	admitted, _ := dec.Admit(sv, interfaces.Plan{Moves: kept})
	var rules []interfaces.Constraint
	for _, k := range sv.Constraints {
		if k.Kind != interfaces.ConstraintCapacity {
			rules = append(rules, k)
		}
	}
	return balancer.VerifyRules(st, rules, admitted).Accepted
}

// TestControlRoundCommitsAsTheDaemon: the moves a round accepts are those the
// daemons' round commits from the same view and plan — a capacity limit (an
// operator's, or cooperation's load + headroom cap) is not checked at commit,
// a tier-level anti_affinity rule (coop.Derive accepts them from children's
// proposals) is, and so are pin and allowed rules.
func TestControlRoundCommitsAsTheDaemon(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule interfaces.Constraint
		want []string
	}{
		{"capacity limit", interfaces.Constraint{Kind: interfaces.ConstraintCapacity, Children: []interfaces.ChildID{"c"}, Limit: cpu(3), Reason: "limit"}, []string{"s1", "s2"}},
		{"anti_affinity", interfaces.Constraint{Kind: interfaces.ConstraintAntiAffinity, Shards: []interfaces.ShardID{"s1", "s2"}, Max: 1, Reason: "apart"}, []string{"s1"}},
		{"allowed", interfaces.Constraint{Kind: interfaces.ConstraintAllowed, Shards: []interfaces.ShardID{"s2"}, Children: []interfaces.ChildID{"a", "b"}, Reason: "not c"}, []string{"s1"}},
	} {
		v := func() *interfaces.View {
			v := testView(interfaces.ChildActive, map[string]string{"s1": "a", "s2": "a", "s3": "a", "s4": "b"})
			v.Constraints = []interfaces.Constraint{tc.rule}
			return v
		}
		plan := []interfaces.Move{mv("s1", "a", "c"), mv("s2", "a", "c")}
		calls := 0
		out, err := ControlRound(context.Background(), newCtl(t), fixedPolicy{moves: plan, calls: &calls}, input(v(), 1), all)
		if err != nil {
			t.Fatal(err)
		}
		var got, daemon []string
		for _, m := range out.Accepted {
			got = append(got, string(m.Shard))
		}
		for _, m := range daemonAccepts(t, v(), plan) {
			daemon = append(daemon, string(m.Shard))
		}
		if !slices.Equal(got, daemon) || !slices.Equal(got, tc.want) {
			t.Errorf("%s: the simulator accepts %v (rejected %+v), the daemons commit %v; want %v", tc.name, got, out.Rejected, daemon, tc.want)
		}
	}
}
