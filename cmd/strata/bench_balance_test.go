package main

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"
)

func TestBenchBalanceJSON(t *testing.T) {
	for _, solver := range []string{"greedy", "local"} {
		code, out, errOut := runCLI("bench", "balance", "--shards", "300", "--hosts", "6", "--seed", "4", "--solver", solver, "-o", "json")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", solver, code, errOut)
		}
		var raw map[string]json.RawMessage
		if err := json.Unmarshal([]byte(out), &raw); err != nil {
			t.Fatalf("%s: %v\n%s", solver, err, out)
		}
		keys := make([]string, 0, len(raw))
		for k := range raw {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		want := []string{"hosts", "lb", "max_over_lb", "max_over_mean", "moves", "objective", "placed", "seconds", "shards", "solver", "status", "unplaced"}
		if !reflect.DeepEqual(keys, want) {
			t.Fatalf("%s: keys %v, want %v", solver, keys, want)
		}
		var v benchBalanceJSON
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatal(err)
		}
		if v.Solver != solver || v.Shards != 300 || v.Hosts != 6 || v.Moves <= 0 || v.Seconds < 0 {
			t.Fatalf("%s: %+v", solver, v)
		}
		for _, r := range []string{"cpu", "mem"} {
			if v.MaxOverLB[r] < 1 || v.MaxOverLB[r] > 2 || v.MaxOverMean[r] < 1 {
				t.Fatalf("%s: %s max/LB %g max/mean %g", solver, r, v.MaxOverLB[r], v.MaxOverMean[r])
			}
		}
	}
	// Same seed, same instance and plan: moves and quality repeat.
	_, a, _ := runCLI("bench", "balance", "--shards", "300", "--hosts", "6", "--seed", "9", "-o", "json")
	_, b, _ := runCLI("bench", "balance", "--shards", "300", "--hosts", "6", "--seed", "9", "-o", "json")
	var va, vb benchBalanceJSON
	if json.Unmarshal([]byte(a), &va) != nil || json.Unmarshal([]byte(b), &vb) != nil {
		t.Fatalf("bad JSON:\n%s\n%s", a, b)
	}
	if va.Moves != vb.Moves || !reflect.DeepEqual(va.MaxOverLB, vb.MaxOverLB) || va.Objective != vb.Objective {
		t.Fatalf("same seed, different results: %+v vs %+v", va, vb)
	}
}

func TestBenchBalanceTableAndErrors(t *testing.T) {
	code, out, errOut := runCLI("bench", "balance", "--shards", "50", "--hosts", "3", "--skew", "uniform")
	if code != 0 || !strings.Contains(out, "max_over_lb") || !strings.Contains(out, "cpu") || !strings.Contains(out, "mem") {
		t.Fatalf("table: exit %d\n%s%s", code, out, errOut)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--solver", "annealing"}, `--solver: unknown solver "annealing" (known: exact, ffd, greedy, local)`},
		{[]string{"--shards", "0"}, "--shards: must be ≥ 1"},
		{[]string{"--hosts", "-3"}, "--hosts: must be ≥ 1"},
		{[]string{"--skew", "pareto"}, "--skew: must be one of zipf, uniform"},
		{[]string{"-o", "yaml"}, "--output: must be one of table, json"},
		{[]string{"--clock", "sundial"}, "--clock: must be one of wall, cpu"},
		{[]string{"--time-budget", "-1s"}, "--time-budget: must be ≥ 0"},
		{[]string{"--shards", "many"}, `invalid argument "many" for "--shards"`},
		{[]string{"--instance", "no-such.json"}, "no such file"},
		{[]string{"--instance", "x.yaml", "--fleet"}, "--instance and --fleet: give one of them"},
		{[]string{"--candidates", "-1"}, "--candidates: must be ≥ 0"},
	} {
		code, _, errOut := runCLI(append([]string{"bench", "balance"}, tc.args...)...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want it to contain %q", tc.args, code, errOut, tc.want)
		}
	}
}

// bench balance solves the example instance files, JSON and CSV alike, and
// says how many shards it placed and how many first-fit decreasing places.
func TestBenchBalanceInstance(t *testing.T) {
	for _, path := range []string{"../../balancer/instance/testdata/fleet.json", "../../balancer/instance/testdata/fleet-csv"} {
		code, out, errOut := runCLI("bench", "balance", "--instance", path, "-o", "json")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", path, code, errOut)
		}
		var v benchBalanceJSON
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatal(err)
		}
		if v.Shards != 8 || v.Hosts != 4 || v.Placed != 8 || v.Status != "ok" || v.FFDPlaced == nil || *v.FFDPlaced > v.Placed {
			t.Fatalf("%s: %+v", path, v)
		}
		if _, ok := v.MaxOverLB["gpu"]; !ok {
			t.Fatalf("%s: no gpu figures: %+v", path, v.MaxOverLB)
		}
	}
	code, out, errOut := runCLI("bench", "balance", "--fleet", "--hosts", "60", "--shards", "300")
	if code != 0 || !strings.Contains(out, "first-fit decreasing places") {
		t.Fatalf("--fleet: exit %d\n%s%s", code, out, errOut)
	}
}
