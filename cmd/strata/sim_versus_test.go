package main

import (
	"strings"
	"testing"
)

// strata sim compare evaluates a versus assertion once both policies ran and
// exits 1 naming its figures when it fails; strata sim run, with one policy,
// reports it as skipped.
func TestSimVersusExitCode(t *testing.T) {
	body := `name: versus-cli
seed: 5
duration: 10m
tick: 5s
control_interval: 30s
sample_every: 60s
topology:
  regions:
    - {name: a, hosts: 2, capacity: {cpu: 8, mem: 32Gi, net: 1G}}
    - {name: b, hosts: 2, capacity: {cpu: 8, mem: 32Gi, net: 1G}}
workload:
  jobs:
    - {name: web, shards: 12, load: {cpu: 0.5, mem: 1Gi, net: 1M}, input_rate: 100, state_bytes: 1Mi}
policies:
  - {name: decoupled, solver: greedy}
  - {name: collaborative, solver: greedy, integration: collaborative}
assertions:
  - {kind: versus, policy: collaborative, baseline: decoupled, spread_better: 0.9}
`
	f := writeFile(t, body)
	code, out, errOut := runCLI("sim", "compare", f, "--deterministic", "--no-progress")
	if code != 1 || !strings.Contains(errOut, "versus") || !strings.Contains(errOut, "spread better by") || !strings.Contains(out, "SPREAD CPU") {
		t.Fatalf("compare: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runCLI("sim", "run", f, "--deterministic", "--no-progress")
	if code != 0 || !strings.Contains(out, "skipped") {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
}
