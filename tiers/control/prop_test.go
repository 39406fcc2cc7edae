package control

import (
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/strata-sched/strata/interfaces"
	"pgregory.net/rapid"
)

// genBalanced draws a tier where every child holds the same multiset of shard
// loads (permuted), each perturbed by at most ±1%, and child 0's loads scaled
// so that its max/mean is a drawn ratio in [1, 1.12]: with the noise, max/LB
// is often above the target (1.10) but stays within the dead band (1.15).
func genBalanced(t *rapid.T) *interfaces.View {
	n := rapid.IntRange(2, 8).Draw(t, "children")
	per := rapid.IntRange(4, 12).Draw(t, "shards_per_child")
	base := make([]float64, per)
	for i := range base {
		base[i] = rapid.Float64Range(0.5, 2).Draw(t, fmt.Sprintf("load%d", i))
	}
	noise := rapid.Float64Range(0, 0.01).Draw(t, "noise")
	ratio := rapid.Float64Range(1, 1.12).Draw(t, "ratio")
	skew := ratio * float64(n-1) / (float64(n) - ratio) // n·skew/(n−1+skew) = ratio
	var loads []float64
	var owner []int
	for c := 0; c < n; c++ {
		for i := 0; i < per; i++ {
			f := 1 + noise*(2*rapid.Float64Range(0, 1).Draw(t, "jitter")-1)
			if c == 0 {
				f *= skew
			}
			loads = append(loads, base[(i+c)%per]*f)
			owner = append(owner, c)
		}
	}
	capCPU := rapid.Float64Range(2, 4).Draw(t, "headroom") * 2 * float64(per) // utilization 12–25%..50%
	return tier(n, capCPU, loads, owner)
}

func TestPropSteadyLoadZeroBudget(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		if why := steadyLoadBreaks(t, DefaultConfig()); why != "" {
			t.Fatal(why)
		}
	})
}

// TestSteadyLoadNeedsDeadBand: the property of TestPropSteadyLoadZeroBudget
// fails when the dead band is 0 — some drawn tiers sit just above the target
// (1.10) with the busiest child above the floor, and only the dead band keeps
// the controller quiet there. The tiers are drawn from fixed seeds, so the test
// is deterministic; with the default dead band the same tiers all hold.
func TestSteadyLoadNeedsDeadBand(t *testing.T) {
	const seeds = 100
	broken := func(cfg Config) (n int, first string) {
		gen := rapid.Custom(func(t *rapid.T) string { return steadyLoadBreaks(t, cfg) })
		for seed := 0; seed < seeds; seed++ {
			if why := gen.Example(seed); why != "" {
				if n == 0 {
					first = why
				}
				n++
			}
		}
		return n, first
	}
	if n, first := broken(DefaultConfig()); n != 0 {
		t.Fatalf("default dead band: %d of %d steady tiers broke the property; the first: %s", n, seeds, first)
	}
	cfg := DefaultConfig()
	cfg.DeadBand = 0
	n, first := broken(cfg)
	if n == 0 {
		t.Fatalf("dead band 0: every one of %d steady tiers held with a zero budget; the property does not depend on the dead band", seeds)
	}
	t.Logf("dead band 0: %d of %d steady tiers broke the property; the first: %s", n, seeds, first)
}

// steadyLoadBreaks draws a steady balanced tier (genBalanced) and runs up to 60
// rounds of a controller with cfg on it, the load unchanged. It returns why the
// first round that did not hold with a zero budget and no rules did not, or ""
// when every round held.
func steadyLoadBreaks(t *rapid.T, cfg Config) string {
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v := genBalanced(t)
	rounds := rapid.IntRange(1, 60).Draw(t, "rounds")
	now := t0
	for r := 0; r < rounds; r++ {
		now = now.Add(time.Duration(rapid.IntRange(1, 30_000).Draw(t, "dt_ms")) * time.Millisecond)
		d, err := c.Step(Input{Now: now, View: v})
		if err != nil {
			t.Fatal(err)
		}
		if d.Mode != ModeHold || d.MaxMoves != 0 || len(d.Constraints) != 0 {
			return fmt.Sprintf("round %d: steady balanced load (max/LB %.4f) gave mode %s budget %d (%s)", d.Round, maxOverLB(v), d.Mode, d.MaxMoves, d.Record.Why)
		}
		if err := c.Observe(RoundResult{Round: d.Round, P99: time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}
	return ""
}

// TestPropStepConvergesWithoutOscillation: a closed loop with a toy plant
// (each move takes a shard from the hottest child to the coldest, evening the
// pair) — after a load step on 10% of the shards the tier is back within the
// threshold in ≤ 3 rounds, stays there with zero moves, and no shard is moved
// back to a child it left.
func TestPropStepConvergesWithoutOscillation(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cfg := DefaultConfig()
		cfg.InitialConcurrency = cfg.MaxConcurrency
		c, _ := New(cfg)
		n := rapid.IntRange(3, 8).Draw(rt, "children")
		per := rapid.IntRange(8, 16).Draw(rt, "shards_per_child")
		var loads []float64
		var owner []int
		for i := 0; i < n*per; i++ {
			loads = append(loads, rapid.Float64Range(0.5, 1.5).Draw(rt, "load"))
			owner = append(owner, i%n)
		}
		v := tier(n, 3*float64(per), loads, owner)
		threshold := cfg.TargetImbalance + cfg.DeadBand
		toy := func(v *interfaces.View, d *Decision, _ uint64) interfaces.Plan {
			limit := d.MaxMoves
			if limit == 0 {
				limit = math.MaxInt
			}
			return toyPlan(v, limit)
		}
		l := &loop{c: c, v: v, now: t0, left: map[interfaces.ShardID]map[interfaces.ChildID]time.Time{}, plan: toy}
		run := func(silent map[interfaces.ChildID]time.Time) Decision {
			return propRound(rt, l, silent)
		}
		for r := 0; r < 6; r++ {
			run(nil)
		}
		if m := maxOverLB(v); m > threshold {
			rt.Fatalf("the toy plant did not converge before the step: max/LB %.3f", m)
		}
		// The step: 10% of the shards (at least one), chosen at random, ×factor.
		k := max(1, len(v.Shards)/10)
		factor := rapid.Float64Range(1.5, 2).Draw(rt, "factor")
		for _, i := range rapid.Permutation(seq(len(v.Shards))).Draw(rt, "perm")[:k] {
			v.Shards[i].Load.CPU *= factor
		}
		before := maxOverLB(v)
		back := -1
		for r := 1; r <= 12; r++ {
			run(nil)
			m := maxOverLB(v)
			if back < 0 && m <= threshold {
				back = r
			}
			if back > 0 && r > back+1 && l.moved[len(l.moved)-1] != 0 {
				rt.Fatalf("round %d after the step: %d moves after convergence at %d", r, l.moved[len(l.moved)-1], back)
			}
		}
		if before > threshold && (back < 0 || back > 3) {
			rt.Fatalf("step to max/LB %.3f: back within %.2f after %d rounds, want ≤ 3 (moves %v)", before, threshold, back, l.moved)
		}
	})
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// propRound is loop.round for a rapid.T (the bounce check fails the property).
func propRound(rt *rapid.T, l *loop, silent map[interfaces.ChildID]time.Time) Decision {
	l.now = l.now.Add(10 * time.Second)
	d, err := l.c.Step(Input{Now: l.now, View: l.v, Silent: silent})
	if err != nil {
		rt.Fatal(err)
	}
	var acc []interfaces.Move
	planned := 0
	if d.Solve() {
		view := d.Apply(l.v)
		plan := l.plan(view, &d, d.Round)
		planned = len(plan.Moves)
		acc, _ = d.Admit(view, plan)
		for _, m := range acc {
			if at, ok := l.left[m.Shard][m.To]; ok && l.now.Sub(at) < l.c.Config().BounceWindow {
				rt.Fatalf("round %d: %s moved back to %s, which it left %v ago", d.Round, m.Shard, m.To, l.now.Sub(at))
			}
			if l.left[m.Shard] == nil {
				l.left[m.Shard] = map[interfaces.ChildID]time.Time{}
			}
			l.left[m.Shard][m.From] = l.now
		}
		applyMoves(l.v, acc)
	}
	if err := l.c.Observe(RoundResult{Round: d.Round, Planned: planned, Applied: acc}); err != nil {
		rt.Fatal(err)
	}
	l.decs = append(l.decs, d)
	l.moved = append(l.moved, len(acc))
	return d
}

// TestPropGraceAndGuard: with k of n children silent for random durations, a
// child is declared failed iff the guard is not engaged and it has been silent
// for at least the grace; the guard engages iff more than the configured
// fraction (and at least MassFailureMin) are silent, and then nothing moves.
func TestPropGraceAndGuard(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cfg := DefaultConfig()
		cfg.Grace = time.Duration(rapid.IntRange(0, 60).Draw(rt, "grace_s")) * time.Second
		c, _ := New(cfg)
		n := rapid.IntRange(2, 20).Draw(rt, "children")
		var loads []float64
		var owner []int
		for i := 0; i < 3*n; i++ {
			loads = append(loads, 1)
			owner = append(owner, i%n)
		}
		v := tier(n, 10, loads, owner)
		now := t0.Add(time.Hour)
		silent := map[interfaces.ChildID]time.Time{}
		for ch := 0; ch < n; ch++ {
			if rapid.Bool().Draw(rt, fmt.Sprintf("silent%d", ch)) {
				silent[childID(ch)] = now.Add(-time.Duration(rapid.IntRange(0, 120).Draw(rt, "for_s")) * time.Second)
			}
		}
		d, err := c.Step(Input{Now: now, View: v, Silent: silent})
		if err != nil {
			rt.Fatal(err)
		}
		guard := len(silent) >= cfg.MassFailureMin && float64(len(silent)) > cfg.MassFailureFraction*float64(n)
		if c.Guarded() != guard {
			rt.Fatalf("%d of %d silent: guard %v, want %v", len(silent), n, c.Guarded(), guard)
		}
		declared := map[interfaces.ChildID]bool{}
		for _, id := range d.DeclareFailed {
			declared[id] = true
		}
		for ch := 0; ch < n; ch++ {
			id := childID(ch)
			since, isSilent := silent[id]
			want := !guard && isSilent && now.Sub(since) >= cfg.Grace
			if declared[id] != want {
				rt.Fatalf("%s silent=%v for %v (grace %v, guard %v): declared %v", id, isSilent, now.Sub(since), cfg.Grace, guard, declared[id])
			}
		}
		if guard && (d.Mode != ModeHold || len(d.Alerts) == 0 || d.Alerts[0].Code != AlertMassFailure) {
			rt.Fatalf("guard: mode %s alerts %v", d.Mode, d.Alerts)
		}
		if len(d.DeclareFailed) > 0 && d.Mode != ModeEmergency && d.Mode != ModeHold {
			rt.Fatalf("declared %v but mode %s", d.DeclareFailed, d.Mode)
		}
	})
}

// TestPropDeterministic: two controllers fed the same inputs decide the same.
func TestPropDeterministic(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		a, _ := New(DefaultConfig())
		b, _ := New(DefaultConfig())
		n := rapid.IntRange(2, 6).Draw(rt, "children")
		var loads []float64
		var owner []int
		for i := 0; i < 4*n; i++ {
			loads = append(loads, rapid.Float64Range(0.1, 3).Draw(rt, "load"))
			owner = append(owner, rapid.IntRange(-1, n-1).Draw(rt, "owner"))
		}
		now := t0
		for r := 0; r < rapid.IntRange(1, 12).Draw(rt, "rounds"); r++ {
			v := tier(n, 8, loads, owner)
			for ch := 0; ch < n; ch++ {
				v.Reports[childID(ch)] = interfaces.Report{Child: childID(ch), Epoch: uint64(r), LatencyP99: time.Duration(rapid.IntRange(1, 100).Draw(rt, "p99")) * time.Millisecond}
			}
			silent := map[interfaces.ChildID]time.Time{}
			if rapid.Bool().Draw(rt, "one_silent") {
				silent[childID(rapid.IntRange(0, n-1).Draw(rt, "who"))] = now.Add(-time.Duration(rapid.IntRange(0, 20).Draw(rt, "ago")) * time.Second)
			}
			now = now.Add(time.Second)
			da, errA := a.Step(Input{Now: now, View: v, Silent: silent})
			db, errB := b.Step(Input{Now: now, View: v, Silent: silent})
			if (errA == nil) != (errB == nil) || !reflect.DeepEqual(da, db) {
				rt.Fatalf("round %d: decisions differ:\n%+v\n%+v", r, da, db)
			}
			var applied []interfaces.Move
			if da.Solve() {
				acc, _ := da.Admit(v, toyPlan(da.Apply(v), max(1, da.MaxMoves)))
				applied = acc
				for _, m := range acc {
					for i := range v.Shards {
						if v.Shards[i].ID == m.Shard {
							for c := 0; c < n; c++ {
								if childID(c) == m.To {
									owner[i] = c
								}
							}
						}
					}
				}
			}
			res := RoundResult{Round: da.Round, Planned: len(applied), Applied: applied, P99: time.Duration(rapid.IntRange(0, 50).Draw(rt, "tier_p99")) * time.Millisecond, MovesActive: len(applied)}
			if ea, eb := a.Observe(res), b.Observe(res); (ea == nil) != (eb == nil) {
				rt.Fatalf("observe differs: %v vs %v", ea, eb)
			}
		}
		if !reflect.DeepEqual(a.History(), b.History()) {
			rt.Fatalf("histories differ")
		}
	})
}

// TestPropAdmitKeepsTheDecision: on random tiers (random child states,
// unplaced shards, in-flight moves, remembered moves) and random plans, Step
// never fails or panics and Admit obeys the decision: nothing in a hold round,
// only shards to evacuate in an emergency, at most MaxMoves relocations in a
// periodic round, never a shard back to a child it left.
func TestPropAdmitKeepsTheDecision(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cfg := DefaultConfig()
		cfg.CooldownRounds = 0
		c, _ := New(cfg)
		n := rapid.IntRange(1, 6).Draw(rt, "children")
		ns := rapid.IntRange(1, 30).Draw(rt, "shards")
		var loads []float64
		var owner []int
		for i := 0; i < ns; i++ {
			loads = append(loads, rapid.Float64Range(0, 3).Draw(rt, "load"))
			owner = append(owner, rapid.IntRange(-1, n-1).Draw(rt, "owner"))
		}
		v := tier(n, 8, loads, owner)
		for i := range v.Children {
			v.Children[i].State = interfaces.ChildState(rapid.IntRange(0, 2).Draw(rt, "state"))
		}
		// Remember some moves.
		d0, err := c.Step(Input{Now: t0, View: tier(n, 8, loads, owner)})
		if err != nil {
			rt.Fatal(err)
		}
		var applied []interfaces.Move
		if d0.Mode != ModeHold {
			for i := 0; i < ns; i++ {
				if rapid.Bool().Draw(rt, "moved") && n > 1 {
					applied = append(applied, interfaces.Move{Shard: shardID(i), From: childID(rapid.IntRange(0, n-1).Draw(rt, "from")), To: childID(0)})
				}
			}
		}
		if err := c.Observe(RoundResult{Round: d0.Round, Applied: applied}); err != nil {
			rt.Fatal(err)
		}
		left := map[interfaces.ShardID]map[interfaces.ChildID]bool{}
		for _, m := range applied {
			if left[m.Shard] == nil {
				left[m.Shard] = map[interfaces.ChildID]bool{}
			}
			left[m.Shard][m.From] = true
		}
		// A shard's current child is where its in-flight move goes, if any (the
		// last one listed, as the projection reads them), else its owner.
		cur := map[interfaces.ShardID]interfaces.ChildID{}
		for i := 0; i < ns; i++ {
			cur[shardID(i)] = d0Owner(owner, shardID(i))
		}
		for i := 0; i < rapid.IntRange(0, 3).Draw(rt, "in_flight"); i++ {
			s := rapid.IntRange(0, ns-1).Draw(rt, "if_shard")
			v.InFlight = append(v.InFlight, interfaces.Move{Shard: shardID(s), To: childID(rapid.IntRange(0, n-1).Draw(rt, "if_to"))})
			cur[shardID(s)] = v.InFlight[len(v.InFlight)-1].To
		}
		d, err := c.Step(Input{Now: t0.Add(time.Minute), View: v})
		if err != nil {
			rt.Fatal(err)
		}
		var plan interfaces.Plan
		for i := 0; i < rapid.IntRange(0, 40).Draw(rt, "plan_len"); i++ {
			s := rapid.IntRange(0, ns-1).Draw(rt, "p_shard")
			from := interfaces.ChildID("")
			if owner[s] >= 0 {
				from = childID(owner[s])
			}
			plan.Moves = append(plan.Moves, interfaces.Move{Shard: shardID(s), From: from, To: childID(rapid.IntRange(0, n-1).Draw(rt, "p_to"))})
		}
		acc, rej := d.Admit(d.Apply(v), plan)
		if len(acc)+len(rej) != len(plan.Moves) {
			rt.Fatalf("admitted %d + rejected %d of %d", len(acc), len(rej), len(plan.Moves))
		}
		evac := map[interfaces.ShardID]bool{}
		for _, id := range d.Evacuate {
			evac[id] = true
		}
		reloc := 0
		for _, m := range acc {
			switch d.Mode {
			case ModeHold:
				rt.Fatalf("hold round admitted %+v", m)
			case ModeEmergency:
				if !evac[m.Shard] {
					rt.Fatalf("emergency admitted %s, not to evacuate", m.Shard)
				}
			case ModePeriodic:
				if m.From != "" {
					reloc++
				}
			}
			// Back to a child it left is refused, unless that is where the shard
			// is (or is already moving): anti-bounce never excludes it.
			if !evac[m.Shard] && left[m.Shard][m.To] && m.To != cur[m.Shard] {
				rt.Fatalf("admitted %s back to %s", m.Shard, m.To)
			}
		}
		if d.Mode == ModePeriodic && reloc > d.MaxMoves {
			rt.Fatalf("periodic: %d relocations admitted, budget %d", reloc, d.MaxMoves)
		}
	})
}

// d0Owner is a shard's current child in the generated tier.
func d0Owner(owner []int, id interfaces.ShardID) interfaces.ChildID {
	var i int
	_, _ = fmt.Sscanf(string(id), "s%03d", &i)
	if owner[i] < 0 {
		return ""
	}
	return childID(owner[i])
}
