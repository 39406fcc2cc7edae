package control

import (
	"testing"
	"time"

	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/interfaces"
)

// solveLocal runs the real balancer's local search on v.
func solveLocal(t testing.TB, v *interfaces.View, seed uint64) interfaces.Plan {
	t.Helper()
	p, err := balancer.FromView(v, balancer.ViewOptions{})
	if err != nil {
		t.Fatalf("FromView: %v", err)
	}
	res, err := balancer.Solve("local", p, balancer.Options{Seed: seed})
	if err != nil {
		t.Fatalf("Solve: %v", err)
	}
	return res.Plan(v.Tier)
}

func movesOf(plan interfaces.Plan, shard interfaces.ShardID) []interfaces.Move {
	var out []interfaces.Move
	for _, m := range plan.Moves {
		if m.Shard == shard {
			out = append(out, m)
		}
	}
	return out
}

// TestAntiBounceThroughTheBalancer: s0 moved h00 → h01; now moving it back
// would improve the balance (and only it can: s2 is pinned). Without the
// controller's constraints the local solver moves it back; with them it does
// not, until the window has passed.
func TestAntiBounceThroughTheBalancer(t *testing.T) {
	cfg := DefaultConfig()
	cfg.BounceWindow = 5 * time.Minute
	c := mustNew(t, cfg)

	// Round 1: s0 (4) and s1 (2) on h00, s2 (4, pinned) on h01: 6 vs 4.
	v := tier(2, 10, []float64{4, 2, 4}, []int{0, 0, 1})
	v.Shards[2].Constraints.Pinned = "h01"
	d, err := c.Step(Input{Now: t0, View: v})
	if err != nil || d.Mode != ModePeriodic {
		t.Fatalf("round 1: %v, mode %s (%s)", err, d.Mode, d.Record.Why)
	}
	move := interfaces.Move{Shard: "s000", From: "h00", To: "h01", Epoch: 1}
	if err := c.Observe(RoundResult{Round: d.Round, Planned: 1, Applied: []interfaces.Move{move}}); err != nil {
		t.Fatal(err)
	}
	applyMoves(v, []interfaces.Move{move}) // now h00 = 2, h01 = 8: moving s0 back evens it to 6/4

	// Control: the balancer alone moves s0 back to h00.
	if ms := movesOf(solveLocal(t, v, 1), "s000"); len(ms) != 1 || ms[0].To != "h00" {
		t.Fatalf("without anti-bounce the balancer should move s000 back to h00 (the test needs it): %+v", ms)
	}

	for r := 1; r <= 6; r++ {
		now := t0.Add(time.Duration(r) * time.Second)
		d, err = c.Step(Input{Now: now, View: v})
		if err != nil {
			t.Fatal(err)
		}
		if d.Mode == ModeHold {
			_ = c.Observe(RoundResult{Round: d.Round})
			continue
		}
		plan := solveLocal(t, d.Apply(v), uint64(r))
		for _, m := range movesOf(plan, "s000") {
			if m.To == "h00" {
				t.Fatalf("round %d: the balancer moved s000 back to h00 within the window: %+v (constraints %+v)", d.Round, m, d.Constraints)
			}
		}
		acc, _ := d.Admit(v, plan)
		for _, m := range acc {
			if m.Shard == "s000" && m.To == "h00" {
				t.Fatalf("Admit let s000 back to h00")
			}
		}
		applyMoves(v, acc)
		_ = c.Observe(RoundResult{Round: d.Round, Planned: len(plan.Moves), Applied: acc})
	}
	if owners(v)["s000"] != "h01" {
		t.Fatalf("s000 ended on %s", owners(v)["s000"])
	}

	// After the window the shard may go back.
	d, _ = c.Step(Input{Now: t0.Add(cfg.BounceWindow + time.Second), View: v})
	if d.Mode != ModePeriodic {
		t.Fatalf("after the window: mode %s (%s)", d.Mode, d.Record.Why)
	}
	if d.Record.AntiBounce != 0 {
		t.Errorf("anti-bounce constraints remain after the window: %+v", d.Constraints)
	}
	if ms := movesOf(solveLocal(t, d.Apply(v), 9), "s000"); len(ms) != 1 || ms[0].To != "h00" {
		t.Errorf("after the window the balancer should be free to move s000 back: %+v", ms)
	}
}

// TestAntiBounceKeepsCurrentOwnerAllowed: a shard that left h00, went to h01
// and came back to h00 (an operator, say) must not be forced off h00 by its
// own anti-bounce rule.
func TestAntiBounceKeepsCurrentOwnerAllowed(t *testing.T) {
	c := mustNew(t, DefaultConfig())
	v := tier(3, 10, []float64{4, 4, 4}, []int{0, 1, 2})
	v.Shards[1].Constraints.Pinned = "h01"
	d, _ := c.Step(Input{Now: t0, View: tier(3, 10, []float64{4, 4, 4}, []int{0, 0, 2})})
	_ = c.Observe(RoundResult{Round: d.Round, Applied: []interfaces.Move{{Shard: "s000", From: "h00", To: "h01"}, {Shard: "s000", From: "h01", To: "h00"}}})
	d, _ = c.Step(Input{Now: t0.Add(time.Minute), View: v})
	d.Mode = ModePeriodic // force a solve to see what the constraints do
	plan := solveLocal(t, d.Apply(v), 1)
	if len(movesOf(plan, "s000")) != 0 {
		t.Errorf("s000 was moved off its current child by its anti-bounce rule: %+v", plan.Moves)
	}
	if d.Record.AntiBounce != 1 {
		t.Errorf("anti-bounce shards %d, want 1 (s000 may not go to h01)", d.Record.AntiBounce)
	}
}

// closedLoop drives the controller against the real balancer on v: each round
// Step → Apply → local solve → Admit → land the moves → Observe. It returns
// the moves applied per round and checks that no shard goes back to a child it
// left within the bounce window.
type loop struct {
	t     *testing.T
	c     *Controller
	v     *interfaces.View
	now   time.Time
	left  map[interfaces.ShardID]map[interfaces.ChildID]time.Time
	plan  func(v *interfaces.View, d *Decision, round uint64) interfaces.Plan
	decs  []Decision
	moved []int
}

func newLoop(t *testing.T, c *Controller, v *interfaces.View, plan func(*interfaces.View, *Decision, uint64) interfaces.Plan) *loop {
	return &loop{t: t, c: c, v: v, now: t0, left: map[interfaces.ShardID]map[interfaces.ChildID]time.Time{}, plan: plan}
}

func (l *loop) round(silent map[interfaces.ChildID]time.Time) Decision {
	l.t.Helper()
	l.now = l.now.Add(10 * time.Second)
	d, err := l.c.Step(Input{Now: l.now, View: l.v, Silent: silent})
	if err != nil {
		l.t.Fatal(err)
	}
	var acc []interfaces.Move
	planned := 0
	if d.Solve() {
		view := d.Apply(l.v)
		for _, id := range d.DeclareFailed { // the caller commits the failure
			for i := range l.v.Children {
				if l.v.Children[i].ID == id {
					l.v.Children[i].State = interfaces.ChildFailed
				}
			}
		}
		plan := l.plan(view, &d, d.Round)
		planned = len(plan.Moves)
		acc, _ = d.Admit(view, plan)
		for _, m := range acc {
			if at, ok := l.left[m.Shard][m.To]; ok && l.now.Sub(at) < l.c.Config().BounceWindow {
				l.t.Fatalf("round %d: %s moved back to %s, which it left %v ago", d.Round, m.Shard, m.To, l.now.Sub(at))
			}
			if m.From != "" {
				if l.left[m.Shard] == nil {
					l.left[m.Shard] = map[interfaces.ChildID]time.Time{}
				}
				l.left[m.Shard][m.From] = l.now
			}
		}
		applyMoves(l.v, acc)
	}
	if err := l.c.Observe(RoundResult{Round: d.Round, Planned: planned, Applied: acc}); err != nil {
		l.t.Fatal(err)
	}
	l.decs = append(l.decs, d)
	l.moved = append(l.moved, len(acc))
	return d
}

func balancerPlan(t *testing.T) func(*interfaces.View, *Decision, uint64) interfaces.Plan {
	return func(v *interfaces.View, d *Decision, round uint64) interfaces.Plan {
		return solveLocal(t, v, round)
	}
}

// skewedRegion: 10 hosts of capacity 16; 100 shards with loads 0.5..1.4 placed
// with a skew (the first hosts get more).
func skewedRegion() *interfaces.View {
	var loads []float64
	var owner []int
	for i := 0; i < 100; i++ {
		loads = append(loads, 0.5+float64((i*37)%10)/10)
		owner = append(owner, (i*i)%10/2) // hosts 0..4 only
	}
	return tier(10, 16, loads, owner)
}

// TestClosedLoopWithTheBalancer is the done-when on a small region:
// a steady skewed load converges and then makes zero moves; a 2× load step on
// 10% of the shards is back within the threshold in ≤ 3 rounds with no shard
// moved back; a mass failure of 40% of the hosts engages the guard with no
// moves and an alert.
func TestClosedLoopWithTheBalancer(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxConcurrency, cfg.InitialConcurrency = 200, 200
	cfg.MaxMoves = 200
	c := mustNew(t, cfg)
	v := skewedRegion()
	threshold := cfg.TargetImbalance + cfg.DeadBand
	l := newLoop(t, c, v, balancerPlan(t))

	// Steady skewed load: converge, then zero moves.
	converged := -1
	for r := 0; r < 30; r++ {
		l.round(nil)
		if converged < 0 && maxOverLB(v) <= threshold {
			converged = r
		}
		if converged >= 0 && r > converged && l.moved[r] != 0 {
			t.Fatalf("round %d: %d moves after convergence at round %d (%s)", r+1, l.moved[r], converged+1, l.decs[r].Record.Why)
		}
	}
	if converged < 0 || converged > 5 {
		t.Fatalf("steady load: converged at round %d (max/LB now %.3f)", converged+1, maxOverLB(v))
	}
	t.Logf("steady skewed load: within %.2f after %d rounds, max/LB %.3f, then 0 moves for %d rounds", threshold, converged+1, maxOverLB(v), 29-converged)

	// 2× load on 10% of the shards: the ten on the busiest host... spread: every 10th.
	for i := 0; i < len(v.Shards); i += 10 {
		v.Shards[i].Load.CPU *= 2
	}
	before := maxOverLB(v)
	if before <= threshold {
		t.Fatalf("the step did not unbalance the region (max/LB %.3f)", before)
	}
	back := -1
	for r := 0; r < 20; r++ {
		l.round(nil)
		if back < 0 && maxOverLB(v) <= threshold {
			back = r + 1
		}
	}
	if back < 0 || back > 3 {
		t.Fatalf("after the step (max/LB %.3f): back within %.2f after %d rounds, want ≤ 3", before, threshold, back)
	}
	tail := l.moved[len(l.moved)-15:]
	for i, n := range tail {
		if n != 0 {
			t.Fatalf("moves %v in the last 15 rounds after the step (round %d)", tail, i)
		}
	}
	t.Logf("2× step on 10%%: max/LB %.3f → within %.2f after %d rounds, then 0 moves", before, threshold, back)

	// Mass failure of 40% of the hosts.
	silent := map[interfaces.ChildID]time.Time{}
	for c := 0; c < 4; c++ {
		silent[childID(c)] = l.now
	}
	assign := append([]interfaces.Assignment(nil), v.Assignments...)
	for r := 0; r < 5; r++ {
		d := l.round(silent)
		if d.Mode != ModeHold || len(d.DeclareFailed) != 0 || l.moved[len(l.moved)-1] != 0 {
			t.Fatalf("mass failure round %d: mode %s declared %v moved %d", r, d.Mode, d.DeclareFailed, l.moved[len(l.moved)-1])
		}
		if len(d.Record.Alerts) == 0 || d.Record.Alerts[0][:len(AlertMassFailure)] != AlertMassFailure {
			t.Fatalf("no mass_failure alert in the record: %v", d.Record.Alerts)
		}
	}
	for i := range assign {
		if assign[i] != v.Assignments[i] {
			t.Fatalf("an assignment changed under the guard: %+v → %+v", assign[i], v.Assignments[i])
		}
	}
}

// TestAntiBounceYieldsToRulesThatForceABounce (issue 24's lost shard): s0 left
// h00 for h01; now the view's own rules allow it only on h00 (a child that
// cannot place it asked the parent to keep it elsewhere). It must leave h01:
// the round evacuates it (an emergency for it alone, without an anti-bounce
// rule, which would leave it nowhere to go) and it goes back.
func TestAntiBounceYieldsToRulesThatForceABounce(t *testing.T) {
	c := mustNew(t, DefaultConfig())
	v := tier(3, 10, []float64{4, 2, 2}, []int{1, 0, 2})
	d, _ := c.Step(Input{Now: t0, View: tier(3, 10, []float64{4, 2, 2}, []int{0, 0, 2})})
	_ = c.Observe(RoundResult{Round: d.Round, Applied: []interfaces.Move{{Shard: "s000", From: "h00", To: "h01"}}})
	v.Constraints = []interfaces.Constraint{{Kind: interfaces.ConstraintAllowed, Shards: []interfaces.ShardID{"s000"}, Children: []interfaces.ChildID{"h00"}, Reason: "cooperation: held away from h01"}}
	d, err := c.Step(Input{Now: t0.Add(time.Minute), View: v})
	if err != nil {
		t.Fatal(err)
	}
	if d.Record.AntiBounce != 0 {
		t.Fatalf("anti-bounce kept a rule for s000 that leaves it nowhere: %+v", d.Constraints)
	}
	if d.Mode != ModeEmergency || len(d.Evacuate) != 1 || d.Evacuate[0] != "s000" {
		t.Fatalf("mode %s, evacuate %v: want an emergency for s000 (%s)", d.Mode, d.Evacuate, d.Record.Why)
	}
	plan := solveLocal(t, d.Apply(v), 1)
	if ms := movesOf(plan, "s000"); len(ms) != 1 || ms[0].To != "h00" {
		t.Fatalf("s000 should go back to h00, the only child its rules allow: %+v", ms)
	}
	if acc, _ := d.Admit(v, plan); len(acc) != 1 || acc[0].Shard != "s000" {
		t.Fatalf("admitted %+v", acc)
	}
	// A rule naming no child of the view (unresolved) evacuates nothing.
	v.Constraints[0].Children = []interfaces.ChildID{"elsewhere"}
	d, _ = c.Step(Input{Now: t0.Add(2 * time.Minute), View: v})
	if len(d.Evacuate) != 0 {
		t.Fatalf("evacuated %v for a rule that allows no child here", d.Evacuate)
	}
}
