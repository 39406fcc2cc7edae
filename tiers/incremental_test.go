package tiers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/strata-sched/strata/interfaces"
)

func incView(n, m int) *interfaces.View {
	v := &interfaces.View{Tier: "region", Instance: "r", Seed: 1}
	for c := 0; c < m; c++ {
		v.Children = append(v.Children, interfaces.Child{ID: interfaces.ChildID(fmt.Sprintf("h%02d", c)), Tier: "host", Capacity: interfaces.Load{CPU: 10 + float64(c%3), Mem: 300}})
	}
	for s := 0; s < n; s++ {
		v.Shards = append(v.Shards, interfaces.Shard{ID: interfaces.ShardID(fmt.Sprintf("s%03d", s)), Job: "j", Load: interfaces.Load{CPU: 0.05 + float64(s%7)*0.02, Mem: 1 + float64(s%5)}})
	}
	return v
}

// apply puts the plan's moves into the view's assignments.
func apply(v *interfaces.View, plan interfaces.Plan) {
	owner := map[interfaces.ShardID]int{}
	for i, a := range v.Assignments {
		owner[a.Shard] = i
	}
	for _, m := range plan.Moves {
		if i, ok := owner[m.Shard]; ok {
			v.Assignments[i] = interfaces.Assignment{Shard: m.Shard, Child: m.To, Epoch: m.Epoch + 1}
		} else {
			owner[m.Shard] = len(v.Assignments)
			v.Assignments = append(v.Assignments, interfaces.Assignment{Shard: m.Shard, Child: m.To, Epoch: m.Epoch + 1})
		}
	}
}

// TestIncrementalPolicyThroughViews: the policy works through plain Plan
// calls (a tier that does not track changes): the first places every
// shard, each move explained; a second with nothing changed moves nothing
// more than settling; draining a child empties it; a view with shard
// constraints falls back to the local solver.
func TestIncrementalPolicyThroughViews(t *testing.T) {
	pol, err := New("incremental", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := pol.(IncrementalPolicy); !ok {
		t.Fatal("the incremental policy does not offer IncrementalPolicy")
	}
	v := incView(300, 6)
	plan, err := pol.Plan(context.Background(), v)
	if err != nil || plan.Status != interfaces.StatusOK || len(plan.Moves) < 300 {
		t.Fatalf("place: %v, status %s, %d moves", err, plan.Status, len(plan.Moves))
	}
	for _, m := range plan.Moves {
		if m.Reason == "" || m.Goal == "" || interfaces.ValidateMoveFields("move", m) != nil {
			t.Fatalf("move without a valid explanation: %+v", m)
		}
	}
	apply(v, plan)
	for i := 0; i < 5; i++ {
		plan, err = pol.Plan(context.Background(), v)
		if err != nil {
			t.Fatal(err)
		}
		apply(v, plan)
	}
	if len(plan.Moves) != 0 {
		t.Errorf("settled rounds still move %d shards", len(plan.Moves))
	}
	v.Children[0].State = interfaces.ChildDraining
	plan, err = pol.Plan(context.Background(), v)
	if err != nil {
		t.Fatal(err)
	}
	apply(v, plan)
	for _, a := range v.Assignments {
		if a.Child == v.Children[0].ID {
			t.Fatalf("shard %s still on the drained child", a.Shard)
		}
	}
	v.Shards[0].Constraints.Pinned = v.Children[1].ID
	if plan, err = pol.Plan(context.Background(), v); err != nil || plan.Status != interfaces.StatusOK {
		t.Fatalf("a view with a pin: %v %s", err, plan.Status)
	}
}

// TestIncrementalPolicyObserve: fed changes, a round moves only what they
// call for; bad changes are refused whole, naming the field.
func TestIncrementalPolicyObserve(t *testing.T) {
	p, err := NewIncremental(interfaces.PolicyConfig{"load_threshold": "0.1", "full_every": "0"})
	if err != nil {
		t.Fatal(err)
	}
	v := incView(200, 5)
	if err := p.Observe(Changes{Children: v.Children, Added: v.Shards}); err != nil {
		t.Fatal(err)
	}
	plan, err := p.Round(context.Background(), 1)
	if err != nil || len(plan.Moves) < 200 {
		t.Fatalf("%v, %d moves", err, len(plan.Moves))
	}
	for i := 0; i < 5; i++ {
		if plan, err = p.Round(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
	}
	if len(plan.Moves) != 0 {
		t.Fatalf("no change, %d moves", len(plan.Moves))
	}
	// A change below the threshold is not recorded.
	small := v.Shards[3].Load
	small.CPU *= 1.05
	if err := p.Observe(Changes{Loads: []ShardLoad{{Shard: v.Shards[3].ID, Load: small}}}); err != nil {
		t.Fatal(err)
	}
	if got := p.x.Load(p.shardIdx[v.Shards[3].ID])[0]; got != v.Shards[3].Load.CPU {
		t.Errorf("a 5%% change under a 10%% threshold was recorded: %g", got)
	}
	// Bad input: nothing of it applied.
	before := len(p.shardIdx)
	for _, tc := range []struct {
		ch   Changes
		want string
	}{
		{Changes{Added: []interfaces.Shard{{ID: "new"}}, Removed: []interfaces.ShardID{"ghost"}}, "removed[0]: shard ghost"},
		{Changes{Loads: []ShardLoad{{Shard: "ghost"}}}, "loads[0]: shard ghost"},
		{Changes{Added: []interfaces.Shard{{ID: v.Shards[0].ID}}}, "added[0]: shard s000: already known"},
		{Changes{Assigned: []interfaces.Assignment{{Shard: v.Shards[0].ID, Child: "nowhere"}}}, "assigned[0]: child nowhere"},
		{Changes{Added: []interfaces.Shard{{ID: "x", Load: interfaces.Load{Extra: map[string]float64{"gpu": 1}}}}}, "added[0] (x): load: extra dimensions"},
	} {
		err := p.Observe(tc.ch)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want an error containing %q, got %v", tc.want, err)
		}
		if len(p.shardIdx) != before {
			t.Fatalf("a refused change was half applied: %d shards, was %d", len(p.shardIdx), before)
		}
	}
	if _, err := NewIncremental(interfaces.PolicyConfig{"tolerance": "2"}); err == nil || !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), `key "tolerance"`) {
		t.Errorf("tolerance 2: %v", err)
	}
	if _, err := NewIncremental(interfaces.PolicyConfig{"bogus": "1"}); err == nil || !strings.Contains(err.Error(), `unknown key "bogus"`) {
		t.Errorf("bogus key: %v", err)
	}
	// The periodic full solve: every 2nd round with full_every 2.
	q, _ := NewIncremental(interfaces.PolicyConfig{"full_every": "2"})
	if err := q.Observe(Changes{Children: v.Children, Added: v.Shards}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Round(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	full, err := q.Round(context.Background(), 1)
	if err != nil || full.Status != interfaces.StatusOK {
		t.Fatalf("full solve: %v %s", err, full.Status)
	}
}

// TestShapeOf: the shape of a region's hosts: count, largest, largest
// free, and histograms that count every active host once.
func TestShapeOf(t *testing.T) {
	hosts := []interfaces.Child{
		{ID: "a", Capacity: interfaces.Load{CPU: 8, Mem: 64}},
		{ID: "b", Capacity: interfaces.Load{CPU: 16, Mem: 32}},
		{ID: "c", Capacity: interfaces.Load{CPU: 32, Mem: 32}, State: interfaces.ChildFailed},
	}
	sh := ShapeOf(hosts, []interfaces.Load{{CPU: 2, Mem: 60}, {CPU: 1, Mem: 0}, {}})
	if sh.Hosts != 2 || sh.Largest.CPU != 16 || sh.Largest.Mem != 64 || sh.LargestFree.CPU != 15 || sh.LargestFree.Mem != 32 {
		t.Errorf("shape %+v", sh)
	}
	for r, hist := range sh.FreeHistogram {
		n := 0
		for _, c := range hist {
			n += c
		}
		if n != 2 || len(hist) != ShapeBuckets {
			t.Errorf("%s: histogram %v", r, hist)
		}
	}
}
