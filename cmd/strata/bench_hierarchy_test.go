package main

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/internal/testutil"
	"github.com/strata-sched/strata/sim/hierbench"
)

func TestBenchHierarchyJSON(t *testing.T) {
	code, out, errOut := runCLI("bench", "hierarchy", "--shards", "2000", "--hosts", "40", "--regions", "4", "--seed", "3", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, k := range []string{"hierarchy", "flat", "speedup", "shards", "hosts", "regions", "seed", "lb", "policy", "clock", "flat_reached_target", "candidates", "global_candidates", "flat_candidates", "settings", "critical_path_speedup", "cpu_ratio"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("no key %q in %s", k, out)
		}
	}
	var v benchHierarchyJSON
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]struct {
		s, q            float64
		moves, unplaced int
	}{"hierarchy": {v.Hier.Seconds, v.Hier.MaxOverLB, v.Hier.Moves, v.Hier.Unplaced}, "flat": {v.Flat.Seconds, v.Flat.MaxOverLB, v.Flat.Moves, v.Flat.Unplaced}} {
		if r.s <= 0 || r.q < 1 || r.q > 1.1 || r.moves <= 0 || r.unplaced != 0 {
			t.Errorf("%s: %+v", name, r)
		}
	}
	if v.Shards != 2000 || v.Hosts != 40 || v.Regions != 4 || v.Policy != "local" || v.Speedup <= 0 {
		t.Errorf("%+v", v)
	}
	// The defaults are the daemons' own: the policy configuration of a tier
	// daemon that names none, at both tiers and in the flat run (which gets
	// only the hierarchy's quality as its target).
	gp, gc := daemonPolicy("global")
	rp, rc := daemonPolicy("region")
	fc := maps.Clone(v.FlatConfig)
	delete(fc, "target_max_over_lb")
	if v.Settings != "daemons" || v.Policy != rp || gp != rp || !maps.Equal(v.GlobalConfig, gc) || !maps.Equal(v.RegionConfig, rc) || !maps.Equal(fc, rc) {
		t.Errorf("settings %q, policy %s, configs global %v region %v flat %v: want the daemons' (%s: %v, %s: %v)", v.Settings, v.Policy, v.GlobalConfig, v.RegionConfig, v.FlatConfig, gp, gc, rp, rc)
	}
	if v.Hier.CPUSeconds <= 0 || v.Flat.CPUSeconds <= 0 || v.Hier.CriticalPathSeconds <= 0 || v.CriticalPathSpeedup <= 0 || v.CPURatio <= 0 || len(v.Hier.Rounds) != 3 || v.Hier.SteadySeconds <= 0 {
		t.Errorf("cpu %g / %g s, critical path %g s, ratios %g / %g, rounds %+v: want all set", v.Hier.CPUSeconds, v.Flat.CPUSeconds, v.Hier.CriticalPathSeconds, v.CriticalPathSpeedup, v.CPURatio, v.Hier.Rounds)
	}
	// Same flags, same figures (except the seconds).
	_, out2, _ := runCLI("bench", "hierarchy", "--shards", "2000", "--hosts", "40", "--regions", "4", "--seed", "3", "-o", "json")
	var v2 benchHierarchyJSON
	if err := json.Unmarshal([]byte(out2), &v2); err != nil {
		t.Fatal(err)
	}
	if v2.Hier.MaxOverLB != v.Hier.MaxOverLB || v2.Flat.MaxOverLB != v.Flat.MaxOverLB || v2.Hier.Moves != v.Hier.Moves || v2.Flat.Moves != v.Flat.Moves {
		t.Errorf("same flags, different results:\n%s\n%s", out, out2)
	}
}

// TestBenchHierarchyFlatBudget: --flat-budget cuts the flat run, not the
// hierarchy, however long the hierarchy took before it.
func TestBenchHierarchyFlatBudget(t *testing.T) {
	// Big enough that the flat run outlasts the 1 ns timer by far; small
	// enough for the daemons' own solver settings under -race (50,000 shards
	// on 500 hosts ran past the 10-minute test timeout).
	code, out, errOut := runCLI("bench", "hierarchy", "--shards", "10000", "--hosts", "100", "--regions", "5", "--seed", "3", "--flat-budget", "1ns", "--no-progress", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var v benchHierarchyJSON
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	if v.Hier.Status != "ok" || v.Flat.Status != "partial" || v.FlatReached {
		t.Errorf("hierarchy %s, flat %s (reached %v): want ok, partial, not reached", v.Hier.Status, v.Flat.Status, v.FlatReached)
	}
}

func TestBenchHierarchyTableAndErrors(t *testing.T) {
	code, out, errOut := runCLI("bench", "hierarchy", "--shards", "500", "--hosts", "10", "--regions", "2")
	if code != 0 || !strings.Contains(out, "hierarchy") || !strings.Contains(out, "flat") || !strings.Contains(out, "speedup") || !strings.Contains(out, "max_over_lb") ||
		!strings.Contains(out, "critical path") || !strings.Contains(out, "cpu_s") || !strings.Contains(out, "the daemons' own") || strings.Contains(out, "FULL SCAN") {
		t.Fatalf("table: exit %d\n%s%s", code, out, errOut)
	}
	// --full-scan is labelled as such and scores every host.
	code, out, errOut = runCLI("bench", "hierarchy", "--shards", "500", "--hosts", "10", "--regions", "2", "--full-scan", "-o", "json")
	var v benchHierarchyJSON
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil {
		t.Fatalf("--full-scan: exit %d\n%s%s", code, out, errOut)
	}
	if v.Settings != "full-scan" || v.Candidates != 10 || v.FlatCandidates != 10 || v.GlobalCandidates != 1 || v.RegionTarget != 1.03 || v.GlobalTarget != 1.002 {
		t.Errorf("--full-scan: %+v", v)
	}
	if code, out, _ = runCLI("bench", "hierarchy", "--shards", "500", "--hosts", "10", "--regions", "2", "--full-scan", "--no-flat"); code != 0 || !strings.Contains(out, "FULL SCAN") {
		t.Errorf("--full-scan table: exit %d\n%s", code, out)
	}
	if code, out, _ = runCLI("bench", "hierarchy", "--shards", "500", "--hosts", "10", "--regions", "2", "--candidates", "2", "--no-flat"); code != 0 || !strings.Contains(out, "settings: custom") {
		t.Errorf("--candidates 2: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI("bench", "hierarchy", "--shards", "500", "--hosts", "10", "--regions", "2", "--no-flat")
	if code != 0 || strings.Contains(out, "speedup") || strings.Contains(out, "\nflat") {
		t.Fatalf("--no-flat: exit %d\n%s", code, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--shards", "0"}, "--shards: must be ≥ 1"},
		{[]string{"--hosts", "-1"}, "--hosts: must be ≥ 1"},
		{[]string{"--regions", "0"}, "--regions: must be ≥ 1"},
		{[]string{"--hosts", "5", "--regions", "6"}, "--regions: must be ≤ --hosts (5)"},
		{[]string{"--policy", "annealing"}, `--policy: unknown policy "annealing"`},
		{[]string{"--policy", "plugin"}, `--policy: policy "plugin" needs keys this benchmark does not set (usable here: exact, greedy, incremental, local, spread)`},
		{[]string{"--region-target", "0.9"}, "--region-target: must be 0 (none) or a number ≥ 1"},
		{[]string{"--global-target", "NaN"}, "--global-target: must be 0 (none) or a number ≥ 1"},
		{[]string{"--change", "1.5"}, "--change: must be in [0, 1]"},
		{[]string{"--candidates", "-2"}, `--candidates: must be all or a whole number ≥ 0 (got "-2")`},
		{[]string{"--candidates", "most"}, `--candidates: must be all or a whole number ≥ 0 (got "most")`},
		{[]string{"--global-candidates", "1.5"}, `--global-candidates: must be all or a whole number ≥ 0 (got "1.5")`},
		{[]string{"--workers", "-2"}, "--workers: must be ≥ 0"},
		{[]string{"--flat-budget", "-1s"}, "--flat-budget: must be ≥ 0"},
		{[]string{"--flat-candidates", "x"}, `--flat-candidates: must be all or a whole number ≥ 0 (got "x")`},
		{[]string{"-o", "yaml"}, "--output: must be one of table, json"},
	} {
		code, _, errOut := runCLI(append([]string{"bench", "hierarchy"}, tc.args...)...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want it to contain %q", tc.args, code, errOut, tc.want)
		}
	}
}

// TestFlatBudgetStartsWithTheFlatRun: the --flat-budget timer does not run
// during the hierarchy's rounds however long they take, and ends the flat run
// its duration after the flat place round starts.
func TestFlatBudgetStartsWithTheFlatRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := &flatBudgetTimer{d: 20 * time.Millisecond, cancel: cancel}
	b.phase(hierbench.PhaseHierPlace)
	b.phase(hierbench.PhaseHierRebalance)
	time.Sleep(60 * time.Millisecond) // the hierarchy outlasts the budget
	if ctx.Err() != nil {
		t.Fatal("the budget ended during the hierarchy's rounds")
	}
	b.phase(hierbench.PhaseFlatPlace)
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the budget did not end the flat run")
	}
	b.stop()
}

// TestPhaseTicker: past its delay the ticker redraws the running round on one
// line and ends the line when closed; before it, it draws nothing.
func TestPhaseTicker(t *testing.T) {
	var buf testutil.Buffer
	p := startPhaseTicker(&buf, 5*time.Millisecond, 0)
	p.set(hierbench.PhaseFlatPlace)
	testutil.Until(t, "the first draw", 10*time.Second, func() bool { return buf.String() != "" })
	p.close()
	out := buf.String()
	if !strings.HasPrefix(out, "\rflat place round") || !strings.HasSuffix(out, "\n") || strings.Count(out, "\n") != 1 {
		t.Errorf("ticker wrote %q: want redraws of the flat place round on one line, then a newline", out)
	}
	var quiet testutil.Buffer
	p = startPhaseTicker(&quiet, 5*time.Millisecond, time.Hour)
	p.set(hierbench.PhaseHierPlace)
	time.Sleep(20 * time.Millisecond)
	p.close()
	if s := quiet.String(); s != "" {
		t.Errorf("ticker wrote %q before its delay", s)
	}
}
