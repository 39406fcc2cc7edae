package sim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-sched/strata/interfaces"
)

const hostileBase = `name: hostile
duration: 2m
tick: 1s
topology:
  regions:
    - name: eu
      hosts: 2
      capacity: {cpu: 8, mem: 16Gi}
workload:
  jobs:
    - {name: j, shards: 4, load: {cpu: 1, mem: 1Gi}, input_rate: 10}
policies:
  - {name: p, solver: greedy}
`

// TestHostileScenarios feeds the simulator files a typo or a hostile hand can
// write: non-finite numbers, values out of range, sizes that would exhaust
// memory, constraints on missing shards, data files with such values. Each
// must fail with an ErrInvalid naming the key (or file and line) and the rule,
// at parse time or when the run starts — never panic, run out of memory, or run
// with every solve failing.
func TestHostileScenarios(t *testing.T) {
	var b strings.Builder
	for r := 1; r < 200; r++ {
		fmt.Fprintf(&b, "    - {name: r%d, hosts: 1, capacity: {cpu: 1}}\n", r)
	}
	manyRegions := b.String()
	const job = "input_rate: 10}"
	arrivals := func(extra string) string {
		return job + "\n  arrivals: {file: a.csv, format: times, bin: 1s" + extra + "}"
	}
	cases := []struct {
		name    string
		replace []string // pairs: old, new (in the base)
		extra   string   // appended to the base
		files   map[string]string
		want    string
	}{
		{name: "service_ms NaN", extra: "model: {service_ms: .nan}\n", want: "s.yaml:14: model.service_ms: must be a finite number (got NaN)"},
		{name: "move_bandwidth Inf", extra: "model: {move_bandwidth: Inf}\n", want: `model.move_bandwidth: must be a non-negative number with an optional unit`},
		{name: "sizes ratio Inf", replace: []string{job, "input_rate: 10, sizes: {dist: zipf, ratio: .inf}}"}, want: "workload.jobs[0].sizes.ratio: must be a finite number"},
		{name: "step factor NaN", replace: []string{job, job + "\n  steps: [{at: 10s, factor: .nan}]"}, want: "workload.steps[0].factor: must be a finite number"},
		{name: "spike factor NaN", replace: []string{job, job + "\n  spikes: [{at: 10s, for: 10s, factor: .nan}]"}, want: "workload.spikes[0].factor: must be a finite number"},
		{name: "class weight NaN", replace: []string{"capacity: {cpu: 8, mem: 16Gi}", "classes: [{weight: .nan, capacity: {cpu: 8}}]"}, want: "topology.regions[0].classes[0].weight: must be a finite number"},
		// Each host within bounds, their sum at the region not (it failed at run time, a review's probe).
		{name: "huge capacity", replace: []string{"capacity: {cpu: 8, mem: 16Gi}", "capacity: {cpu: 8, mem: 16Gi, net: 9e23}"}, want: "topology.regions[0].capacity.net: must be at most 1e18"},
		{name: "assertion max Inf", extra: "assertions: [{kind: balance, resource: cpu, max: .inf}]\n", want: "assertions[0].max: must be a finite number"},
		{name: "state_bytes NaN", replace: []string{job, "input_rate: 10, state_bytes: NaN}"}, want: "workload.jobs[0].state_bytes: must be a non-negative number with an optional unit"},
		{name: "state_bytes .nan", replace: []string{job, "input_rate: 10, state_bytes: .nan}"}, want: `workload.jobs[0].state_bytes: must be a non-negative number with an optional unit (Ki, Mi, Gi, Ti, k, K, M, G, T), like 512Mi or 2G, got ".nan"`},
		{name: "state_bytes 1e19", replace: []string{job, "input_rate: 10, state_bytes: 1e19}"}, want: "workload.jobs[0].state_bytes: must be at most 4Ei bytes"},
		{name: "control max_bytes 1e19", extra: "control: {max_bytes: 1e19}\n", want: "control.max_bytes: must be at most 4Ei bytes"},
		{name: "duration beyond range", replace: []string{"duration: 2m", "duration: 1e10"}, want: `s.yaml:2: duration: must be a non-negative duration with a unit, such as 500ms, 2s or 1m30s, got "1e10" (a bare number is ambiguous`},
		{name: "sample_every NaN", replace: []string{"tick: 1s", "tick: 1s\nsample_every: NaN"}, want: `sample_every: must be a non-negative duration with a unit, such as 500ms, 2s or 1m30s, got "NaN"`},
		{name: "hosts not a number", replace: []string{"hosts: 2", "hosts: abc"}, want: `s.yaml:7: topology.regions[0].hosts: must be an integer, got "abc"`},
		{name: "two billion hosts", replace: []string{"hosts: 2", "hosts: 2000000000"}, want: "topology.regions[0].hosts: the topology may hold at most 1000000 hosts"},
		{name: "two billion shards", replace: []string{"shards: 4", "shards: 2000000000"}, want: "workload.jobs[0].shards: the workload may hold at most 10000000 shards"},
		{name: "two billion added hosts", extra: "events: [{at: 1m, kind: add_hosts, region: eu, count: 2000000000, capacity: {cpu: 1}}]\n", want: "events[0].count: the topology may hold at most 1000000 hosts"},
		{name: "ten thousand racks in each of 200 regions", replace: []string{"topology:\n", "topology:\n  racks_per_region: 10000\n", "workload:\n", manyRegions + "workload:\n"}, want: "topology.racks_per_region: gives 2000000 racks over 200 regions; at most 1000000 in all"},
		{name: "a hundred million racks", replace: []string{"topology:\n", "topology:\n  racks_per_region: 100000000\n"}, want: "topology.racks_per_region: must be in [0, 10000]"},
		{name: "pin on two children", replace: []string{"solver: greedy}", "solver: greedy, integration: manual, constraints: [{tier: region, kind: pin, job: j, children: [eu-h000, eu-h001]}]}"}, want: "policies[0].constraints[0].children: must name exactly one child for pin (got 2)"},
		{name: "pin of a missing shard", replace: []string{"solver: greedy}", "solver: greedy, integration: manual, constraints: [{tier: region, kind: pin, shards: [nope], children: [eu-h000]}]}"}, want: `policies[0].constraints[0].shards[0]: shard "nope" is not in the workload`},
		{name: "arrival time NaN", replace: []string{job, arrivals("")}, files: map[string]string{"a.csv": "0\nNaN\n3\n"}, want: `a.csv:2: "NaN" is not a finite time in seconds`},
		{name: "arrival time Inf", replace: []string{job, arrivals("")}, files: map[string]string{"a.csv": "0\n+Inf\n"}, want: `a.csv:2: "+Inf" is not a finite time in seconds`},
		{name: "arrivals over 1e15 s", replace: []string{job, arrivals("")}, files: map[string]string{"a.csv": "0\n1e15\n"}, want: "workload.arrivals.bin: 1s cuts the 1e+15s"},
		{name: "arrivals offset beyond range", replace: []string{job, arrivals(", offset: 9223372036s")}, files: map[string]string{"a.csv": "0\n1\n2\n"}, want: "workload.arrivals: offset + duration × scale must stay within 146 years"},
		{name: "arrivals scale 1e300", replace: []string{job, arrivals(", scale: 1e300")}, files: map[string]string{"a.csv": "0\n1\n2\n"}, want: "workload.arrivals: offset + duration × scale must stay within 146 years"},
		{name: "azure tokens NaN", replace: []string{job, job + "\n  arrivals: {file: a.csv, format: azure, weight: tokens}"}, files: map[string]string{"a.csv": "2023-11-16 18:15:46.68,NaN,1\n2023-11-16 18:15:48.68,3,1\n"}, want: "a.csv:1: token counts must be numbers ≥ 0"},
		{name: "replay scale Inf", replace: []string{job, job + "\n  replay: {file: r.csv, scale: .inf}"}, files: map[string]string{"r.csv": "time,shard,cpu,mem,net,input_rate\n0,s1,1,1,1,1\n"}, want: "workload.replay.scale: must be a finite number"},
		{name: "replay time 1e300", replace: []string{job, job + "\n  replay: {file: r.csv}"}, files: map[string]string{"r.csv": "time,shard,cpu,mem,net,input_rate\n1e300,s1,1,1,1,1\n0,s2,1,1,1,1\n"}, want: "r.csv:2: time must be below"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := hostileBase
			for i := 0; i+1 < len(c.replace); i += 2 {
				if !strings.Contains(src, c.replace[i]) {
					t.Fatalf("test bug: %q not in the base", c.replace[i])
				}
				src = strings.Replace(src, c.replace[i], c.replace[i+1], 1)
			}
			src += c.extra
			dir := t.TempDir()
			for name, body := range c.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			err := func() (err error) {
				defer func() {
					if r := recover(); r != nil {
						err = fmt.Errorf("panic: %v", r)
					}
				}()
				sc, err := ParseScenario([]byte(src), filepath.Join(dir, "s.yaml"))
				if err != nil {
					return err
				}
				res, err := Run(context.Background(), sc, Options{})
				if err != nil {
					return err
				}
				return fmt.Errorf("ran: %d solve failures", res.Policies[0].Summary.SolveFailures)
			}()
			if !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v\nwant an ErrInvalid containing %q", err, c.want)
			}
		})
	}
}
