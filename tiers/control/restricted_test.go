package control

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// keptOff is a view of 6 children of 16 cpu with 50 shards of 1 cpu on
// children 0–4 (10 each) and child 5 empty, and the allowed-children rule that
// keeps every shard off child 5 (as the straggler policy does).
func keptOff() (*interfaces.View, interfaces.Constraint) {
	loads := make([]float64, 50)
	owner := make([]int, 50)
	rule := interfaces.Constraint{Kind: interfaces.ConstraintAllowed}
	for i := range loads {
		loads[i], owner[i] = 1, i%5
		rule.Shards = append(rule.Shards, shardID(i))
	}
	v := tier(6, 16, loads, owner)
	for c := 0; c < 5; c++ {
		rule.Children = append(rule.Children, childID(c))
	}
	return v, rule
}

// TestLBLeavesOutCapacityNoShardMayUse: with every shard kept off an empty
// child, the busiest child is at the LB (50 over the other five children's
// 80), and the controller holds; without the rule it counts the empty child
// (LB 50/96, max/LB 1.2) and acts. The rule counts whether it comes in the
// view or from the control policies' last merged outcome, and stops counting
// once the policies no longer send it.
func TestLBLeavesOutCapacityNoShardMayUse(t *testing.T) {
	v, rule := keptOff()
	step := func(c *Controller, v *interfaces.View, round int) Decision {
		t.Helper()
		d, err := c.Step(Input{Now: t0.Add(time.Duration(round) * 30 * time.Second), View: v})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}

	c := mustNew(t, DefaultConfig())
	if d := step(c, v, 1); d.Mode != ModePeriodic || math.Abs(d.Record.Imbalance-(1.2-1.1)) > 1e-9 {
		t.Fatalf("no rule: mode %v, imbalance error %v; want periodic at 1.2 − 1.1", d.Mode, d.Record.Imbalance)
	}

	withRule := *v
	withRule.Constraints = []interfaces.Constraint{rule}
	c = mustNew(t, DefaultConfig())
	if d := step(c, &withRule, 1); d.Mode != ModeHold || math.Abs(d.Record.Imbalance-(1.0-1.1)) > 1e-9 || !strings.Contains(d.Record.Why, "dead band") {
		t.Fatalf("rule in the view: mode %v, imbalance error %v (%s); want a hold at 1.0 − 1.1", d.Mode, d.Record.Imbalance, d.Record.Why)
	}

	// From the policies: round 1 acts (no rule yet), its merged outcome
	// carries the rule, round 2 holds, round 3 (the rule no longer sent)
	// acts again.
	c = mustNew(t, DefaultConfig())
	d := step(c, v, 1)
	c.Merge(&d, &Outcome{Actions: Actions{Constraints: []interfaces.Constraint{rule}}})
	if err := c.Observe(RoundResult{Round: d.Round, At: t0.Add(30 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if d := step(c, v, 2); d.Mode != ModeHold || !strings.Contains(d.Record.Why, "dead band") {
		t.Fatalf("rule from the policies: mode %v (%s); want a hold within the dead band", d.Mode, d.Record.Why)
	} else {
		c.Merge(&d, &Outcome{})
	}
	if d := step(c, v, 3); d.Mode != ModePeriodic {
		t.Fatalf("rule no longer sent: mode %v (%s); want periodic", d.Mode, d.Record.Why)
	}
}

// TestRestrictedBoundIsALowerBound: on random tiers and random allowed and pin
// rules, no assignment that obeys the rules puts every active child below
// restrictedBound (each shard placed on a random child its rules allow), and
// the bound is reached on a hand-checked case: pins and two allowed rules
// intersected.
func TestRestrictedBoundIsALowerBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	for trial := 0; trial < 500; trial++ {
		M, N := 2+rng.IntN(7), 1+rng.IntN(30)
		v := &interfaces.View{}
		for c := 0; c < M; c++ {
			st := interfaces.ChildActive
			if rng.IntN(5) == 0 {
				st = interfaces.ChildDraining
			}
			v.Children = append(v.Children, interfaces.Child{ID: childID(c), State: st, Capacity: interfaces.Load{CPU: float64(1 + rng.IntN(8)), Mem: float64(1 + rng.IntN(4))}})
		}
		for i := 0; i < N; i++ {
			v.Shards = append(v.Shards, interfaces.Shard{ID: shardID(i), Load: interfaces.Load{CPU: rng.Float64(), Mem: rng.Float64()}})
		}
		var rules []interfaces.Constraint
		for k := rng.IntN(4); k > 0; k-- {
			r := interfaces.Constraint{Kind: interfaces.ConstraintAllowed}
			if rng.IntN(4) == 0 {
				r.Kind = interfaces.ConstraintPin
			}
			for c := 0; c < M; c++ {
				if rng.IntN(2) == 0 {
					r.Children = append(r.Children, childID(c))
				}
			}
			for i := 0; i < N; i++ {
				if rng.IntN(2) == 0 {
					r.Shards = append(r.Shards, shardID(i))
				}
			}
			rules = append(rules, r)
		}
		p := project(v)
		bound := restrictedBound(p, rules)
		// Each shard's allowed active children, as the rules say.
		for assign := 0; assign < 20; assign++ {
			load := make([][]float64, M)
			for c := range load {
				load[c] = make([]float64, len(p.res))
			}
			for i := 0; i < N; i++ {
				var allowed []int
				for c := 0; c < M; c++ {
					if p.active(c) && allowedBy(rules, shardID(i), childID(c)) {
						allowed = append(allowed, c)
					}
				}
				if len(allowed) == 0 {
					continue // placed nowhere: the bound leaves it out too
				}
				c := allowed[rng.IntN(len(allowed))]
				for r, name := range p.res {
					load[c][r] += v.Shards[i].Load.Get(name)
				}
			}
			for r, name := range p.res {
				worst := 0.0
				for c := 0; c < M; c++ {
					if capR := v.Children[c].Capacity.Get(name); p.active(c) && capR > 0 {
						worst = math.Max(worst, load[c][r]/capR)
					}
				}
				if worst < bound[r]-1e-9 {
					t.Fatalf("trial %d: %s: an assignment that obeys the rules reaches max utilization %v, below the bound %v (rules %+v)", trial, name, worst, bound[r], rules)
				}
			}
		}
	}

	// Hand-checked: children h00–h03 of 10 cpu; s000 pinned to h00 (5 cpu);
	// s001, s002 allowed on {h00, h01, h02} and on {h01, h02, h03}: on
	// {h01, h02} (6 + 6 cpu over 20: 0.6); s003 (2 cpu) free.
	v := tier(4, 10, []float64{5, 6, 6, 2}, []int{0, 1, 2, 3})
	rules := []interfaces.Constraint{
		{Kind: interfaces.ConstraintPin, Shards: []interfaces.ShardID{"s000"}, Children: []interfaces.ChildID{"h00"}},
		{Kind: interfaces.ConstraintAllowed, Shards: []interfaces.ShardID{"s001", "s002"}, Children: []interfaces.ChildID{"h00", "h01", "h02"}},
		{Kind: interfaces.ConstraintAllowed, Shards: []interfaces.ShardID{"s001", "s002", "gone"}, Children: []interfaces.ChildID{"h01", "h02", "h03", "nobody"}},
	}
	if got := restrictedBound(project(v), rules); len(got) != 1 || math.Abs(got[0]-0.6) > 1e-12 {
		t.Errorf("restrictedBound = %v, want [0.6] (s001 and s002 on h01, h02)", got)
	}
}

// allowedBy reports whether rules let shard s use child c: every allowed rule
// naming s lists c, and every pin naming s pins it to c.
func allowedBy(rules []interfaces.Constraint, s interfaces.ShardID, c interfaces.ChildID) bool {
	for _, r := range rules {
		if !slices.Contains(r.Shards, s) {
			continue
		}
		switch r.Kind {
		case interfaces.ConstraintAllowed:
			if !slices.Contains(r.Children, c) {
				return false
			}
		case interfaces.ConstraintPin:
			if len(r.Children) == 0 || r.Children[0] != c {
				return false
			}
		}
	}
	return true
}
