package coop

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func host(id string, cpu float64, labels map[string]string) interfaces.Child {
	return interfaces.Child{ID: interfaces.ChildID(id), Tier: interfaces.TierHost, Capacity: interfaces.Load{CPU: cpu}, Labels: labels}
}

func shard(id string, cpu float64, c interfaces.ShardConstraints) interfaces.Shard {
	return interfaces.Shard{ID: interfaces.ShardID(id), Job: strings.Split(id, "-")[0], Load: interfaces.Load{CPU: cpu}, Constraints: c}
}

func assign(s, c string) interfaces.Assignment {
	return interfaces.Assignment{Shard: interfaces.ShardID(s), Child: interfaces.ChildID(c), Epoch: 1}
}

func hintsOf(hs []interfaces.Hint, k interfaces.HintKind) []interfaces.Hint {
	var out []interfaces.Hint
	for _, h := range hs {
		if h.Kind == k {
			out = append(out, h)
		}
	}
	return out
}

// A region whose only ssd host is above target with shards that need ssd: the
// unconstrained shard moves inside the region, the ssd shards are shed.
func TestChildHintsShedsWhatItCannotSpread(t *testing.T) {
	ssd := interfaces.ShardConstraints{Labels: map[string]string{"disk": "ssd"}}
	v := &interfaces.View{Tier: interfaces.TierRegion, Instance: "eu", Now: t0,
		Children: []interfaces.Child{host("eu-0", 10, map[string]string{"disk": "ssd"}), host("eu-1", 10, nil), host("eu-2", 10, nil)},
		Shards: []interfaces.Shard{
			shard("db-0", 3, ssd), shard("db-1", 3, ssd), shard("db-2", 3, ssd), shard("web-0", 2, interfaces.ShardConstraints{}),
			shard("web-1", 2, interfaces.ShardConstraints{}),
		},
		Assignments: []interfaces.Assignment{assign("db-0", "eu-0"), assign("db-1", "eu-0"), assign("db-2", "eu-0"), assign("web-0", "eu-0"), assign("web-1", "eu-1")},
	}
	hs, err := ChildHints(v, Config{})
	if err != nil {
		t.Fatal(err)
	}
	// eu-0 carries 11 of 10 (target 8): excess 3. The largest shards go first:
	// db-0 (needs ssd) cannot move, covering the excess.
	shed := hintsOf(hs, interfaces.HintShed)
	if len(shed) != 1 {
		t.Fatalf("want one shed hint, got %+v", hs)
	}
	if got := shed[0].Shards; !reflect.DeepEqual(got, []interfaces.ShardID{"db-0"}) {
		t.Fatalf("shed shards %v, want [db-0]", got)
	}
	if shed[0].Amount.CPU != 3 || !strings.Contains(shed[0].Reason, "needs label disk=ssd") || !strings.Contains(shed[0].Reason, "eu-0") {
		t.Fatalf("shed hint %+v", shed[0])
	}
	room := hintsOf(hs, interfaces.HintHeadroom)
	if len(room) != 1 {
		t.Fatalf("want one headroom hint, got %+v", hs)
	}
	// After shedding db-0, eu-0 holds 8 (no room below 8), eu-1 2 (6), eu-2 0 (8).
	if got := room[0].Amount.CPU; got != 14 {
		t.Fatalf("usable headroom %v, want 14 (reason %q)", got, room[0].Reason)
	}
	if len(hintsOf(hs, interfaces.HintConstraint)) != 0 || len(hintsOf(hs, interfaces.HintSLOAtRisk)) != 0 {
		t.Fatalf("unexpected hints %+v", hs)
	}
}

// The excess is movable: the region fixes it itself, and sheds nothing.
func TestChildHintsMovesInternallyFirst(t *testing.T) {
	v := &interfaces.View{Tier: interfaces.TierRegion, Instance: "eu", Now: t0,
		Children:    []interfaces.Child{host("eu-0", 10, nil), host("eu-1", 10, nil)},
		Shards:      []interfaces.Shard{shard("a-0", 3, interfaces.ShardConstraints{}), shard("a-1", 3, interfaces.ShardConstraints{}), shard("a-2", 3, interfaces.ShardConstraints{})},
		Assignments: []interfaces.Assignment{assign("a-0", "eu-0"), assign("a-1", "eu-0"), assign("a-2", "eu-0")},
	}
	hs, err := ChildHints(v, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 1 || hs[0].Kind != interfaces.HintHeadroom || hs[0].Amount.CPU != 16-9 {
		t.Fatalf("want only a headroom hint of 7 cpu, got %+v", hs)
	}
}

// Shards no child can hold are proposed to be kept elsewhere; anti-affinity
// that the region cannot satisfy is one way to get there.
func TestChildHintsProposesAvoidForUnplaceable(t *testing.T) {
	g := interfaces.ShardConstraints{AntiAffinity: "kafka", MaxPerChild: 1}
	v := &interfaces.View{Tier: interfaces.TierRegion, Instance: "eu", Now: t0,
		Children:    []interfaces.Child{host("eu-0", 10, nil), host("eu-1", 10, nil)},
		Shards:      []interfaces.Shard{shard("k-0", 1, g), shard("k-1", 1, g), shard("k-2", 1, g)},
		Assignments: []interfaces.Assignment{assign("k-0", "eu-0"), assign("k-1", "eu-1")},
	}
	hs, err := ChildHints(v, Config{})
	if err != nil {
		t.Fatal(err)
	}
	p := hintsOf(hs, interfaces.HintConstraint)
	if len(p) != 1 || p[0].Constraint == nil {
		t.Fatalf("want one proposal, got %+v", hs)
	}
	c := p[0].Constraint
	if c.Kind != interfaces.ConstraintAvoid || !reflect.DeepEqual(c.Shards, []interfaces.ShardID{"k-2"}) || !reflect.DeepEqual(c.Children, []interfaces.ChildID{"eu"}) {
		t.Fatalf("proposal %+v", c)
	}
	if !strings.Contains(c.Reason, "anti-affinity group kafka full") {
		t.Fatalf("reason %q", c.Reason)
	}
	// It is load the region cannot keep either: the shed request names it.
	if sh := hintsOf(hs, interfaces.HintShed); len(sh) != 1 || !reflect.DeepEqual(sh[0].Shards, []interfaces.ShardID{"k-2"}) || sh[0].Amount.CPU != 1 {
		t.Fatalf("shed %+v", sh)
	}
}

func TestChildHintsSLOAtRisk(t *testing.T) {
	a := shard("a-0", 1, interfaces.ShardConstraints{})
	a.LatencySLO = 50 * time.Millisecond
	b := shard("b-0", 1, interfaces.ShardConstraints{})
	b.LatencySLO = 500 * time.Millisecond
	v := &interfaces.View{Tier: interfaces.TierRegion, Instance: "eu", Now: t0,
		Children:    []interfaces.Child{host("eu-0", 10, nil), host("eu-1", 10, nil)},
		Shards:      []interfaces.Shard{a, b},
		Assignments: []interfaces.Assignment{assign("a-0", "eu-0"), assign("b-0", "eu-0")},
		Reports:     map[interfaces.ChildID]interfaces.Report{"eu-0": {Child: "eu-0", LatencyP99: 120 * time.Millisecond}},
	}
	hs, err := ChildHints(v, Config{})
	if err != nil {
		t.Fatal(err)
	}
	r := hintsOf(hs, interfaces.HintSLOAtRisk)
	if len(r) != 1 || !reflect.DeepEqual(r[0].Shards, []interfaces.ShardID{"a-0"}) || !strings.Contains(r[0].Reason, "120ms") {
		t.Fatalf("want a-0 at risk, got %+v", hs)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		c     Config
		field string
	}{
		{Config{Target: 1.5}, "coop.target"},
		{Config{Target: -0.1}, "coop.target"},
		{Config{MaxShards: -1}, "coop.max_shards"},
		{Config{Hold: -time.Second}, "coop.hold"},
		{Config{BudgetFraction: 2}, "coop.budget_fraction"},
		{Config{MinBudget: -3}, "coop.min_budget"},
	} {
		err := tc.c.Validate()
		var fe *interfaces.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, interfaces.ErrInvalid) {
			t.Errorf("%+v: got %v, want a field error on %s", tc.c, err, tc.field)
		}
		if _, err := ChildHints(&interfaces.View{}, tc.c); err == nil {
			t.Errorf("ChildHints accepted %+v", tc.c)
		}
		if _, err := Derive(&interfaces.View{}, tc.c, Memory{}); err == nil {
			t.Errorf("Derive accepted %+v", tc.c)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := Derive(nil, Config{}, Memory{}); err == nil {
		t.Fatal("Derive accepted a nil view")
	}
}

func region(id string, cpu float64) interfaces.Child {
	return interfaces.Child{ID: interfaces.ChildID(id), Tier: interfaces.TierRegion, Capacity: interfaces.Load{CPU: cpu}}
}

// globalView has two regions of 100 cpu; eu holds db-0..db-3 (5 each) and
// web-0 (10), us holds web-1 (10).
func globalView(hints map[interfaces.ChildID][]interfaces.Hint) *interfaces.View {
	v := &interfaces.View{Tier: interfaces.TierGlobal, Instance: "global", Now: t0,
		Children: []interfaces.Child{region("eu", 100), region("us", 100)},
		Reports:  map[interfaces.ChildID]interfaces.Report{},
	}
	for _, id := range []string{"db-0", "db-1", "db-2", "db-3"} {
		v.Shards = append(v.Shards, shard(id, 5, interfaces.ShardConstraints{}))
		v.Assignments = append(v.Assignments, assign(id, "eu"))
	}
	v.Shards = append(v.Shards, shard("web-0", 10, interfaces.ShardConstraints{}), shard("web-1", 10, interfaces.ShardConstraints{}))
	v.Assignments = append(v.Assignments, assign("web-0", "eu"), assign("web-1", "us"))
	for id, hs := range hints {
		v.Reports[id] = interfaces.Report{Child: id, Hints: hs}
	}
	return v
}

func TestDeriveShed(t *testing.T) {
	v := globalView(map[interfaces.ChildID][]interfaces.Hint{
		"eu": {{Kind: interfaces.HintShed, Amount: interfaces.Load{CPU: 10}, Shards: []interfaces.ShardID{"db-0", "db-1", "nope", "web-1"}, Reason: "db needs ssd"}},
	})
	d, err := Derive(v, Config{}, Memory{})
	if err != nil {
		t.Fatal(err)
	}
	var capC, allowed *interfaces.Constraint
	for i := range d.Constraints {
		switch c := &d.Constraints[i]; c.Kind {
		case interfaces.ConstraintCapacity:
			capC = c
		case interfaces.ConstraintAllowed:
			allowed = c
		}
	}
	// Named shards are held away (allowed rules), with no capacity limit (the
	// solver would balance against it and pull more off eu); the control loop
	// sees eu with its load without them, and the round may move 2 shards.
	if capC != nil || d.Shed["eu"].CPU != 20 {
		t.Fatalf("capacity constraint %+v, shed %v (all %+v)", capC, d.Shed, d.Constraints)
	}
	// Only the shards eu owns are held away from it (not "nope", not web-1).
	if allowed == nil || !reflect.DeepEqual(allowed.Shards, []interfaces.ShardID{"db-0", "db-1"}) || !reflect.DeepEqual(allowed.Children, []interfaces.ChildID{"us"}) {
		t.Fatalf("allowed constraint %+v", allowed)
	}
	if !strings.Contains(allowed.Reason, "eu shed it") {
		t.Fatalf("reason %q", allowed.Reason)
	}
	if len(d.Memory.Held) != 2 || !d.Memory.Held[0].Until.Equal(t0.Add(DefaultHold)) {
		t.Fatalf("memory %+v", d.Memory)
	}
	if len(d.Down) != 2 || d.Down[0].Child != "eu" || d.Down[0].MaxMoves != DefaultMinBudget || d.Down[0].Target != DefaultTarget {
		t.Fatalf("down %+v", d.Down)
	}

	// Next round, no hint: the memory still holds the shards away from eu
	// (now on us), until it expires.
	v2 := globalView(nil)
	v2.Assignments[0].Child, v2.Assignments[1].Child = "us", "us"
	v2.Now = t0.Add(time.Minute)
	d2, err := Derive(v2, Config{}, d.Memory)
	if err != nil {
		t.Fatal(err)
	}
	if len(d2.Constraints) != 1 || d2.Constraints[0].Kind != interfaces.ConstraintAllowed || !reflect.DeepEqual(d2.Constraints[0].Children, []interfaces.ChildID{"us"}) {
		t.Fatalf("round 2 constraints %+v", d2.Constraints)
	}
	v2.Now = t0.Add(DefaultHold)
	d3, err := Derive(v2, Config{}, d2.Memory)
	if err != nil {
		t.Fatal(err)
	}
	if len(d3.Constraints) != 0 || len(d3.Memory.Held) != 0 {
		t.Fatalf("after the hold: %+v %+v", d3.Constraints, d3.Memory)
	}
}

// The others' usable headroom bounds what a child may shed: when every child
// is above target, shedding would only move the problem.
func TestDeriveShedBoundedByUsableHeadroom(t *testing.T) {
	v := globalView(map[interfaces.ChildID][]interfaces.Hint{
		"eu": {{Kind: interfaces.HintShed, Amount: interfaces.Load{CPU: 10}, Shards: []interfaces.ShardID{"web-0", "db-0", "db-1"}, Reason: "hot"}},
		"us": {{Kind: interfaces.HintHeadroom, Amount: interfaces.Load{CPU: 7}, Reason: "little room below target"}},
	})
	d, err := Derive(v, Config{}, Memory{})
	if err != nil {
		t.Fatal(err)
	}
	// web-0 (10) does not fit in 7, db-0 (5) does, db-1 then no longer; us
	// is capped at its load plus its usable headroom.
	if len(d.Constraints) != 3 || d.Constraints[0].Kind != interfaces.ConstraintCapacity || d.Constraints[0].Limit.CPU != 17 || d.Constraints[1].Max != 1 {
		t.Fatalf("constraints %+v refused %q", d.Constraints, d.Refused)
	}
	if c := d.Constraints[2]; c.Kind != interfaces.ConstraintAllowed || !reflect.DeepEqual(c.Shards, []interfaces.ShardID{"db-0"}) {
		t.Fatalf("allowed %+v", c)
	}
	v.Reports["us"] = interfaces.Report{Child: "us", Hints: []interfaces.Hint{{Kind: interfaces.HintHeadroom, Amount: interfaces.Load{CPU: 4}}}}
	d, err = Derive(v, Config{}, Memory{})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Refused) != 1 || !strings.Contains(d.Refused[0], "none of its 3 candidate shards fits") {
		t.Fatalf("constraints %+v refused %q", d.Constraints, d.Refused)
	}
	// A shed hint naming no shard of the child sheds its amount, bounded.
	v.Reports["eu"] = interfaces.Report{Child: "eu", Hints: []interfaces.Hint{{Kind: interfaces.HintShed, Amount: interfaces.Load{CPU: 10}}}}
	d, err = Derive(v, Config{}, Memory{})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Constraints) != 2 || d.Constraints[0].Limit.CPU != 26 || d.Shed["eu"].CPU != 26 {
		t.Fatalf("constraints %+v refused %q shed %v", d.Constraints, d.Refused, d.Shed)
	}
}

// A child that sheds named shards is seen by the parent's control loop with
// its load without them as its capacity (it looks over capacity: the round
// runs), and the round may move only the held shards (max_moves), so the
// solver does not pull more off it to balance against that capacity.
func TestDeriveShedCapacitySeen(t *testing.T) {
	v := &interfaces.View{Tier: interfaces.TierGlobal, Instance: "global", Now: t0,
		Children: []interfaces.Child{region("a", 24), region("b", 24)}, Reports: map[interfaces.ChildID]interfaces.Report{}}
	for i := 0; i < 12; i++ {
		id := fmt.Sprintf("db-%d", i)
		v.Shards = append(v.Shards, shard(id, 1.5, interfaces.ShardConstraints{}))
		owner := "a"
		if i%2 == 1 {
			owner = "b"
		}
		v.Assignments = append(v.Assignments, assign(id, owner))
	}
	v.Reports["a"] = interfaces.Report{Child: "a", Hints: []interfaces.Hint{{Kind: interfaces.HintShed, Amount: interfaces.Load{CPU: 3}, Shards: []interfaces.ShardID{"db-0", "db-2"}, Reason: "one ssd host"}}}
	d, err := Derive(v, Config{}, Memory{})
	if err != nil {
		t.Fatal(err)
	}
	// a: 9 of 24; without 3 it has 6.
	if got := d.Shed["a"].CPU; got != 6 {
		t.Fatalf("capacity seen %v, want 6 (constraints %+v)", got, d.Constraints)
	}
	if c := d.Constraints[0]; c.Kind != interfaces.ConstraintMaxMoves || c.Max != 2 {
		t.Fatalf("constraints %+v", d.Constraints)
	}
	vv := *v
	LowerCapacities(&vv, d.Shed)
	if vv.Children[0].Capacity.CPU != 6 || v.Children[0].Capacity.CPU != 24 {
		t.Fatalf("LowerCapacities: %v (original %v)", vv.Children[0].Capacity, v.Children[0].Capacity)
	}
}

// Nowhere else has room: the shed request is refused and the shards are only
// preferred elsewhere.
func TestDeriveShedWithoutRoom(t *testing.T) {
	v := globalView(map[interfaces.ChildID][]interfaces.Hint{
		"eu": {{Kind: interfaces.HintShed, Amount: interfaces.Load{CPU: 10}, Shards: []interfaces.ShardID{"db-0"}, Reason: "hot"}},
	})
	v.Children[1].Capacity.CPU = 10 // us is full with web-1
	d, err := Derive(v, Config{}, Memory{})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Constraints) != 0 || len(d.Refused) != 1 || !strings.Contains(d.Refused[0], "none of its 1 candidate shards fits") {
		t.Fatalf("constraints %+v refused %q", d.Constraints, d.Refused)
	}
}

func TestDeriveProposals(t *testing.T) {
	prop := func(c interfaces.Constraint) interfaces.Hint {
		return interfaces.Hint{Kind: interfaces.HintConstraint, Constraint: &c, Reason: "because"}
	}
	v := globalView(map[interfaces.ChildID][]interfaces.Hint{
		"eu": {
			prop(interfaces.Constraint{Kind: interfaces.ConstraintAvoid, Shards: []interfaces.ShardID{"db-3"}, Children: []interfaces.ChildID{"us"}}),
			prop(interfaces.Constraint{Kind: interfaces.ConstraintPin, Shards: []interfaces.ShardID{"db-3"}, Children: []interfaces.ChildID{"eu"}}),
			prop(interfaces.Constraint{Kind: interfaces.ConstraintAntiAffinity, Shards: []interfaces.ShardID{"db-0", "db-1", "db-2"}, Max: 1}),
			prop(interfaces.Constraint{Kind: interfaces.ConstraintAntiAffinity, Shards: []interfaces.ShardID{"db-0", "db-1"}, Max: 1}),
			{Kind: interfaces.HintConstraint, Reason: "empty"},
			prop(interfaces.Constraint{Kind: interfaces.ConstraintAvoid, Shards: []interfaces.ShardID{"web-1"}, Children: []interfaces.ChildID{"eu"}}),
		},
		"us": {{Kind: interfaces.HintShed, Amount: interfaces.Load{CPU: -1}}},
	})
	d, err := Derive(v, Config{}, Memory{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"only propose rules about itself", "only avoid, capacity and anti_affinity", "need 3 children, 2 are active", "no constraint proposed", "must be ≥ 0"}
	if len(d.Refused) != len(want) {
		t.Fatalf("refused %q", d.Refused)
	}
	for i, w := range want {
		if !strings.Contains(d.Refused[i], w) {
			t.Errorf("refused[%d] = %q, want %q", i, d.Refused[i], w)
		}
	}
	var aa, allowed int
	for _, c := range d.Constraints {
		switch c.Kind {
		case interfaces.ConstraintAntiAffinity:
			aa++
			if !strings.Contains(c.Reason, "eu proposed") {
				t.Errorf("reason %q", c.Reason)
			}
		case interfaces.ConstraintAllowed:
			allowed++
			// web-1 is on us and must stay off eu: us is its only choice.
			if !reflect.DeepEqual(c.Shards, []interfaces.ShardID{"web-1"}) || !reflect.DeepEqual(c.Children, []interfaces.ChildID{"us"}) {
				t.Errorf("allowed %+v", c)
			}
		}
	}
	if aa != 1 || allowed != 1 || len(d.Constraints) != 2 {
		t.Fatalf("constraints %+v", d.Constraints)
	}
}

// Usable headroom caps a child at load + headroom, unless the caps together
// leave less room than the load to place.
func TestDeriveHeadroom(t *testing.T) {
	v := globalView(map[interfaces.ChildID][]interfaces.Hint{
		"eu": {{Kind: interfaces.HintHeadroom, Amount: interfaces.Load{CPU: 5}, Reason: "one usable host"}},
		"us": {{Kind: interfaces.HintHeadroom, Amount: interfaces.Load{CPU: 500}}},
	})
	d, err := Derive(v, Config{}, Memory{})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Constraints) != 1 || d.Constraints[0].Kind != interfaces.ConstraintCapacity || d.Constraints[0].Limit.CPU != 35 || d.Constraints[0].Children[0] != "eu" {
		t.Fatalf("constraints %+v", d.Constraints)
	}
	v = globalView(map[interfaces.ChildID][]interfaces.Hint{
		"eu": {{Kind: interfaces.HintHeadroom, Amount: interfaces.Load{CPU: 0}}},
		"us": {{Kind: interfaces.HintHeadroom, Amount: interfaces.Load{CPU: 0}}},
	})
	v.Shards = append(v.Shards, shard("new-0", 30, interfaces.ShardConstraints{})) // unplaced
	d, err = Derive(v, Config{}, Memory{})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Constraints) != 0 || len(d.Refused) != 1 || !strings.Contains(d.Refused[0], "not used this round") {
		t.Fatalf("constraints %+v refused %q", d.Constraints, d.Refused)
	}
}

func TestDeriveSLOAtRiskAndTargets(t *testing.T) {
	v := globalView(map[interfaces.ChildID][]interfaces.Hint{
		"eu": {{Kind: interfaces.HintSLOAtRisk, Shards: []interfaces.ShardID{"db-2", "web-1"}, Reason: "p99 80ms"}},
	})
	d, err := Derive(v, Config{Target: 0.7, BudgetFraction: 0.5, MinBudget: 1}, Memory{})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Constraints) != 1 || d.Constraints[0].Kind != interfaces.ConstraintAvoid || !reflect.DeepEqual(d.Constraints[0].Shards, []interfaces.ShardID{"db-2"}) {
		t.Fatalf("constraints %+v", d.Constraints)
	}
	if d.Down[0].Target != 0.63 || d.Down[0].MaxMoves != 3 || d.Down[1].Target != 0.7 || d.Down[1].MaxMoves != 1 {
		t.Fatalf("down %+v", d.Down)
	}
}

// TestProposalsAboutOthersShardsAreRefused: an anti-affinity proposal must
// name at least one of the child's own shards (r-a proposed rules over r-b's
// shards alone, and three such rules were accepted: a review's probe) — one,
// not all, so that a rule that spread them is not dropped; and a report's
// hints are read up to maxHints.
func TestProposalsAboutOthersShardsAreRefused(t *testing.T) {
	v := &interfaces.View{Tier: interfaces.TierGlobal, Instance: "g", Now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Reports: map[interfaces.ChildID]interfaces.Report{}}
	for _, id := range []string{"r-a", "r-b"} {
		v.Children = append(v.Children, interfaces.Child{ID: interfaces.ChildID(id), Tier: interfaces.TierRegion, Capacity: interfaces.Load{CPU: 100}})
	}
	for _, s := range []string{"a-0", "a-1", "b-0", "b-1", "b-2"} {
		v.Shards = append(v.Shards, interfaces.Shard{ID: interfaces.ShardID(s), Job: s[:1], Load: interfaces.Load{CPU: 1}})
		v.Assignments = append(v.Assignments, interfaces.Assignment{Shard: interfaces.ShardID(s), Child: interfaces.ChildID("r-" + s[:1]), Epoch: 1})
	}
	aa := func(a, b string) interfaces.Hint {
		return interfaces.Hint{Kind: interfaces.HintConstraint, Reason: "x", Constraint: &interfaces.Constraint{
			Kind: interfaces.ConstraintAntiAffinity, Shards: []interfaces.ShardID{interfaces.ShardID(a), interfaces.ShardID(b)}, Max: 1}}
	}
	hints := []interfaces.Hint{aa("b-0", "b-1"), aa("a-0", "b-2"), aa("a-0", "a-1")} // the second: one of its own, kept once spread
	for range 100 {
		hints = append(hints, aa("b-1", "b-2"))
	}
	v.Reports["r-a"] = interfaces.Report{Child: "r-a", Epoch: 1, Hints: hints}
	d, err := Derive(v, Config{}, Memory{})
	if err != nil {
		t.Fatal(err)
	}
	var kept [][]interfaces.ShardID
	for _, c := range d.Constraints {
		if c.Kind == interfaces.ConstraintAntiAffinity {
			kept = append(kept, c.Shards)
		}
	}
	if len(kept) != 2 || !slices.Equal(kept[0], []interfaces.ShardID{"a-0", "b-2"}) || !slices.Equal(kept[1], []interfaces.ShardID{"a-0", "a-1"}) {
		t.Errorf("accepted anti-affinity rules %v, want those naming one of r-a's shards: [a-0 b-2] [a-0 a-1]", kept)
	}
	if n := len(d.Refused); n > 64+1 {
		t.Errorf("%d refusals for one report: its hints beyond the first 64 were read", n)
	}
}
