package control

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("defaults rejected: %v", err)
	}
	tests := []struct {
		field  string
		mutate func(*Config)
	}{
		{"control.target_imbalance", func(c *Config) { c.TargetImbalance = 0.9 }},
		{"control.target_imbalance", func(c *Config) { c.TargetImbalance = math.NaN() }},
		{"control.floor", func(c *Config) { c.Floor = 1.5 }},
		{"control.target_util", func(c *Config) { c.TargetUtil = 0 }},
		{"control.dead_band", func(c *Config) { c.DeadBand = -0.1 }},
		{"control.kp", func(c *Config) { c.Kp = 0 }},
		{"control.ki", func(c *Config) { c.Ki = -1 }},
		{"control.integral_max", func(c *Config) { c.IntegralMax = math.Inf(1) }},
		{"control.min_moves", func(c *Config) { c.MinMoves = 0 }},
		{"control.max_moves", func(c *Config) { c.MaxMoves = 0 }},
		{"control.max_bytes", func(c *Config) { c.MaxBytes = -1 }},
		{"control.cooldown_rounds", func(c *Config) { c.CooldownRounds = -1 }},
		{"control.cooldown", func(c *Config) { c.Cooldown = -time.Second }},
		{"control.grace", func(c *Config) { c.Grace = -time.Second }},
		{"control.mass_failure_fraction", func(c *Config) { c.MassFailureFraction = 0 }},
		{"control.mass_failure_min", func(c *Config) { c.MassFailureMin = 0 }},
		{"control.bounce_window", func(c *Config) { c.BounceWindow = -time.Minute }},
		{"control.report_alpha", func(c *Config) { c.ReportAlpha = 0 }},
		{"control.straggler_factor", func(c *Config) { c.StragglerFactor = 0.5 }},
		{"control.solve_fail_alert", func(c *Config) { c.SolveFailAlert = 0 }},
		{"control.min_concurrency", func(c *Config) { c.MinConcurrency = 0 }},
		{"control.max_concurrency", func(c *Config) { c.MaxConcurrency = 0 }},
		{"control.initial_concurrency", func(c *Config) { c.InitialConcurrency = 1000 }},
		{"control.backoff", func(c *Config) { c.Backoff = 1 }},
		{"control.latency_rise", func(c *Config) { c.LatencyRise = -0.1 }},
		{"control.baseline_alpha", func(c *Config) { c.BaselineAlpha = 2 }},
		{"control.history", func(c *Config) { c.History = 0 }},
	}
	for _, tt := range tests {
		cfg := DefaultConfig()
		tt.mutate(&cfg)
		_, err := New(cfg)
		if err == nil {
			t.Errorf("%s: bad value accepted", tt.field)
			continue
		}
		if !errors.Is(err, interfaces.ErrInvalid) || !strings.HasPrefix(err.Error(), tt.field+": ") {
			t.Errorf("%s: got %q (want the field named first, wrapping ErrInvalid)", tt.field, err)
		}
	}
}

func TestStepRejectsBadInput(t *testing.T) {
	c := mustNew(t, DefaultConfig())
	v := tier(2, 10, []float64{1}, []int{0})
	if _, err := c.Step(Input{Now: t0}); err == nil || !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), "input.view") {
		t.Errorf("nil view: %v", err)
	}
	if _, err := c.Step(Input{View: v}); err == nil || !strings.Contains(err.Error(), "input.now") {
		t.Errorf("zero time: %v", err)
	}
	if _, err := c.Step(Input{Now: t0, View: v, Silent: map[interfaces.ChildID]time.Time{"nope": t0}}); !errors.Is(err, interfaces.ErrNotFound) || !strings.Contains(err.Error(), "input.silent") {
		t.Errorf("unknown silent child: %v", err)
	}
	nan := tier(2, 10, []float64{math.NaN()}, []int{0})
	if _, err := c.Step(Input{Now: t0, View: nan}); !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), "input.view.shards[0].load.cpu") {
		t.Errorf("NaN shard load: %v", err)
	}
	neg := tier(2, -1, []float64{1}, []int{0})
	if _, err := c.Step(Input{Now: t0, View: neg}); !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), "input.view.children[0].capacity.cpu") {
		t.Errorf("negative capacity: %v", err)
	}
	badRep := tier(2, 10, []float64{1}, []int{0})
	badRep.Reports["h00"] = interfaces.Report{LatencyP99: -time.Second}
	if _, err := c.Step(Input{Now: t0, View: badRep}); !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), "reports[h00].latency_p99") {
		t.Errorf("negative p99: %v", err)
	}
	if c.round != 0 {
		t.Errorf("rejected input advanced the round to %d", c.round)
	}
	if _, err := c.Step(Input{Now: t0.Add(time.Second), View: v}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Step(Input{Now: t0, View: v}); err == nil || !strings.Contains(err.Error(), "must not go backwards") {
		t.Errorf("time going backwards: %v", err)
	}
	if err := c.Observe(RoundResult{Round: 99}); !errors.Is(err, interfaces.ErrInvalid) {
		t.Errorf("wrong round: %v", err)
	}
	if err := c.Observe(RoundResult{Round: 1}); err != nil {
		t.Errorf("observing round 1: %v", err)
	}
	if err := c.Observe(RoundResult{Round: 1}); !errors.Is(err, ErrNoDecision) {
		t.Errorf("observing twice: %v", err)
	}
}

// balanced: 4 children, 8 shards each, equal loads.
func balanced() *interfaces.View {
	var loads []float64
	var owner []int
	for i := 0; i < 32; i++ {
		loads = append(loads, 1)
		owner = append(owner, i%4)
	}
	return tier(4, 16, loads, owner)
}

func TestSteadyLoadHoldsForever(t *testing.T) {
	c := mustNew(t, DefaultConfig())
	v := balanced()
	for r := 0; r < 200; r++ {
		d, err := c.Step(Input{Now: t0.Add(time.Duration(r) * time.Second), View: v})
		if err != nil {
			t.Fatal(err)
		}
		if d.Mode != ModeHold || d.MaxMoves != 0 || d.Solve() {
			t.Fatalf("round %d: mode %s budget %d (%s), want hold with zero budget", r, d.Mode, d.MaxMoves, d.Record.Why)
		}
		if err := c.Observe(RoundResult{Round: d.Round, P99: 10 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}
	if c.Integrator() != 0 {
		t.Errorf("integrator %v after a steady load, want 0", c.Integrator())
	}
}

// skewed: 4 children; child 0 holds extra shards.
func skewed(extra int) *interfaces.View {
	var loads []float64
	var owner []int
	for i := 0; i < 32; i++ {
		loads = append(loads, 1)
		owner = append(owner, i%4)
	}
	for i := 0; i < extra; i++ {
		loads = append(loads, 1)
		owner = append(owner, 0)
	}
	return tier(4, 16, loads, owner)
}

func TestBudgetRisesWithTheError(t *testing.T) {
	prev := 0
	cfg := DefaultConfig()
	cfg.InitialConcurrency = cfg.MaxConcurrency // the concurrency must not be what caps the budget
	for _, extra := range []int{0, 4, 8, 16, 24} {
		c := mustNew(t, cfg)
		d, err := c.Step(Input{Now: t0, View: skewed(extra)})
		if err != nil {
			t.Fatal(err)
		}
		if extra == 0 && d.Mode != ModeHold {
			t.Fatalf("balanced tier: mode %s", d.Mode)
		}
		if extra > 0 {
			if d.Mode != ModePeriodic {
				t.Fatalf("extra %d: mode %s (%s)", extra, d.Mode, d.Record.Why)
			}
			if d.MaxMoves <= prev {
				t.Errorf("extra %d: budget %d, not above the smaller error's %d", extra, d.MaxMoves, prev)
			}
			var mm *interfaces.Constraint
			for i := range d.Constraints {
				if d.Constraints[i].Kind == interfaces.ConstraintMaxMoves {
					mm = &d.Constraints[i]
				}
			}
			if mm == nil || mm.Max != d.MaxMoves {
				t.Errorf("extra %d: no max_moves constraint carrying the budget %d: %+v", extra, d.MaxMoves, d.Constraints)
			}
		}
		prev = d.MaxMoves
	}
}

// TestBudgetFormula checks the PI output against the documented formula on a
// tier worked out by hand: h00 carries 24 unit shards, h01..h03 8 each, all of
// capacity 16. mean = LB = 48/64 = 0.75; h00 is at 1.5, max/LB = 2.0, so the
// imbalance error is 2.0 − 1.10 = 0.90; to reach 1.10 × 0.75 × 16 = 13.2 h00
// must shed 10.8 load = 11 unit shards; first round: I = 11, budget =
// ceil(1.0·11 + 0.25·11) = 14.
func TestBudgetFormula(t *testing.T) {
	cfg := DefaultConfig()
	cfg.InitialConcurrency = cfg.MaxConcurrency
	c := mustNew(t, cfg)
	d, err := c.Step(Input{Now: t0, View: skewed(16)})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(d.Record.Imbalance-0.9) > 1e-9 || d.Record.Need != 11 || c.Integrator() != 11 || d.MaxMoves != 14 {
		t.Errorf("imbalance error %v need %d integrator %v budget %d; want 0.9, 11, 11, 14", d.Record.Imbalance, d.Record.Need, c.Integrator(), d.MaxMoves)
	}
}

func TestAntiWindup(t *testing.T) {
	cfg := DefaultConfig()
	cfg.IntegralMax = 10
	cfg.MaxMoves = 1000
	cfg.CooldownRounds = 0
	cfg.InitialConcurrency, cfg.MaxConcurrency = 1000, 1000
	c := mustNew(t, cfg)
	v := skewed(16) // sustained error: the plant never moves
	var last Decision
	for r := 0; r < 30; r++ {
		d, err := c.Step(Input{Now: t0.Add(time.Duration(r) * time.Second), View: v})
		if err != nil {
			t.Fatal(err)
		}
		if d.Mode != ModePeriodic {
			t.Fatalf("round %d: mode %s", r, d.Mode)
		}
		if c.Integrator() > cfg.IntegralMax {
			t.Fatalf("round %d: integrator %v above the clamp %v", r, c.Integrator(), cfg.IntegralMax)
		}
		if err := c.Observe(RoundResult{Round: d.Round, Planned: 3}); err != nil { // proposes but nothing commits
			t.Fatal(err)
		}
		last = d
	}
	if c.Integrator() != cfg.IntegralMax {
		t.Errorf("integrator %v after 30 rounds of error, want clamped at %v", c.Integrator(), cfg.IntegralMax)
	}
	want := int(math.Ceil(cfg.Kp*float64(last.Record.Need) + cfg.Ki*cfg.IntegralMax))
	if last.MaxMoves != want {
		t.Errorf("saturated budget %d, want Kp·need + Ki·IntegralMax = %d", last.MaxMoves, want)
	}
	// The error disappears: no lingering action from the integrator.
	d, _ := c.Step(Input{Now: t0.Add(time.Minute), View: balanced()})
	if d.Mode != ModeHold || c.Integrator() != 0 {
		t.Errorf("after the error vanished: mode %s integrator %v, want hold and 0", d.Mode, c.Integrator())
	}

	// Conditional integration: while the budget is saturated at MaxMoves the
	// integrator does not grow.
	cfg.MaxMoves = 2
	c = mustNew(t, cfg)
	for r := 0; r < 10; r++ {
		d, err := c.Step(Input{Now: t0.Add(time.Duration(r) * time.Second), View: v})
		if err != nil {
			t.Fatal(err)
		}
		if d.MaxMoves != 2 {
			t.Fatalf("budget %d, want the cap 2", d.MaxMoves)
		}
		_ = c.Observe(RoundResult{Round: d.Round, Planned: 2})
	}
	if c.Integrator() != 0 {
		t.Errorf("integrator %v grew while the output was saturated", c.Integrator())
	}
}

func TestCooldown(t *testing.T) {
	cfg := DefaultConfig()
	cfg.CooldownRounds = 2
	cfg.Cooldown = 10 * time.Second
	c := mustNew(t, cfg)
	v := skewed(16)
	d, _ := c.Step(Input{Now: t0, View: v})
	if d.Mode != ModePeriodic {
		t.Fatalf("mode %s", d.Mode)
	}
	_ = c.Observe(RoundResult{Round: d.Round, Planned: 1, Applied: []interfaces.Move{{Shard: "s032", From: "h00", To: "h01"}}})
	for r := 1; r <= 4; r++ {
		now := t0.Add(time.Duration(r) * 3 * time.Second) // rounds 2..5 at 3s, 6s, 9s, 12s
		d, _ = c.Step(Input{Now: now, View: v})
		wantHold := r <= 2 || now.Before(t0.Add(10*time.Second))
		if (d.Mode == ModeHold) != wantHold {
			t.Errorf("round %d at %v: mode %s (%s), want hold=%v", d.Round, now.Sub(t0), d.Mode, d.Record.Why, wantHold)
		}
		_ = c.Observe(RoundResult{Round: d.Round})
	}
	// An emergency ignores the cooldown.
	c = mustNew(t, cfg)
	d, _ = c.Step(Input{Now: t0, View: v})
	_ = c.Observe(RoundResult{Round: d.Round, Applied: []interfaces.Move{{Shard: "s032", From: "h00", To: "h01"}}})
	v2 := skewed(16)
	v2.Children[3].State = interfaces.ChildDraining
	d, _ = c.Step(Input{Now: t0.Add(time.Second), View: v2})
	if d.Mode != ModeEmergency || len(d.Evacuate) != 8 {
		t.Errorf("draining child during cooldown: mode %s, %d to evacuate; want emergency, 8", d.Mode, len(d.Evacuate))
	}
}

func TestAIMD(t *testing.T) {
	cfg := DefaultConfig()
	cfg.InitialConcurrency, cfg.MinConcurrency, cfg.MaxConcurrency = 4, 1, 6
	c := mustNew(t, cfg)
	v := balanced()
	step := func(p99 time.Duration, active int) int {
		t.Helper()
		d, err := c.Step(Input{Now: t0.Add(time.Duration(c.round) * time.Second), View: v})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Observe(RoundResult{Round: d.Round, P99: p99, MovesActive: active}); err != nil {
			t.Fatal(err)
		}
		return c.Concurrency()
	}
	// Healthy: +1 per round up to the max.
	for _, want := range []int{5, 6, 6, 6} {
		if got := step(10*time.Millisecond, 0); got != want {
			t.Fatalf("healthy quiet round: concurrency %d, want %d", got, want)
		}
	}
	// p99 rising during moves: halve, down to the minimum.
	for _, want := range []int{3, 1, 1} {
		if got := step(20*time.Millisecond, 5); got != want {
			t.Fatalf("p99 rising during moves: concurrency %d, want %d", got, want)
		}
	}
	// Healthy during moves (within LatencyRise of the baseline): grow again.
	if got := step(11*time.Millisecond, 5); got != 2 {
		t.Fatalf("healthy during moves: concurrency %d, want 2", got)
	}
	// No measurement: no change.
	if got := step(0, 5); got != 2 {
		t.Fatalf("no p99: concurrency %d, want 2", got)
	}

	// The concurrency caps the budget; at the limit the round holds.
	cfg.InitialConcurrency = 3
	c = mustNew(t, cfg)
	sk := skewed(16)
	d, _ := c.Step(Input{Now: t0, View: sk})
	if d.MaxMoves != 3 {
		t.Errorf("budget %d, want the concurrency 3", d.MaxMoves)
	}
	_ = c.Observe(RoundResult{Round: d.Round})
	sk.InFlight = []interfaces.Move{{Shard: "s000", From: "h00", To: "h01"}, {Shard: "s004", From: "h00", To: "h02"}, {Shard: "s008", From: "h00", To: "h03"}}
	d, _ = c.Step(Input{Now: t0.Add(time.Second), View: sk})
	if d.Mode != ModeHold || !strings.Contains(d.Record.Why, "concurrency") {
		t.Errorf("3 moves in flight, limit 3: mode %s (%s), want a concurrency hold", d.Mode, d.Record.Why)
	}
}

// silentTier: 10 children, 5 shards each.
func silentTier() *interfaces.View {
	var loads []float64
	var owner []int
	for i := 0; i < 50; i++ {
		loads = append(loads, 1)
		owner = append(owner, i%10)
	}
	return tier(10, 10, loads, owner)
}

func TestMassFailureGuard(t *testing.T) {
	cfg := DefaultConfig()
	c := mustNew(t, cfg)
	v := silentTier()
	silent := map[interfaces.ChildID]time.Time{}
	for i := 0; i < 4; i++ { // 40%
		silent[childID(i)] = t0
	}
	now := t0.Add(3 * cfg.Grace)
	d, err := c.Step(Input{Now: now, View: v, Silent: silent})
	if err != nil {
		t.Fatal(err)
	}
	if d.Mode != ModeHold || len(d.DeclareFailed) != 0 || !c.Guarded() || !d.Record.Guard {
		t.Fatalf("40%% silent: mode %s, declared %v, guard %v; want hold, none, engaged", d.Mode, d.DeclareFailed, c.Guarded())
	}
	if len(d.Alerts) == 0 || d.Alerts[0].Code != AlertMassFailure || !strings.Contains(d.Alerts[0].String(), "mass_failure: 4 of 10 children silent") {
		t.Fatalf("alerts %v, want mass_failure: 4 of 10 children silent", d.Alerts)
	}
	if st := c.Status(); !st.Guard || len(st.Last.Alerts) != 1 || !strings.HasPrefix(st.Last.Alerts[0], "mass_failure: 4 of 10") {
		t.Errorf("status does not show the guard and its alert: %+v", st)
	}
	plan := interfaces.Plan{Moves: []interfaces.Move{{Shard: "s000", From: "h00", To: "h05"}}}
	if acc, rej := d.Admit(v, plan); len(acc) != 0 || len(rej) != 1 {
		t.Errorf("guard: admitted %v", acc)
	}
	if err := c.Observe(RoundResult{Round: d.Round, Applied: plan.Moves}); !errors.Is(err, interfaces.ErrInvalid) {
		t.Errorf("moves reported in a hold round: %v", err)
	}
	_ = c.Observe(RoundResult{Round: d.Round})

	// An operator acknowledges: all four are declared failed.
	d, _ = c.Step(Input{Now: now.Add(time.Second), View: v, Silent: silent, AckMassFailure: true})
	if d.Mode != ModeEmergency || len(d.DeclareFailed) != 4 || len(d.Evacuate) != 20 {
		t.Errorf("acknowledged: mode %s declared %v evacuate %d, want emergency, 4, 20", d.Mode, d.DeclareFailed, len(d.Evacuate))
	}
	_ = c.Observe(RoundResult{Round: d.Round})

	// 10% silent: declared failed after the grace.
	c = mustNew(t, cfg)
	one := map[interfaces.ChildID]time.Time{"h07": t0}
	d, _ = c.Step(Input{Now: t0.Add(cfg.Grace), View: v, Silent: one})
	if d.Mode != ModeEmergency || len(d.DeclareFailed) != 1 || d.DeclareFailed[0] != "h07" || c.Guarded() {
		t.Fatalf("10%% silent past grace: mode %s declared %v guard %v", d.Mode, d.DeclareFailed, c.Guarded())
	}
	if len(d.Evacuate) != 5 {
		t.Errorf("evacuate %v, want h07's 5 shards", d.Evacuate)
	}
	av := d.Apply(v)
	for _, ch := range av.Children {
		if (ch.State == interfaces.ChildFailed) != (ch.ID == "h07") {
			t.Errorf("Apply: %s is %s", ch.ID, ch.State)
		}
	}
	if v.Children[7].State != interfaces.ChildActive {
		t.Error("Apply modified the caller's view")
	}
}

func TestGrace(t *testing.T) {
	cfg := DefaultConfig()
	c := mustNew(t, cfg)
	v := silentTier()
	silent := map[interfaces.ChildID]time.Time{"h03": t0}
	d, _ := c.Step(Input{Now: t0.Add(cfg.Grace - time.Nanosecond), View: v, Silent: silent})
	if len(d.DeclareFailed) != 0 || d.Mode == ModeEmergency || d.Record.Silent != 1 {
		t.Fatalf("silent for less than the grace: declared %v mode %s", d.DeclareFailed, d.Mode)
	}
	_ = c.Observe(RoundResult{Round: d.Round})
	// A child already failed in the view is not declared again.
	v.Children[3].State = interfaces.ChildFailed
	d, _ = c.Step(Input{Now: t0.Add(time.Hour), View: v, Silent: silent})
	if len(d.DeclareFailed) != 0 || d.Mode != ModeEmergency {
		t.Errorf("failed child: declared %v mode %s, want none and an emergency for its shards", d.DeclareFailed, d.Mode)
	}
}

func TestSolveFailureKeepsAssignment(t *testing.T) {
	cfg := DefaultConfig()
	cfg.CooldownRounds = 0
	c := mustNew(t, cfg)
	v := skewed(16)
	boom := errors.New("deadline exceeded")
	for r := 1; r <= cfg.SolveFailAlert; r++ {
		d, _ := c.Step(Input{Now: t0.Add(time.Duration(r) * time.Second), View: v})
		if d.Mode != ModePeriodic {
			t.Fatalf("mode %s", d.Mode)
		}
		if err := c.Observe(RoundResult{Round: d.Round, SolveErr: boom, Applied: []interfaces.Move{{Shard: "s000"}}}); !errors.Is(err, interfaces.ErrInvalid) {
			t.Fatalf("moves applied after a failed solve accepted: %v", err)
		}
		if err := c.Observe(RoundResult{Round: d.Round, SolveErr: boom}); err != nil {
			t.Fatal(err)
		}
		h := c.History()
		if last := h[len(h)-1]; last.SolveError != boom.Error() || last.Applied != 0 || !strings.Contains(last.Why, "kept the last good assignment") {
			t.Fatalf("record %+v", last)
		}
	}
	d, _ := c.Step(Input{Now: t0.Add(time.Minute), View: v})
	found := false
	for _, a := range d.Alerts {
		found = found || a.Code == AlertSolveFailed
	}
	if !found {
		t.Errorf("no solve_failed alert after %d failures: %v", cfg.SolveFailAlert, d.Alerts)
	}
}

func TestStuckRoundHoldsUntilTheLoadChanges(t *testing.T) {
	cfg := DefaultConfig()
	cfg.CooldownRounds = 0
	c := mustNew(t, cfg)
	v := skewed(16)
	d, _ := c.Step(Input{Now: t0, View: v})
	_ = c.Observe(RoundResult{Round: d.Round, Planned: 0}) // the solver found nothing
	d, _ = c.Step(Input{Now: t0.Add(time.Second), View: v})
	if d.Mode != ModeHold || !strings.Contains(d.Record.Why, "found no move") {
		t.Fatalf("same error after a fruitless solve: mode %s (%s)", d.Mode, d.Record.Why)
	}
	_ = c.Observe(RoundResult{Round: d.Round})
	d, _ = c.Step(Input{Now: t0.Add(2 * time.Second), View: skewed(24)})
	if d.Mode != ModePeriodic {
		t.Errorf("the load changed: mode %s (%s), want periodic", d.Mode, d.Record.Why)
	}
}

func TestStragglerAlertAndSLOError(t *testing.T) {
	v := balanced()
	for i := range v.Shards {
		v.Shards[i].LatencySLO = 20 * time.Millisecond
	}
	for c := 0; c < 4; c++ {
		lat := 10 * time.Millisecond
		if c == 2 {
			lat = 60 * time.Millisecond
		}
		v.Reports[childID(c)] = interfaces.Report{Child: childID(c), Epoch: 1, LatencyP99: lat}
	}
	c := mustNew(t, DefaultConfig())
	d, _ := c.Step(Input{Now: t0, View: v})
	if d.Mode != ModePeriodic || d.Record.SLO < 1.9 || d.Record.Need < 1 {
		t.Errorf("p99 3× the SLO on h02: mode %s slo error %v need %d (%s)", d.Mode, d.Record.SLO, d.Record.Need, d.Record.Why)
	}
	found := false
	for _, a := range d.Alerts {
		found = found || (a.Code == AlertStraggler && strings.Contains(a.Message, "h02"))
	}
	if !found {
		t.Errorf("no straggler alert for h02: %v", d.Alerts)
	}
	// The same report (same sequence number) is one sample, not many.
	_ = c.Observe(RoundResult{Round: d.Round})
	before := c.SmoothedP99("h02")
	v.Reports["h02"] = interfaces.Report{Child: "h02", Epoch: 1, LatencyP99: time.Millisecond}
	_, _ = c.Step(Input{Now: t0.Add(time.Second), View: v})
	if c.SmoothedP99("h02") != before {
		t.Errorf("a repeated report sequence number changed the smoothed p99")
	}
	v.Reports["h02"] = interfaces.Report{Child: "h02", Epoch: 2, LatencyP99: 10 * time.Millisecond}
	_ = c.Observe(RoundResult{Round: c.round})
	_, _ = c.Step(Input{Now: t0.Add(2 * time.Second), View: v})
	want := time.Duration(0.3*float64(10*time.Millisecond) + 0.7*float64(60*time.Millisecond))
	if got := c.SmoothedP99("h02"); got != want {
		t.Errorf("smoothed p99 %v, want %v", got, want)
	}
}
