package control

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/interfaces"
	"pgregory.net/rapid"
)

// rated builds a view of n hosts with shards of job "job" spread round-robin,
// every host reporting its shards at rate 100 records/s, except the hosts in
// slow which report rate/slowBy.
func rated(n, shards int, slow map[int]float64) *interfaces.View {
	loads := make([]float64, shards)
	owner := make([]int, shards)
	for i := range loads {
		loads[i], owner[i] = 1, i%n
	}
	v := tier(n, 100, loads, owner)
	for c := 0; c < n; c++ {
		r := interfaces.Report{Child: childID(c), Epoch: 1}
		for i := range loads {
			if owner[i] != c {
				continue
			}
			rate := 100.0
			if f, ok := slow[c]; ok {
				rate /= f
			}
			r.Shards = append(r.Shards, interfaces.ShardLoad{Shard: shardID(i), Load: interfaces.Load{CPU: 1}, Rate: rate, InputRate: 100})
		}
		v.Reports[childID(c)] = r
	}
	return v
}

func mustPolicies(t testing.TB, names []string, s map[string]PolicySettings) *Policies {
	t.Helper()
	ps, err := NewPolicies(names, s)
	if err != nil {
		t.Fatalf("NewPolicies: %v", err)
	}
	return ps
}

func run(t testing.TB, ps *Policies, in PolicyInput) Outcome {
	t.Helper()
	o, err := ps.Run(in)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return o
}

func TestPolicyConfigErrorsNameTheField(t *testing.T) {
	cases := []struct {
		names []string
		s     map[string]PolicySettings
		field string
	}{
		{[]string{"nope"}, nil, "control_policies[0]"},
		{[]string{"doctor", "doctor"}, nil, "control_policies[1]"},
		{[]string{"doctor"}, map[string]PolicySettings{"straggler": {"factor": "2"}}, "control_policy_config.straggler"},
		{[]string{"straggler"}, map[string]PolicySettings{"straggler": {"factor": "1"}}, "control_policy_config.straggler.factor"},
		{[]string{"straggler"}, map[string]PolicySettings{"straggler": {"factor": "NaN"}}, "control_policy_config.straggler.factor"},
		{[]string{"straggler"}, map[string]PolicySettings{"straggler": {"window": "-1s"}}, "control_policy_config.straggler.window"},
		{[]string{"straggler"}, map[string]PolicySettings{"straggler": {"speed": "3"}}, "control_policy_config.straggler.speed"},
		{[]string{"doctor"}, map[string]PolicySettings{"doctor": {"hosts": "0"}}, "control_policy_config.doctor.hosts"},
		{[]string{"doctor"}, map[string]PolicySettings{"doctor": {"window": "0s"}}, "control_policy_config.doctor.window"},
		{[]string{"autoscale"}, map[string]PolicySettings{"autoscale": {"mode": "yolo"}}, "control_policy_config.autoscale.mode"},
		{[]string{"autoscale"}, map[string]PolicySettings{"autoscale": {"min_shards": "5", "max_shards": "4"}}, "control_policy_config.autoscale.max_shards"},
	}
	for _, c := range cases {
		_, err := NewPolicies(c.names, c.s)
		var fe *interfaces.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !errors.Is(err, interfaces.ErrInvalid) {
			t.Errorf("NewPolicies(%v, %v) = %v, want a field error on %s", c.names, c.s, err, c.field)
		}
	}
	ps := mustPolicies(t, DefaultPolicies(), nil)
	if got := strings.Join(ps.Names(), ","); got != "straggler,doctor,autoscale" {
		t.Errorf("default policies %s", got)
	}
	if _, err := ps.Run(PolicyInput{View: rated(2, 2, nil)}); err == nil {
		t.Error("Run without a time succeeded")
	}
}

func TestStraggler(t *testing.T) {
	cases := []struct {
		name      string
		slow      map[int]float64
		hosts     int
		shards    int
		rounds    int // 5s apart
		wantEvict int
		wantSymp  bool
	}{
		{name: "no straggler", hosts: 4, rounds: 4},
		{name: "1.5x slower is under the factor", slow: map[int]float64{1: 1.5}, hosts: 4, rounds: 4},
		{name: "3x slower but not for the window yet", slow: map[int]float64{1: 3}, hosts: 4, rounds: 2, wantSymp: true},
		{name: "3x slower for the window", slow: map[int]float64{1: 3}, hosts: 4, rounds: 3, wantSymp: true, wantEvict: 3},
		{name: "too few peers", slow: map[int]float64{1: 3}, hosts: 2, shards: 4, rounds: 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ps := mustPolicies(t, []string{"straggler"}, map[string]PolicySettings{"straggler": {"window": "10s", "min_peers": "4"}})
			if tc.shards == 0 {
				tc.shards = 12
			}
			v := rated(tc.hosts, tc.shards, tc.slow)
			var o Outcome
			for r := 0; r < tc.rounds; r++ {
				o = run(t, ps, PolicyInput{Now: t0.Add(time.Duration(r) * 5 * time.Second), View: v})
			}
			if got := len(o.Findings) > 0; got != tc.wantSymp {
				t.Fatalf("findings %v, want some: %v", o.Findings, tc.wantSymp)
			}
			if len(o.Actions.Evict) != tc.wantEvict {
				t.Fatalf("evict %+v, want %d", o.Actions.Evict, tc.wantEvict)
			}
			if tc.wantEvict == 0 {
				if len(o.Actions.Constraints) != 0 {
					t.Errorf("constraints without a confirmed straggler: %+v", o.Actions.Constraints)
				}
				return
			}
			f := o.Findings[0]
			for _, want := range []string{"job job on h01", "33.33 records/s", "vs 100 on 9 shards elsewhere", "0.33×", "for 10s"} {
				if !strings.Contains(f.Evidence, want) {
					t.Errorf("evidence %q lacks %q", f.Evidence, want)
				}
			}
			for _, e := range o.Actions.Evict {
				if e.From != "h01" || !strings.Contains(e.Reason, "straggler: job job on h01") {
					t.Errorf("eviction %+v", e)
				}
			}
			c := o.Actions.Constraints[0]
			if c.Kind != interfaces.ConstraintAllowed || len(c.Shards) != 12 || joinIDs(c.Children) != "h00,h02,h03" {
				t.Errorf("constraint %+v", c)
			}
			if len(o.Actions.Alerts) != 1 || o.Actions.Alerts[0].Code != AlertStraggler {
				t.Errorf("alerts %+v", o.Actions.Alerts)
			}
			// The rule holds for the cooldown even when the evidence is gone
			// (the shards left), then lapses.
			moved := rated(tc.hosts, 12, nil)
			o = run(t, ps, PolicyInput{Now: t0.Add(time.Minute), View: moved})
			if len(o.Actions.Constraints) != 1 || len(o.Actions.Evict) != 3 || len(o.Actions.Alerts) != 1 {
				t.Errorf("during the cooldown: %+v", o.Actions)
			}
			o = run(t, ps, PolicyInput{Now: t0.Add(11 * time.Minute), View: moved})
			if len(o.Actions.Constraints) != 0 || len(o.Actions.Evict) != 0 || len(o.Actions.Alerts) != 0 {
				t.Errorf("after the cooldown: %+v", o.Actions)
			}
		})
	}
}

// A symptom that disappears for a round starts its evidence window over.
func TestStragglerWindowRestarts(t *testing.T) {
	ps := mustPolicies(t, []string{"straggler"}, map[string]PolicySettings{"straggler": {"window": "10s"}})
	slow, fine := rated(4, 12, map[int]float64{2: 4}), rated(4, 12, nil)
	for i, v := range []*interfaces.View{slow, slow, fine, slow, slow} {
		if o := run(t, ps, PolicyInput{Now: t0.Add(time.Duration(i) * 5 * time.Second), View: v}); len(o.Actions.Evict) != 0 {
			t.Fatalf("round %d evicted %+v before a full window of evidence", i, o.Actions.Evict)
		}
	}
	if o := run(t, ps, PolicyInput{Now: t0.Add(25 * time.Second), View: slow}); len(o.Actions.Evict) != 3 {
		t.Fatalf("after a full window: %+v", o.Actions.Evict)
	}
}

func fail(shard string, host int, at time.Duration) Failure {
	return Failure{Shard: interfaces.ShardID(shard), Child: childID(host), At: t0.Add(at), Error: "exit status 1"}
}

func TestDoctor(t *testing.T) {
	cases := []struct {
		name       string
		hosts      int
		failures   []Failure
		now        time.Duration
		quarantine bool
		evict      bool
		avoid      string // allowed children of the constraint
	}{
		{name: "no failures", hosts: 4, now: time.Second},
		{name: "one failure: avoid that host, move off it", hosts: 4, failures: []Failure{fail("s000", 0, 0)}, now: time.Second, evict: true, avoid: "h01,h02,h03"},
		{name: "two hosts, same host twice", hosts: 4, failures: []Failure{fail("s000", 0, 0), fail("s000", 0, time.Second), fail("s000", 1, 2*time.Second)}, now: 3 * time.Second, evict: true, avoid: "h02,h03"},
		{name: "three distinct hosts: poison", hosts: 4, failures: []Failure{fail("s000", 0, 0), fail("s000", 1, time.Second), fail("s000", 2, 2*time.Second)}, now: 3 * time.Second, quarantine: true},
		{name: "every host of two", hosts: 2, failures: []Failure{fail("s000", 0, 0), fail("s000", 1, time.Second)}, now: 2 * time.Second, quarantine: true},
		{name: "old failures expire", hosts: 4, failures: []Failure{fail("s000", 0, 0), fail("s000", 1, time.Second), fail("s000", 2, 2*time.Second)}, now: 11 * time.Minute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ps := mustPolicies(t, []string{"doctor"}, nil)
			v := rated(tc.hosts, 8, nil)
			o := run(t, ps, PolicyInput{Now: t0.Add(tc.now), View: v, Failures: tc.failures})
			if got := len(o.Actions.Quarantine) == 1; got != tc.quarantine {
				t.Fatalf("quarantine %+v, want %v", o.Actions.Quarantine, tc.quarantine)
			}
			if tc.quarantine {
				q := o.Actions.Quarantine[0]
				if q.Shard != "s000" || !strings.Contains(q.Reason, "doctor: shard s000 failed on") || !strings.Contains(q.Reason, "h00 at 00:00:00.000: exit status 1") {
					t.Errorf("quarantine reason %q", q.Reason)
				}
				if len(o.Actions.Evict) != 0 || len(o.Actions.Constraints) != 0 {
					t.Errorf("a quarantined shard also gets %+v", o.Actions)
				}
				// Once quarantined, the doctor forgets it: a release, even
				// before the next round, starts afresh.
				o = run(t, ps, PolicyInput{Now: t0.Add(tc.now + time.Second), View: v})
				if len(o.Findings) != 0 {
					t.Errorf("findings after the quarantine: %v", o.Findings)
				}
				return
			}
			if got := len(o.Actions.Evict) == 1; got != tc.evict {
				t.Fatalf("evict %+v, want %v", o.Actions.Evict, tc.evict)
			}
			if tc.avoid == "" {
				if len(o.Actions.Constraints) != 0 {
					t.Errorf("constraints %+v", o.Actions.Constraints)
				}
				return
			}
			c := o.Actions.Constraints[0]
			if c.Kind != interfaces.ConstraintAllowed || joinIDs(c.Children) != tc.avoid || len(c.Shards) != 1 || !strings.HasPrefix(c.Reason, "doctor: failed on h00") {
				t.Errorf("constraint %+v, want allowed %s", c, tc.avoid)
			}
		})
	}
}

// A poison shard with a move in flight is quarantined once the move landed,
// the evidence kept meanwhile.
func TestDoctorWaitsForAnInFlightMove(t *testing.T) {
	ps := mustPolicies(t, []string{"doctor"}, nil)
	v := rated(4, 8, nil)
	moving := *v
	moving.InFlight = []interfaces.Move{{Shard: "s000", From: "h00", To: "h03", Epoch: 1}}
	fs := []Failure{fail("s000", 0, 0), fail("s000", 1, time.Second), fail("s000", 2, 2*time.Second)}
	o := run(t, ps, PolicyInput{Now: t0.Add(3 * time.Second), View: &moving, Failures: fs})
	if len(o.Actions.Quarantine) != 0 || len(o.Findings) != 1 || !o.Findings[0].Confirmed {
		t.Fatalf("in flight: %+v", o)
	}
	o = run(t, ps, PolicyInput{Now: t0.Add(4 * time.Second), View: v})
	if len(o.Actions.Quarantine) != 1 {
		t.Fatalf("after the move: %+v", o.Actions)
	}
}

func TestAutoscale(t *testing.T) {
	global := func(inputRate float64, shards int) *interfaces.View {
		v := rated(2, shards, nil)
		v.Tier = interfaces.TierGlobal
		for c, r := range v.Reports {
			for i := range r.Shards {
				r.Shards[i].InputRate = inputRate
			}
			v.Reports[c] = r
		}
		return v
	}
	cases := []struct {
		name     string
		settings PolicySettings
		view     *interfaces.View
		rounds   int
		want     []Resize
	}{
		{name: "right-sized", view: global(100, 4), rounds: 3},
		{name: "not the global tier", view: rated(2, 4, nil), settings: PolicySettings{"rate_per_shard": "10"}, rounds: 3},
		{name: "under-provisioned, reported", view: global(250, 4), settings: PolicySettings{"rate_per_shard": "100", "window": "0s"}, rounds: 1,
			want: []Resize{{Job: "job", Current: 4, Advised: 10, Target: 4}}},
		{name: "applied, bounded by the step", view: global(250, 4), settings: PolicySettings{"rate_per_shard": "100", "window": "0s", "mode": "apply", "max_step": "3"}, rounds: 1,
			want: []Resize{{Job: "job", Current: 4, Advised: 10, Target: 7, Apply: true}}},
		{name: "applied once per cooldown", view: global(250, 4), settings: PolicySettings{"rate_per_shard": "100", "window": "0s", "mode": "apply"}, rounds: 2,
			want: []Resize{{Job: "job", Current: 4, Advised: 10, Target: 4}}},
		{name: "over-provisioned, measured rate", view: global(20, 8), settings: PolicySettings{"window": "0s", "mode": "apply", "min_shards": "3"}, rounds: 1,
			want: []Resize{{Job: "job", Current: 8, Advised: 3, Target: 6, Apply: true}}},
		{name: "not for the window yet", view: global(250, 4), settings: PolicySettings{"rate_per_shard": "100"}, rounds: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ps := mustPolicies(t, []string{"autoscale"}, map[string]PolicySettings{"autoscale": tc.settings})
			var o Outcome
			for r := 0; r < tc.rounds; r++ {
				o = run(t, ps, PolicyInput{Now: t0.Add(time.Duration(r) * 10 * time.Second), View: tc.view})
			}
			got := o.Actions.Resize
			for i := range got {
				if !strings.Contains(got[i].Reason, "DS2 advises") {
					t.Errorf("reason %q", got[i].Reason)
				}
				got[i].Reason = ""
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("resize %+v, want %+v", got, tc.want)
			}
		})
	}
}

// Merge turns evictions into an emergency round for those shards only, without
// the periodic budget; the mass-failure guard still holds everything.
func TestMergeEvictions(t *testing.T) {
	d := Decision{Mode: ModePeriodic, MaxMoves: 2, Constraints: []interfaces.Constraint{{Kind: interfaces.ConstraintMaxMoves, Max: 2}}, Record: Record{Mode: "periodic", Why: "error"}}
	o := Outcome{Actions: Actions{Evict: []Eviction{{Shard: "s1", From: "h1"}}, Constraints: []interfaces.Constraint{{Kind: interfaces.ConstraintAllowed, Shards: []interfaces.ShardID{"s1"}, Children: []interfaces.ChildID{"h2"}}}}}
	o.Merge(&d)
	if d.Mode != ModeEmergency || d.MaxMoves != 0 || len(d.Constraints) != 1 || d.Constraints[0].Kind != interfaces.ConstraintAllowed || len(d.Evacuate) != 1 {
		t.Errorf("merged %+v", d)
	}
	acc, rej := d.Admit(nil, interfaces.Plan{Moves: []interfaces.Move{{Shard: "s1", From: "h1", To: "h2"}, {Shard: "s2", From: "h1", To: "h2"}}})
	if len(acc) != 1 || acc[0].Shard != "s1" || len(rej) != 1 {
		t.Errorf("admitted %+v, rejected %+v", acc, rej)
	}
	g := Decision{Mode: ModeHold, Record: Record{Guard: true}}
	o.Merge(&g)
	if g.Mode != ModeHold || len(g.Evacuate) != 0 {
		t.Errorf("under the guard: %+v", g)
	}
}

// TestPropPoliciesKeepHardConstraints: whatever the rates and failures, the
// moves a round admits after the policies' actions are merged break no pin or
// allowed list, never put a shard on a child a policy excluded and never move
// an evicted shard back; a move over capacity (the solver may propose one for
// an evicted shard when every other allowed child is full) is refused by the
// verification the daemons run before committing (balancer.Verify), so what
// commits is within capacity too.
func TestPropPoliciesKeepHardConstraints(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(2, 6).Draw(rt, "hosts")
		shards := rapid.IntRange(2, 24).Draw(rt, "shards")
		slow := map[int]float64{}
		for c := 0; c < n; c++ {
			if rapid.Bool().Draw(rt, fmt.Sprintf("slow%d", c)) {
				slow[c] = rapid.Float64Range(1, 6).Draw(rt, fmt.Sprintf("by%d", c))
			}
		}
		v := rated(n, shards, slow)
		for i := range v.Children {
			v.Children[i].Capacity.CPU = rapid.Float64Range(2, 12).Draw(rt, fmt.Sprintf("cap%d", i))
		}
		for i := range v.Shards {
			switch rapid.IntRange(0, 5).Draw(rt, fmt.Sprintf("cons%d", i)) {
			case 0:
				v.Shards[i].Constraints.Pinned = v.Assignments[i].Child
			case 1:
				v.Shards[i].Constraints.Allowed = []interfaces.ChildID{v.Assignments[i].Child, childID(rapid.IntRange(0, n-1).Draw(rt, "alt"))}
			}
		}
		var failures []Failure
		for k := rapid.IntRange(0, 6).Draw(rt, "failures"); k > 0; k-- {
			failures = append(failures, fail(string(shardID(rapid.IntRange(0, shards-1).Draw(rt, "fs"))), rapid.IntRange(0, n-1).Draw(rt, "fh"), 0))
		}
		ps := mustPolicies(t, DefaultPolicies(), map[string]PolicySettings{"straggler": {"window": "0s", "min_peers": "1"}, "doctor": {"hosts": "2"}})
		o, err := ps.Run(PolicyInput{Now: t0, View: v, Failures: failures})
		if err != nil {
			rt.Fatal(err)
		}
		c := mustNew(t, DefaultConfig())
		d, err := c.Step(Input{Now: t0, View: v})
		if err != nil {
			rt.Fatal(err)
		}
		o.Merge(&d)
		if !d.Solve() {
			return
		}
		sv := d.Apply(v)
		p, err := balancer.FromView(sv, balancer.ViewOptions{})
		if err != nil {
			rt.Fatalf("FromView: %v", err)
		}
		res, err := balancer.Solve("local", p, balancer.Options{Seed: 1})
		if err != nil {
			rt.Fatalf("Solve: %v", err)
		}
		acc, _ := d.Admit(sv, res.Plan(v.Tier))
		verdict, err := balancer.VerifyView(v, acc)
		if err != nil {
			rt.Fatal(err)
		}
		for _, r := range verdict.Rejected {
			if r.Code != balancer.RejectCapacity {
				rt.Fatalf("admitted move breaks a hard constraint: %+v", r)
			}
		}
		acc = verdict.Accepted
		for _, m := range acc {
			for _, k := range o.Actions.Constraints {
				if k.Kind == interfaces.ConstraintAllowed && containsShard(k.Shards, m.Shard) && !slices.Contains(k.Children, m.To) {
					rt.Fatalf("move %+v goes to a child the policy excluded (%s)", m, k.Reason)
				}
			}
			for _, e := range o.Actions.Evict {
				if e.Shard == m.Shard && m.To == e.From {
					rt.Fatalf("evicted shard moved back onto %s", e.From)
				}
			}
		}
	})
}

func containsShard(xs []interfaces.ShardID, id interfaces.ShardID) bool {
	for _, x := range xs {
		if x == id {
			return true
		}
	}
	return false
}

// Controller.Merge amends the controller's pending decision: Observe accepts
// the evictions' moves of a round the controller had decided to hold, and
// remembers them for anti-bounce.
func TestControllerMergeAmendsThePendingDecision(t *testing.T) {
	c := mustNew(t, DefaultConfig())
	v := rated(3, 6, nil)
	d, err := c.Step(Input{Now: t0, View: v})
	if err != nil || d.Mode != ModeHold {
		t.Fatalf("mode %s, %v", d.Mode, err)
	}
	o := Outcome{Actions: Actions{Evict: []Eviction{{Shard: "s000", From: "h00"}}}}
	c.Merge(&d, &o)
	if h := c.History(); h[len(h)-1].Mode != "emergency" {
		t.Errorf("history record mode %s", h[len(h)-1].Mode)
	}
	m := interfaces.Move{Shard: "s000", From: "h00", To: "h01"}
	if err := c.Observe(RoundResult{Round: d.Round, Planned: 1, Applied: []interfaces.Move{m}}); err != nil {
		t.Fatalf("Observe: %v", err)
	}
	applyMoves(v, []interfaces.Move{m})
	d2, _ := c.Step(Input{Now: t0.Add(time.Second), View: v})
	if b := d2.bounce["s000"]; len(b) != 1 || b[0] != "h00" {
		t.Errorf("the eviction is not remembered for anti-bounce: %v", d2.bounce)
	}
}

// The straggler's shortcut (a child's peers' median is computed only when the
// child can be a straggler) finds exactly the children a brute-force
// comparison of each child's median with the median of all other children's
// rates finds.
func TestPropStragglerMatchesBruteForce(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(2, 7).Draw(rt, "hosts")
		shards := rapid.IntRange(n, 40).Draw(rt, "shards")
		v := rated(n, shards, nil)
		for c, r := range v.Reports {
			for i := range r.Shards {
				r.Shards[i].Rate = float64(rapid.IntRange(0, 12).Draw(rt, "rate")) * 10
			}
			v.Reports[c] = r
		}
		factor := rapid.Float64Range(1.1, 4).Draw(rt, "factor")
		minPeers := rapid.IntRange(1, 6).Draw(rt, "min_peers")
		ps := mustPolicies(t, []string{"straggler"}, map[string]PolicySettings{"straggler": {"factor": fmt.Sprint(factor), "min_peers": fmt.Sprint(minPeers)}})
		o, err := ps.Run(PolicyInput{Now: t0, View: v})
		if err != nil {
			rt.Fatal(err)
		}
		got := map[interfaces.ChildID]bool{}
		for _, f := range o.Findings {
			got[f.Child] = true
		}
		for c, r := range v.Reports {
			var mine, peers []float64
			for _, sl := range r.Shards {
				mine = append(mine, sl.Rate)
			}
			for o, q := range v.Reports {
				if o != c {
					for _, sl := range q.Shards {
						peers = append(peers, sl.Rate)
					}
				}
			}
			ref := median(peers)
			want := len(mine) > 0 && len(peers) >= minPeers && ref > 0 && median(mine)*factor < ref
			if got[c] != want {
				rt.Fatalf("%s: found %v, brute force %v (mine %v, peers median %v, factor %v)", c, got[c], want, mine, ref, factor)
			}
		}
	})
}
