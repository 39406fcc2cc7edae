package sim

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

func assertion(t *testing.T, p PolicyResult, kind string) AssertionResult {
	t.Helper()
	for _, a := range p.Assertions {
		if a.Kind == kind {
			return a
		}
	}
	t.Fatalf("%s: no %s assertion", p.Summary.Policy, kind)
	return AssertionResult{}
}

func policy(t *testing.T, res *Result, name string) PolicyResult {
	t.Helper()
	for _, p := range res.Policies {
		if p.Summary.Policy == name {
			return p
		}
	}
	t.Fatalf("no policy %s", name)
	return PolicyResult{}
}

// TestShardStepConverges: in the library's shard-step, the step on 10% of the
// shards really breaks the balance, local is back within 3 rounds, and the
// converge assertion fails — naming the rounds — for greedy, which needs more.
func TestShardStepConverges(t *testing.T) {
	sc, err := LoadScenario("scenarios/shard-step.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for i := range sc.Assertions {
		sc.Assertions[i].Policies = nil // converge for greedy too
	}
	res := mustRun(t, sc, Options{})
	local := assertion(t, policy(t, res, "local"), AssertConverge)
	if !local.Passed || local.Value < 1 || local.Value > 3 || !strings.Contains(local.Message, "back at") {
		t.Errorf("local: %+v; want back within 1..3 rounds after the balance was lost", local)
	}
	greedy := assertion(t, policy(t, res, "greedy"), AssertConverge)
	if greedy.Passed || greedy.Value <= 3 || !strings.Contains(greedy.Message, "FAILED") || !strings.Contains(greedy.Message, "rounds of eu") {
		t.Errorf("greedy: %+v; want a failure naming the rounds", greedy)
	}
}

// TestFractionStep: a step with fraction 0.1 doubles the rate of exactly 10%
// of the job's shards, drawn with the seed, from its time on.
func TestFractionStep(t *testing.T) {
	sc, err := LoadScenario("scenarios/shard-step.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e, err := newEngine(sc, sc.Policies[0], sc.Seed, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.hotSets) != 1 || len(e.hotSets[0]) != 5 {
		t.Fatalf("hot sets %v; want one of 5 shards (10%% of 50)", e.hotSets)
	}
	before := append([]float64(nil), e.w.hot...)
	e.start()
	e.loads(sc.Workload.Steps[0].At.D())
	for {
		ev, ok := e.sched.next(sc.Workload.Steps[0].At.D())
		if !ok {
			break
		}
		if ev.kind == evHotOn {
			if err := e.handle(t.Context(), ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	stepped := 0
	for i := range e.w.hot {
		switch {
		case e.w.hot[i] == 2*before[i]:
			stepped++
		case e.w.hot[i] != before[i]:
			t.Errorf("shard %d: factor %v", i, e.w.hot[i])
		}
	}
	if stepped != 5 {
		t.Errorf("%d shards stepped, want 5", stepped)
	}
}

// TestNoBounceFails: without the controller's anti-bounce memory, greedy moves
// shards back to hosts they just left in csv-replay; the assertion names the
// shard, the hosts and the time. With the default bounce window it holds.
func TestNoBounceFails(t *testing.T) {
	src := func(window string) string {
		return `name: nb
duration: 40m
tick: 5s
control_interval: 30s
topology:
  regions:
    - {name: eu, hosts: 4, capacity: {cpu: 8, mem: 64Gi, net: 1G}}
workload:
  replay: {file: scenarios/data/shard-loads.csv, job: rec, state_bytes: 128Mi}
policies:
  - {name: greedy, solver: greedy` + window + `}
assertions:
  - {kind: no_bounce, within: 10m}
`
	}
	sc, err := ParseScenario([]byte(src(", control: {bounce_window: 0}")), "nb.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a := mustRun(t, sc, Options{}).Policies[0].Assertions[0]
	if a.Passed || a.Value < 1 || !strings.Contains(a.Message, "went back to eu-h") || !strings.Contains(a.Message, "after leaving it (from eu-h") {
		t.Errorf("without anti-bounce: %+v", a)
	}
	sc, err = ParseScenario([]byte(src("")), "nb.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if a := mustRun(t, sc, Options{}).Policies[0].Assertions[0]; !a.Passed {
		t.Errorf("with the default bounce window: %s", a.Message)
	}
}

// TestMassFailureGuard: in the library's mass-failure, the guard holds every
// move until the operator's acknowledgement and the alert is in the summary,
// the table and the HTML; without the guard the region fails over at once,
// and the same guard assertion fails.
func TestMassFailureGuard(t *testing.T) {
	sc, err := LoadScenario("scenarios/mass-failure.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for i := range sc.Assertions {
		sc.Assertions[i].Policies = nil
	}
	res := mustRun(t, sc, Options{})
	g := policy(t, res, "guarded")
	if a := assertion(t, g, AssertGuard); !a.Passed || a.Value != 0 || !strings.Contains(a.Message, "engaged by eu at t=20m10s") {
		t.Errorf("guarded: %+v", a)
	}
	if len(g.Summary.Alerts) != 1 || g.Summary.Alerts[0].Code != "mass_failure" || g.Summary.Alerts[0].Instance != "eu" || g.Summary.Alerts[0].At != 1210 || g.Summary.Alerts[0].Until != 1500 {
		t.Errorf("guarded alerts %+v; want mass_failure on eu from 20m10s to the acknowledgement at 25m", g.Summary.Alerts)
	}
	if a := assertion(t, g, AssertNoLoss); !a.Passed {
		t.Error(a.Message)
	}
	u := policy(t, res, "unguarded")
	if a := assertion(t, u, AssertGuard); a.Passed || a.Value == 0 || !strings.Contains(a.Message, "no tier instance engaged") {
		t.Errorf("unguarded: %+v", a)
	}
	if len(u.Summary.Alerts) != 0 {
		t.Errorf("unguarded alerts %+v", u.Summary.Alerts)
	}
	var b bytes.Buffer
	rep := res.Report(sc)
	if err := WriteJSON(&b, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"code": "mass_failure"`) || !strings.Contains(b.String(), `"alerts": []`) {
		t.Error("the JSON summary lacks the alerts")
	}
	b.Reset()
	if err := WriteTable(&b, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "ALERT guarded eu mass_failure (t=20m10s – 25m0s)") {
		t.Errorf("the table lacks the alert:\n%s", b.String())
	}
	b.Reset()
	if err := WriteHTML(&b, rep, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "<h2>Alerts</h2>") || !strings.Contains(b.String(), "mass_failure") {
		t.Error("the HTML report lacks the alerts")
	}
	// Same seed, same bytes.
	again := render(t, sc, mustRun(t, sc, Options{}))
	if !bytes.Equal(render(t, sc, res), again) {
		t.Error("two runs of mass-failure differ")
	}
}

// TestControlScenarioErrors: the new keys are validated, naming line and key.
func TestControlScenarioErrors(t *testing.T) {
	const base = `name: x
duration: 10m
topology:
  regions: [{name: eu, hosts: 2, capacity: {cpu: 1}}]
workload:
  jobs: [{name: j, shards: 4, load: {cpu: 0.1}}]
policies: [{name: g, solver: greedy}]
`
	cases := []struct{ name, src, want string }{
		{"control value", base + "control: {dead_band: -1}\n", "x.yaml:8: control.dead_band: must be a finite number ≥ 0"},
		{"policy control value", strings.Replace(base, "solver: greedy}", "solver: greedy, control: {min_moves: 3, max_moves: 2}}", 1), "policies[0].control.max_moves: must be ≥ min_moves"},
		{"control unknown key", base + "control: {bogus: 1}\n", "control.bogus: unknown key (known here: target_imbalance,"},
		{"move_budget", base + "model: {move_budget: 0.1}\n", "model.move_budget: is no longer supported"},
		{"fraction", strings.Replace(base, "policies:", "  steps: [{at: 1m, factor: 2, fraction: 1.5}]\npolicies:", 1), "workload.steps[0].fraction: must be in [0, 1]"},
		{"ack instance", base + "events: [{at: 1m, kind: ack_mass_failure, instance: mars}]\n", `events[0].instance: tier instance "mars" is not in the topology`},
		{"converge rounds", base + "assertions: [{kind: converge, resource: cpu, max: 1.2, from: 1m}]\n", "assertions[0].rounds: must be ≥ 1"},
		{"converge resource", base + "assertions: [{kind: converge, resource: gpu, max: 1.2, rounds: 2}]\n", "assertions[0].resource"},
		{"guard within", base + "assertions: [{kind: guard, from: 1m}]\n", "assertions[0].within: must be > 0"},
		{"guard max", base + "assertions: [{kind: guard, from: 1m, within: 1m, max: 0.5}]\n", "assertions[0].max: must be a whole number"},
		{"no_bounce window", base + "control: {bounce_window: 0}\nassertions: [{kind: no_bounce}]\n", `assertions[0].within: is required: policy "g" has no control bounce_window`},
	}
	for _, c := range cases {
		_, err := ParseScenario([]byte(c.src), "x.yaml")
		if err == nil || !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", c.name, err, c.want)
		}
	}
	// The deprecated model keys still work, as aliases of the control block.
	sc := mustParse(t, base+"model: {trigger: 1.3, floor: 0.4, target: 0.7}\ncontrol: {dead_band: 0.1}\n")
	c := sc.ControlConfig(sc.Policies[0])
	if c.TargetImbalance != 1.2 || c.Floor != 0.4 || c.TargetUtil != 0.7 || c.DeadBand != 0.1 {
		t.Errorf("aliases: %+v", c)
	}
}

// TestFailoverAfterLeaseAndGrace: a failed host's shards wait for its lease
// (detect_after) and the controller's grace before they move, as in the
// daemons; a lost region likewise at the global tier.
func TestFailoverAfterLeaseAndGrace(t *testing.T) {
	sc := mustParse(t, `name: failover
duration: 4m
tick: 5s
control_interval: 30s
sample_every: 5s
model: {detect_after: 10s}
control: {grace: 20s}
topology:
  regions:
    - {name: eu, hosts: 4, capacity: {cpu: 10}}
    - {name: us, hosts: 4, capacity: {cpu: 10}}
    - {name: ap, hosts: 4, capacity: {cpu: 10}}
workload:
  jobs: [{name: j, shards: 24, load: {cpu: 1}, input_rate: 10}]
events:
  - {at: 1m, kind: host_fail, host: eu-h001}
  - {at: 2m, kind: region_loss, region: us}
policies: [{name: g, solver: simtest-greedy}]
assertions: [{kind: no_loss}]
`)
	if got := sc.FailoverAfter(sc.Policies[0]); got != 30*time.Second {
		t.Fatalf("FailoverAfter %v, want 30s", got)
	}
	p := mustRun(t, sc, Options{}).Policies[0]
	unowned := func(sec float64) int {
		for _, s := range p.Series {
			if s.T == sec {
				return s.Unowned
			}
		}
		t.Fatalf("no sample at %vs", sec)
		return 0
	}
	// The sample at T covers the tick that starts at T-5s.
	if n := unowned(65); n == 0 {
		t.Fatal("no shard on the failed host")
	}
	if n := unowned(90); n == 0 {
		t.Errorf("shards re-placed before lease + grace (30 s): %d unowned at 1m25s", n)
	}
	if n := unowned(100); n != 0 {
		t.Errorf("%d shards still unowned after lease + grace", n)
	}
	if n := unowned(125); n == 0 {
		t.Error("the lost region held no shard")
	}
	if n := unowned(150); n != unowned(125) {
		t.Errorf("the global tier moved shards of the lost region before lease + grace: %d then %d unowned", unowned(125), n)
	}
	if n := unowned(240); n != 0 {
		t.Errorf("%d shards of the lost region still unowned at the end", n)
	}
	if !p.Assertions[0].Passed {
		t.Error(p.Assertions[0].Message)
	}
	if len(p.Summary.Alerts) != 0 {
		t.Errorf("alerts %+v; one host of four and one region of three are below the guard", p.Summary.Alerts)
	}
}
