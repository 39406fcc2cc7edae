package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/devcluster"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/testutil"
)

func TestPlanCommand(t *testing.T) {
	c, addr, host := startPlacedCluster(t)
	// Wait until what the host runs is what its region has committed for it, so
	// the plan and the host agree on the shards to move.
	region := c.Regions[c.HostRegion[host]]
	before := 0
	testutil.Eventually(t, host+" runs what its region committed for it", 20*time.Second, func() error {
		st, err := adminClient(t, region.GRPCAddr()).Status(context.Background(), &wire.StatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		committed := int64(-1)
		for _, ch := range st.Tiers[0].Instances[0].Children {
			if ch.Child.GetId() == host {
				committed = ch.Shards
			}
		}
		before = len(c.Hosts[host].Agent().Running())
		if committed == int64(before) && before > 0 {
			return nil
		}
		return fmt.Errorf("%s runs %d shards, its region committed %d", host, before, committed)
	})
	code, out, errOut := runCLI("plan", "--addr", addr, "--drain", host, "-o", "json")
	if code != 0 {
		t.Fatalf("plan: %d %s", code, errOut)
	}
	var p planJSON
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("plan -o json: %v\n%s", err, out)
	}
	off := 0
	for _, m := range p.Moves {
		if m.From == host {
			off++
		}
	}
	if off != before || p.Tier != "region" || !strings.Contains(p.Token, "@") {
		t.Fatalf("plan for draining %s (%d shards): %+v", host, before, p)
	}
	// Nothing applied: over more than two control intervals the host keeps
	// exactly the shards it had.
	had := fmt.Sprint(sortedIDs(c.Hosts[host].Agent().Running()))
	time.Sleep(500 * time.Millisecond)
	if now := fmt.Sprint(sortedIDs(c.Hosts[host].Agent().Running())); now != had {
		t.Fatalf("plan moved shards: %s → %s", had, now)
	}
	// Bad input: a failure whose message names what was wrong.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"plan", "--addr", addr, "--drain", "nope"}, "nope"},
		{[]string{"plan", "--addr", addr, "--fail", "nope"}, "nope"},
		{[]string{"plan", "--addr", addr, "--policy", "nope"}, "nope"},
		{[]string{"plan", "apply", "--addr", addr, "not-a-token"}, "not-a-token"},
	} {
		if code, _, errOut := runCLI(c.args...); code == 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q: want a failure naming %q", c.args, code, errOut, c.want)
		}
	}
	// Apply: the host ends empty; applying again is refused.
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, _, errOut = runCLI("plan", "apply", "--addr", addr, p.Token)
		if code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("apply: %s", errOut)
		}
		// The state moved on (a report, a round): plan again.
		_, out, _ = runCLI("plan", "--addr", addr, "--drain", host, "-o", "json")
		_ = json.Unmarshal([]byte(out), &p)
	}
	testutil.Eventually(t, host+" empty after the plan was applied", 30*time.Second, func() error {
		if n := len(c.Hosts[host].Agent().Running()); n != 0 {
			return fmt.Errorf("%s still runs %d shards", host, n)
		}
		return nil
	})
	if code, _, errOut := runCLI("plan", "apply", "--addr", addr, p.Token); code != 1 || !strings.Contains(errOut, "was used already: applied at") {
		t.Errorf("a used token: exit %d, %q; want exit 1 saying it was applied", code, errOut)
	}
	if err := c.CloseAndCheckLedger(); err != nil {
		t.Error(err)
	}
}

// TestPlanScenario: "plan --scenario" on a settled cluster, with a file that
// fails a host at t=0 and steps the job's load later, prints the simulator's
// metrics and the predicted moves (the failed host's shards move off it),
// applies nothing, and prints a token for the host's region that applies — and
// that is refused once the region's state has changed.
func TestPlanScenario(t *testing.T) {
	c, addr, host := startPlacedCluster(t)
	regionName := c.HostRegion[host]
	region := c.Regions[regionName]
	// Wait until every host runs what its region has committed for it: the
	// simulator starts from the committed assignment.
	running := func() map[string]int {
		m := map[string]int{}
		for name, h := range c.Hosts {
			m[name] = len(h.Agent().Running())
		}
		return m
	}
	testutil.Eventually(t, "every host runs what its region committed", 20*time.Second, func() error {
		agree := true
		for _, rd := range c.Regions {
			st, err := adminClient(t, rd.GRPCAddr()).Status(context.Background(), &wire.StatusRequest{})
			if err != nil {
				t.Fatal(err)
			}
			for _, ch := range st.Tiers[0].Instances[0].Children {
				if h := c.Hosts[ch.Child.GetId()]; h == nil || int64(len(h.Agent().Running())) != ch.Shards {
					agree = false
				}
			}
		}
		if agree {
			return nil
		}
		return fmt.Errorf("hosts do not run what their regions committed: %v", running())
	})
	before := running()
	file := writePlanFile(t, "plan-fail.yaml", fmt.Sprintf(`# fail a host now, and 50%% more load on wordcount in 2 minutes
duration: 5m
events:
  - {at: 0, kind: host_fail, host: %s}
workload:
  steps:
    - {at: 2m, job: wordcount, factor: 1.5}
assertions:
  - {kind: no_loss}
`, host))
	code, out, errOut := runCLI("plan", "--addr", addr, "--scenario", file, "-o", "json")
	if code != 0 {
		t.Fatalf("plan --scenario: exit %d: %s\n%s", code, errOut, out)
	}
	after := running()
	var p scenarioPlanJSON
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("plan --scenario -o json: %v\n%s", err, out)
	}
	if p.Live.Hosts != 4 || p.Live.Shards != 16 || p.Live.Regions != 2 || p.Live.Unplaced != 0 || p.Live.Measured != 16 {
		t.Errorf("live state: %+v", p.Live)
	}
	if len(p.Simulation.Policies) != 1 || p.Simulation.Policies[0].Policy != "live" || len(p.Simulation.Policies[0].MaxOverLB) == 0 || !p.Simulation.Passed {
		t.Errorf("simulation: %+v", p.Simulation)
	}
	if len(p.Predicted) != 1 {
		t.Fatalf("predicted: %+v", p.Predicted)
	}
	off := 0
	for _, m := range p.Predicted[0].FirstMoves {
		if m.From == host {
			off++
			if m.To == host {
				t.Errorf("predicted move stays on the failed host: %+v", m)
			}
		}
	}
	if off != before[host] || p.Predicted[0].Moves < off || p.Predicted[0].BytesMoved <= 0 {
		t.Errorf("predicted: %d of %s's %d shards move off it in %s; over the run %d moves, %d bytes: %+v",
			off, host, before[host], p.Predicted[0].FirstWindow, p.Predicted[0].Moves, p.Predicted[0].BytesMoved, p.Predicted[0].FirstMoves)
	}
	if len(p.Plans) != 1 || p.Plans[0].Tier != "region" || p.Plans[0].Instance != regionName || !strings.Contains(p.Plans[0].Token, "@") {
		t.Fatalf("plans: %+v", p.Plans)
	}
	planOff := 0
	for _, m := range p.Plans[0].Moves {
		if m.From == host {
			planOff++
		}
	}
	if planOff != before[host] {
		t.Errorf("the region's plan moves %d shards off %s, want %d: %+v", planOff, host, before[host], p.Plans[0])
	}
	if len(p.Agreement) != 1 || p.Agreement[0].PlanMoves != len(p.Plans[0].Moves) || p.Agreement[0].SameInSim > p.Agreement[0].PlanMoves || p.Agreement[0].SimMoves < off {
		t.Errorf("agreement: %+v", p.Agreement)
	}
	t.Logf("the simulator made %d of the region plan's %d moves in its first window", p.Agreement[0].SameInSim, p.Agreement[0].PlanMoves)
	for name, n := range before {
		if after[name] != n {
			t.Errorf("plan --scenario changed what runs: %s %d → %d", name, n, after[name])
		}
	}
	// The table form says the same for people.
	code, out, errOut = runCLI("plan", "--addr", addr, "--scenario", file)
	t.Logf("plan --scenario %s:\n%s", filepath.Base(file), out)
	for _, want := range []string{"Live state from", "POLICY", "MAX/LB CPU", "Predicted moves, policy live:", host, "Tier plans for the changes at t=0", "strata plan apply "} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("table output: exit %d, no %q in\n%s\n%s", code, want, out, errOut)
		}
	}

	// Changes at t=0 for two deciding instances give one plan each; what no
	// plan expresses is said.
	otherRegion := ""
	for name := range c.Regions {
		if name != regionName {
			otherRegion = name
		}
	}
	two := writePlanFile(t, "plan-two.yaml", fmt.Sprintf(`duration: 2m
events:
  - {at: 0, kind: drain, host: %s}
  - {at: 0, kind: region_loss, region: %s}
  - {at: 0, kind: add_hosts, region: %s, count: 1, capacity: {cpu: 16}}
`, host, otherRegion, regionName))
	code, out, errOut = runCLI("plan", "--addr", addr, "--scenario", two, "-o", "json")
	var p2 scenarioPlanJSON
	if code != 0 || json.Unmarshal([]byte(out), &p2) != nil {
		t.Fatalf("plan --scenario (two instances): exit %d %s\n%s", code, errOut, out)
	}
	if len(p2.Plans) != 2 || p2.Plans[0].Tier != "region" || p2.Plans[0].Instance != regionName || p2.Plans[1].Tier != "global" ||
		len(p2.NotInPlans) != 1 || !strings.Contains(p2.NotInPlans[0], "add_hosts 1 in "+regionName) {
		t.Fatalf("two instances: plans %+v, not in plans %q", p2.Plans, p2.NotInPlans)
	}
	if len(p2.Plans[1].Moves) == 0 {
		t.Errorf("the global plan for losing %s moves nothing", otherRegion)
	}
	for _, m := range p2.Plans[1].Moves {
		if m.From != otherRegion {
			t.Errorf("the global plan for losing %s moves %+v", otherRegion, m)
		}
	}

	// A failed versus assertion (judged once both policies ran) fails the
	// command, like any other assertion.
	versus := writePlanFile(t, "plan-versus.yaml", fmt.Sprintf(`duration: 2m
events:
  - {at: 0, kind: drain, host: %s}
policies:
  - {name: one, solver: greedy}
  - {name: same, solver: greedy}
assertions:
  - {kind: versus, policy: same, baseline: one, spread_better: 0.9}
`, host))
	if code, out, errOut := runCLI("plan", "--addr", addr, "--scenario", versus); code != 1 || !strings.Contains(errOut, "versus") || !strings.Contains(errOut, "nothing was applied") {
		t.Errorf("a failed versus assertion: exit %d, stderr %q\n%s", code, errOut, out)
	}

	// A change of the region's state since the plan: the token is refused.
	other := ""
	for name, r := range c.HostRegion {
		if r == regionName && name != host {
			other = name
		}
	}
	if other == "" {
		t.Fatalf("no second host in %s", regionName)
	}
	if _, err := adminClient(t, region.GRPCAddr()).Undrain(context.Background(), &wire.UndrainRequest{Child: other}); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI("plan", "apply", "--addr", addr, p.Plans[0].Token); code == 0 || !strings.Contains(errOut, "state changed") {
		t.Errorf("apply after a state change: exit %d, %q; want a refusal", code, errOut)
	}

	// Plan again and apply: the failed host's shards leave it.
	deadline := time.Now().Add(20 * time.Second)
	token := ""
	for {
		code, out, errOut = runCLI("plan", "--addr", addr, "--scenario", file, "-o", "json")
		if code != 0 {
			t.Fatalf("plan --scenario: %s", errOut)
		}
		p = scenarioPlanJSON{}
		if err := json.Unmarshal([]byte(out), &p); err != nil || len(p.Plans) != 1 {
			t.Fatalf("plan --scenario -o json: %v\n%s", err, out)
		}
		token = p.Plans[0].Token
		if code, _, errOut = runCLI("plan", "apply", "--addr", addr, token); code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("apply: %s", errOut)
		}
	}
	testutil.Eventually(t, host+" empty after the plan was applied", 30*time.Second, func() error {
		if n := len(c.Hosts[host].Agent().Running()); n != 0 {
			return fmt.Errorf("%s still runs %d shards", host, n)
		}
		return nil
	})
	if code, _, errOut := runCLI("plan", "apply", "--addr", addr, token); code != 1 || !strings.Contains(errOut, "was used already: applied at") {
		t.Errorf("a used token: exit %d, %q; want exit 1 saying it was applied", code, errOut)
	}

	// Bad files and flags: exit 2 with the file, line and key.
	bad := func(name, text string) string { return writePlanFile(t, name, text) }
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--scenario", bad("k.yaml", "duration: 1m\nbogus: 1\n")}, "k.yaml:2: bogus: unknown key"},
		{[]string{"--scenario", bad("h.yaml", "duration: 1m\nevents:\n  - {at: 0, kind: drain, host: nope}\n")}, `h.yaml:3: events[0].host: host "nope" is not a host of the live cluster`},
		{[]string{"--scenario", bad("t.yaml", "duration: 1m\ntopology:\n  regions: []\n")}, "t.yaml:2: topology: not allowed in a plan file"},
		{[]string{"--scenario", bad("p.yaml", "duration: 1m\n"), "--policy", "nope"}, `--policy "nope"`},
		{[]string{"--scenario", filepath.Join(t.TempDir(), "missing.yaml")}, "--scenario:"},
		{[]string{"--scenario", file, "--drain", host}, "--scenario: give the drains"},
	} {
		args := append([]string{"plan", "--addr", addr}, tc.args...)
		code, _, errOut := runCLI(args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
	if err := c.CloseAndCheckLedger(); err != nil {
		t.Error(err)
	}
}

func writePlanFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// startPlacedCluster starts a dev cluster of 2 regions × 2 hosts (closed with
// the test), submits the example job, waits until every shard is placed on a
// host and the periodic rounds have settled, and returns the Admin address of
// the global tier and a host that runs shards.
func startPlacedCluster(t *testing.T) (c *devcluster.Cluster, addr, host string) {
	t.Helper()
	c, err := devcluster.Start(devcluster.Options{Dir: t.TempDir(), Regions: 2, HostsPerRegion: 2,
		Interval: 200 * time.Millisecond, LeaseTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	addr = c.Global.GRPCAddr()
	if code, _, errOut := runCLI("job", "submit", "--addr", addr, "../../deploy/examples/job.yaml"); code != 0 {
		t.Fatalf("submit: %s", errOut)
	}
	testutil.Eventually(t, "every shard placed", 30*time.Second, func() error {
		code, out, _ := runCLI("shards", "--addr", addr, "-o", "json")
		if code == 0 && !strings.Contains(out, `"pending"`) && strings.Contains(out, `"placed"`) {
			return nil
		}
		return fmt.Errorf("shards not placed: %s", out)
	})
	// Let the periodic rounds settle before asking what a change would do.
	if err := c.Settle(1500*time.Millisecond, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	for name, h := range c.Hosts {
		if len(h.Agent().Running()) > 0 {
			return c, addr, name
		}
	}
	t.Fatal("no host runs a shard after the job was placed")
	return nil, "", ""
}

func sortedIDs(ids []interfaces.ShardID) []interfaces.ShardID {
	out := append([]interfaces.ShardID(nil), ids...)
	slices.Sort(out)
	return out
}

// TestPlanPrintsTheApplyHintOnlyWhenApplicable: a plan that leaves shards
// placed now with nowhere to go (stranded) is refused by "plan apply", so its
// output must not invite one.
func TestPlanPrintsTheApplyHintOnlyWhenApplicable(t *testing.T) {
	n := &tierNode{Tier: "global", Instance: "global"}
	for _, tt := range []struct {
		status     wire.PlanStatus
		infeasible int
		stranded   uint32
		applicable bool
	}{
		{wire.PlanStatus_PLAN_STATUS_OK, 0, 0, true},
		{wire.PlanStatus_PLAN_STATUS_PARTIAL, 0, 0, true},
		{wire.PlanStatus_PLAN_STATUS_INFEASIBLE, 3, 2, false},
		{wire.PlanStatus_PLAN_STATUS_INFEASIBLE, 3, 0, true}, // unplaced before, and still
	} {
		resp := &wire.AdminPlanResponse{Token: "t0", Stranded: tt.stranded, Plan: &wire.Plan{Status: tt.status, Infeasible: make([]*wire.Infeasible, tt.infeasible)}}
		p := planOutput(n, "127.0.0.1:7400", resp)
		var b strings.Builder
		if err := printPlan(&b, p); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		if p.Applicable != tt.applicable || strings.Contains(out, "strata plan apply") != tt.applicable {
			t.Errorf("status %v: applicable %v, output %q; want applicable %v and the apply hint only then", tt.status, p.Applicable, out, tt.applicable)
		}
		if tt.infeasible > 0 && !strings.Contains(out, "3 shards could not be placed") {
			t.Errorf("infeasible plan output %q does not say how many shards could not be placed", out)
		}
	}
}

// TestPlanRefusesAnEmptyOrInvalidTarget: an empty --drain or --fail used to
// plan a global rebalance and print a token; an empty or invalid ID is a usage
// error (exit 2) naming the flag, found before anything is asked.
func TestPlanRefusesAnEmptyOrInvalidTarget(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"plan", "--drain", ""}, "--drain: is required"},
		{[]string{"plan", "--fail", ""}, "--fail: is required"},
		{[]string{"plan", "--fail=", "--policy", "greedy"}, "--fail: is required"},
		{[]string{"plan", "--drain", "bad host"}, "--drain: must be"},
		{[]string{"plan", "--fail", "-x"}, "--fail: must be"},
	} {
		args := append(tt.args, "--addr", "127.0.0.1:1", "--timeout", "2s")
		if code, out, errOut := runCLI(args...); code != 2 || !strings.Contains(errOut, tt.want) || out != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 saying %q", args, code, out, errOut, tt.want)
		}
	}
}

// TestPlanJSONHasAnEmptyMovesList: a plan without moves prints "moves": [],
// not null, so a script can iterate over it.
func TestPlanJSONHasAnEmptyMovesList(t *testing.T) {
	p := planOutput(&tierNode{Tier: "global", Instance: "global"}, "127.0.0.1:7400", &wire.AdminPlanResponse{Token: "t0", Plan: &wire.Plan{}})
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"moves":[]`) {
		t.Errorf("plan -o json without moves: %s; want \"moves\": []", b)
	}
}
