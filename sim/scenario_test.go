package sim

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

const goodScenario = `name: good
duration: 10m
tick: 1s
topology:
  regions:
    - name: eu
      hosts: 2
      capacity: {cpu: 8, mem: 16Gi}
workload:
  jobs:
    - {name: j, shards: 4, load: {cpu: 1, mem: 1Gi}, input_rate: 10}
events:
  - {at: 1m, kind: host_fail, host: eu-h001}
policies:
  - {name: p, solver: simtest-greedy}
assertions:
  - {kind: no_loss}
`

func TestParseGoodScenario(t *testing.T) {
	sc, err := ParseScenario([]byte(goodScenario), "good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if sc.Duration.D() != 10*time.Minute || sc.Tick.D() != time.Second {
		t.Errorf("duration %v tick %v", sc.Duration.D(), sc.Tick.D())
	}
	if got := float64(sc.Topology.Regions[0].Capacity.Mem); got != 16*(1<<30) {
		t.Errorf("mem capacity 16Gi parsed as %v", got)
	}
	if sc.Policies[0].Integration != Decoupled || sc.Policies[0].GlobalSolver != "simtest-greedy" {
		t.Errorf("defaults not applied: %+v", sc.Policies[0])
	}
	if sc.Assertions[0].To != sc.Duration {
		t.Errorf("assertion window end defaults to the duration, got %v", sc.Assertions[0].To.D())
	}
}

// TestBadScenarios: every bad file fails with an error that wraps ErrInvalid and
// names the line and the key.
func TestBadScenarios(t *testing.T) {
	cases := []struct {
		name, from, to string
		want           []string
	}{
		{"unknown key", "tick: 1s", "tick: 1s\ntickk: 2s", []string{"good.yaml:4: tickk: unknown key (known here: name, description,"}},
		{"unknown nested key", "hosts: 2", "hosts: 2\n      cpus: 4", []string{"good.yaml:8: topology.regions[0].cpus: unknown key (known here: name, hosts, capacity"}},
		{"negative capacity", "capacity: {cpu: 8, mem: 16Gi}", "capacity: {cpu: -8, mem: 16Gi}", []string{"good.yaml:8:", "topology.regions[0].capacity.cpu", "must be a non-negative number", `got "-8"`}},
		{"zero capacity", "capacity: {cpu: 8, mem: 16Gi}", "capacity: {cpu: 0}", []string{"good.yaml:8:", "topology.regions[0].capacity"}},
		{"unknown policy", "solver: simtest-greedy", "solver: nosuch", []string{"good.yaml:15:", "policies[0].solver", `unknown policy "nosuch"`, "simtest-greedy"}},
		{"plugin policy", "solver: simtest-greedy", "solver: plugin", []string{"good.yaml:15:", "policies[0].solver", `"plugin" policy calls another process and is not deterministic`}},
		{"event on a missing host", "host: eu-h001", "host: eu-h009", []string{"good.yaml:13:", "events[0].host", `"eu-h009" is not in the topology`}},
		{"unknown event kind", "kind: host_fail", "kind: explode", []string{"good.yaml:13:", "events[0].kind", "explode"}},
		{"bad duration", "duration: 10m", "duration: ten minutes", []string{`good.yaml:2: duration: must be a non-negative duration with a unit, such as 500ms, 2s or 1m30s, got "ten minutes"`}},
		{"negative load", "load: {cpu: 1, mem: 1Gi}", "load: {cpu: 1, mem: -1}", []string{"good.yaml:11:", "workload.jobs[0].load.mem"}},
		{"unknown assertion", "kind: no_loss", "kind: fast", []string{"good.yaml:17:", "assertions[0].kind", "fast"}},
		{"bad integration", "solver: simtest-greedy}", "solver: simtest-greedy, integration: telepathy}", []string{"good.yaml:15:", "policies[0].integration", "telepathy"}},
		{"event after the end", "at: 1m", "at: 1h", []string{"good.yaml:13:", "events[0].at"}},
		{"missing duration", "duration: 10m\n", "", []string{"duration", "is required"}},
		{"unknown job in a step", "events:", "  steps:\n    - {at: 1m, job: nosuch, factor: 2}\nevents:", []string{"workload.steps[0].job", "nosuch"}},
		{"slow host factor 0", "kind: host_fail, host: eu-h001", "kind: host_slow, host: eu-h001, factor: 0", []string{"good.yaml:13:", "events[0].factor", "(0, 1]"}},
		{"slow host factor above 1", "kind: host_fail, host: eu-h001", "kind: host_slow, host: eu-h001, factor: 2", []string{"good.yaml:13:", "events[0].factor"}},
		{"slow missing host", "kind: host_fail, host: eu-h001", "kind: host_slow, host: eu-h009, factor: 0.5", []string{"good.yaml:13:", "events[0].host", "eu-h009"}},
		{"unknown control policy", "solver: simtest-greedy}", "solver: simtest-greedy, control_policies: [clairvoyant]}", []string{"good.yaml:15:", "policies[0].control_policies", "clairvoyant"}},
		{"bad control policy setting", "solver: simtest-greedy}", "solver: simtest-greedy, control_policies: [straggler], control_policy_config: {straggler: {factor: \"0.5\"}}}", []string{"policies[0].control_policies", "straggler.factor"}},
		{"autoscale apply in the simulator", "solver: simtest-greedy}", "solver: simtest-greedy, control_policies: [autoscale], control_policy_config: {autoscale: {mode: apply}}}", []string{"policies[0].control_policies", "does not resize jobs"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(goodScenario, c.from) {
				t.Fatalf("test bug: %q not in the good scenario", c.from)
			}
			src := strings.Replace(goodScenario, c.from, c.to, 1)
			_, err := ParseScenario([]byte(src), "good.yaml")
			if err == nil {
				t.Fatalf("no error for:\n%s", src)
			}
			if !errors.Is(err, interfaces.ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid: %v", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestEmptyScenario(t *testing.T) {
	_, err := ParseScenario(nil, "empty.yaml")
	if err == nil || !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("empty file: %v", err)
	}
}

func TestQuantityAndDuration(t *testing.T) {
	src := strings.Replace(goodScenario, "capacity: {cpu: 8, mem: 16Gi}", "capacity: {cpu: 8, mem: 2G, net: 1.5k, tasks: 3}", 1)
	src = strings.Replace(src, "duration: 10m", "duration: 1m30s", 1)
	sc, err := ParseScenario([]byte(src), "q.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := sc.Topology.Regions[0].Capacity
	if c.Mem != 2e9 || c.Net != 1500 || c.Tasks != 3 {
		t.Errorf("quantities: %+v", c)
	}
	if sc.Duration.D() != 90*time.Second {
		t.Errorf("duration 1m30s: got %v", sc.Duration.D())
	}
	// A bare number is ambiguous (ms or s?) and refused, as in configs and job files.
	src = strings.Replace(src, "duration: 1m30s", "duration: 90", 1)
	if _, err := ParseScenario([]byte(src), "q.yaml"); err == nil || !strings.Contains(err.Error(), "a bare number is ambiguous") {
		t.Errorf("duration: 90: %v, want the bare number refused", err)
	}
}
