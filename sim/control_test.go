package sim

import (
	"context"
	"strings"
	"testing"

	"github.com/strata-sched/strata/interfaces"
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

var stepCfg = StepConfig{Trigger: 1.15, Target: 0.85, Floor: 0.1}

func TestControlStepIdleWhenBalanced(t *testing.T) {
	calls := 0
	v := testView(interfaces.ChildActive, map[string]string{"s1": "a", "s2": "b", "s3": "c", "s4": "a"})
	// a: 4, b: 2, c: 2 → max/mean = 0.4/0.267 = 1.5 > 1.15 → periodic.
	res, err := ControlStep(context.Background(), fixedPolicy{calls: &calls}, v, stepCfg)
	if err != nil || res.Mode != ModePeriodic || calls != 1 {
		t.Fatalf("imbalanced: mode %s calls %d err %v", res.Mode, calls, err)
	}
	v = testView(interfaces.ChildActive, map[string]string{"s1": "a", "s2": "b", "s3": "c", "s4": "c"})
	v.Children[2].Capacity = cpu(20) // a 0.2, b 0.2, c 0.2
	res, err = ControlStep(context.Background(), fixedPolicy{calls: &calls}, v, stepCfg)
	if err != nil || res.Mode != ModeIdle || calls != 1 {
		t.Fatalf("balanced: mode %s calls %d err %v; the policy must not be called", res.Mode, calls, err)
	}
}

func TestControlStepEmergencyMovesOnlyWhatNeedsIt(t *testing.T) {
	calls := 0
	v := testView(interfaces.ChildFailed, map[string]string{"s1": "a", "s2": "c", "s3": "b"})
	plan := []interfaces.Move{
		mv("s2", "c", "b"), // evacuation: accepted
		mv("s4", "", "a"),  // first placement: accepted
		mv("s1", "a", "b"), // rebalancing in an emergency: rejected
	}
	res, err := ControlStep(context.Background(), fixedPolicy{moves: plan, calls: &calls}, v, stepCfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Mode != ModeEmergency {
		t.Fatalf("mode %s", res.Mode)
	}
	if len(res.Accepted) != 2 || res.Accepted[0].Shard != "s2" || res.Accepted[1].Shard != "s4" {
		t.Errorf("accepted %+v", res.Accepted)
	}
	if len(res.Rejected) != 1 || !strings.Contains(res.Rejected[0].Why, "emergency") {
		t.Errorf("rejected %+v", res.Rejected)
	}
}

func TestControlStepVerifies(t *testing.T) {
	calls := 0
	v := testView(interfaces.ChildFailed, map[string]string{"s1": "a", "s2": "a", "s3": "a", "s4": "a"})
	v.Children[1].Capacity = cpu(3)                                                 // b fits one shard
	v.Shards = append(v.Shards, interfaces.Shard{ID: "s5", Job: "j", Load: cpu(1)}) // unplaced → emergency
	stale := mv("s5", "", "b")
	plan := []interfaces.Move{
		mv("s5", "", "c"), // c is failed
		stale,             // fits b (1 of 3)
		mv("s5", "", "a"), // s5 already moved in this plan
	}
	res, err := ControlStep(context.Background(), fixedPolicy{moves: plan, calls: &calls}, v, stepCfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Accepted) != 1 || res.Accepted[0].To != "b" {
		t.Errorf("accepted %+v", res.Accepted)
	}
	if len(res.Rejected) != 2 {
		t.Fatalf("rejected %+v", res.Rejected)
	}
	if !strings.Contains(res.Rejected[0].Why, "failed") {
		t.Errorf("move to a failed child: %s", res.Rejected[0].Why)
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
		mv("s3", "a", "c"), // fine
	}
	res, err = ControlStep(context.Background(), fixedPolicy{moves: plan, calls: &calls}, v, stepCfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Mode != ModePeriodic || len(res.Accepted) != 1 || res.Accepted[0].Shard != "s3" {
		t.Fatalf("mode %s accepted %+v rejected %+v", res.Mode, res.Accepted, res.Rejected)
	}
	for i, want := range []string{"capacity", "epoch", "from"} {
		if !strings.Contains(res.Rejected[i].Why, want) {
			t.Errorf("rejection %d: %q does not mention %q", i, res.Rejected[i].Why, want)
		}
	}
}

func TestControlStepMoveBudget(t *testing.T) {
	calls := 0
	v := testView(interfaces.ChildActive, map[string]string{"s1": "a", "s2": "a", "s3": "a", "s4": "a"})
	plan := []interfaces.Move{mv("s1", "a", "b"), mv("s2", "a", "c"), mv("s3", "a", "b")}
	cfg := stepCfg
	cfg.MoveBudget = 2
	var seen *interfaces.View
	pol := viewSpy{fixedPolicy{moves: plan, calls: &calls}, &seen}
	res, err := ControlStep(context.Background(), pol, v, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Accepted) != 2 || len(res.Rejected) != 1 || !strings.Contains(res.Rejected[0].Why, "budget") {
		t.Fatalf("accepted %+v rejected %+v", res.Accepted, res.Rejected)
	}
	found := false
	for _, c := range seen.Constraints {
		if c.Kind == interfaces.ConstraintMaxMoves && c.Max == 2 {
			found = true
		}
	}
	if !found {
		t.Error("the policy was not told the move budget")
	}
	if len(v.Constraints) != 0 {
		t.Error("ControlStep modified the caller's view")
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

func TestControlStepNoActiveChild(t *testing.T) {
	calls := 0
	v := testView(interfaces.ChildFailed, map[string]string{"s1": "c"})
	v.Children[0].State = interfaces.ChildFailed
	v.Children[1].State = interfaces.ChildDraining
	res, err := ControlStep(context.Background(), fixedPolicy{calls: &calls}, v, stepCfg)
	if err != nil || res.Mode != ModeIdle || calls != 0 || !strings.Contains(res.Why, "no active child") {
		t.Fatalf("mode %s why %q calls %d err %v", res.Mode, res.Why, calls, err)
	}
}
