package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const cliScenario = `name: cli
seed: 5
duration: 10m
tick: 1s
control_interval: 30s
sample_every: 1m
topology:
  regions:
    - {name: eu, hosts: 3, capacity: {cpu: 8, mem: 32Gi}, jitter: 0.2}
workload:
  jobs:
    - {name: j, shards: 12, load: {cpu: 1, mem: 1Gi}, input_rate: 100, sizes: {dist: zipf, ratio: 10}}
policies:
  - {name: g, solver: greedy}
  - {name: l, solver: local}
assertions:
  - {kind: no_loss}
`

func writeScenario(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSimRunDeterministicJSON(t *testing.T) {
	f := writeScenario(t, cliScenario)
	code, a, stderr := runCLI("sim", "run", f, "-o", "json", "--deterministic")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	_, b, _ := runCLI("sim", "run", f, "-o", "json", "--deterministic")
	if a != b {
		t.Fatal("same file and seed gave different JSON")
	}
	_, c, _ := runCLI("sim", "run", f, "-o", "json", "--deterministic", "--seed", "6")
	if a == c {
		t.Fatal("seeds 5 and 6 gave identical JSON")
	}
	var rep struct {
		Seed     uint64
		Policies []map[string]any
	}
	if err := json.Unmarshal([]byte(a), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Seed != 5 || len(rep.Policies) != 1 || rep.Policies[0]["policy"] != "g" {
		t.Fatalf("run runs the first policy and prints the seed: %+v", rep)
	}
	for _, k := range []string{"policy", "max_over_lb", "max_over_mean", "util_p99", "latency_p99_ms", "lag", "moves", "bytes_moved", "solve_seconds"} {
		if _, ok := rep.Policies[0][k]; !ok {
			t.Errorf("JSON summary lacks %q", k)
		}
	}
	if m, ok := rep.Policies[0]["max_over_lb"].(map[string]any); !ok || m["cpu"] == nil {
		t.Errorf("max_over_lb is not keyed by resource: %v", rep.Policies[0]["max_over_lb"])
	}
}

func TestSimCompareOutputs(t *testing.T) {
	f := writeScenario(t, cliScenario)
	dir := filepath.Join(t.TempDir(), "out")
	code, out, stderr := runCLI("sim", "compare", f, "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, w := range []string{"seed 5", "POLICY", "\ng ", "\nl ", "MAX/LB CPU", "ok   g assertion 0"} {
		if !strings.Contains(out, w) {
			t.Errorf("table lacks %q:\n%s", w, out)
		}
	}
	for _, name := range []string{"summary.json", "timeseries.csv", "report.html", "overview.svg"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || len(b) == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
	html, _ := os.ReadFile(filepath.Join(dir, "report.html"))
	if !strings.Contains(string(html), "<svg") {
		t.Error("the HTML report has no SVG plot")
	}
	// Self-contained: no scripts, stylesheets or images fetched from anywhere.
	for _, bad := range []string{"<script", "<link", "<img", "src=", "https://"} {
		if strings.Contains(string(html), bad) {
			t.Errorf("the HTML report contains %q", bad)
		}
	}
	csv, _ := os.ReadFile(filepath.Join(dir, "timeseries.csv"))
	if lines := strings.Count(string(csv), "\n"); lines != 1+2*10 {
		t.Errorf("timeseries.csv has %d lines, want a header and 10 samples per policy", lines)
	}
	code, out, _ = runCLI("sim", "compare", f, "-o", "html")
	if code != 0 || !strings.HasPrefix(out, "<!DOCTYPE html>") {
		t.Errorf("-o html: exit %d, output starts %.40q", code, out)
	}
}

func TestSimFailedAssertionExitsNonZero(t *testing.T) {
	f := writeScenario(t, strings.Replace(cliScenario, "  - {kind: no_loss}", "  - {kind: no_loss}\n  - {kind: slo, latency_p99_ms: 0.001, from: 2m}", 1))
	code, out, stderr := runCLI("sim", "compare", f)
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if !strings.Contains(stderr, "assertion 1 (slo, line") || !strings.Contains(stderr, "FAILED") || !strings.Contains(out, "FAIL g assertion 1") {
		t.Errorf("the failure does not say which and when:\nstdout %s\nstderr %s", out, stderr)
	}
}

func TestSimBadInput(t *testing.T) {
	bad := writeScenario(t, strings.Replace(cliScenario, "solver: greedy", "solver: magic", 1))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sim", "run"}, "exactly one scenario FILE"},
		{[]string{"sim", "run", "/nonexistent.yaml"}, "no such file"},
		{[]string{"sim", "run", bad}, `s.yaml:14: policies[0].solver: unknown policy "magic"`},
		{[]string{"sim", "run", writeScenario(t, cliScenario), "-o", "xml"}, "--output: must be one of table, json, html"},
		{[]string{"sim", "run", writeScenario(t, cliScenario), "--policy", "nope"}, `no policy named [nope]`},
		{[]string{"sim", "compare", writeScenario(t, cliScenario), "--seed", "x"}, "invalid argument"},
	} {
		code, _, stderr := runCLI(c.args...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want non-zero and %q", c.args, code, stderr, c.want)
		}
	}
	// An --out that cannot be made fails before the run: nothing on stdout.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCLI("sim", "run", writeScenario(t, cliScenario), "--out", filepath.Join(file, "dir"))
	if code != 2 || out != "" || !strings.Contains(stderr, "--out: mkdir") {
		t.Errorf("--out under a file: exit %d, stdout %q, stderr %q; want exit 2 before the run", code, out, stderr)
	}
}
