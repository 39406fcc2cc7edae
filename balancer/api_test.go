package balancer

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/strata-sched/strata/interfaces"
)

func child(id string, cpu float64, labels map[string]string) interfaces.Child {
	return interfaces.Child{ID: interfaces.ChildID(id), Tier: "host", Capacity: interfaces.Load{CPU: cpu}, Labels: labels}
}

func shard(id string, cpu float64) interfaces.Shard {
	return interfaces.Shard{ID: interfaces.ShardID(id), Job: "job", Load: interfaces.Load{CPU: cpu}, StateBytes: 10}
}

func smallView() *interfaces.View {
	return &interfaces.View{
		Tier:     "region",
		Children: []interfaces.Child{child("h0", 10, map[string]string{"zone": "a"}), child("h1", 10, map[string]string{"zone": "b"}), child("h2", 10, map[string]string{"zone": "b"})},
		Shards:   []interfaces.Shard{shard("s0", 4), shard("s1", 3), shard("s2", 2), shard("s3", 1)},
		Assignments: []interfaces.Assignment{
			{Shard: "s0", Child: "h0", Epoch: 3}, {Shard: "s1", Child: "h0", Epoch: 1},
			{Shard: "s2", Child: "h0", Epoch: 1}, {Shard: "s3", Child: "h1", Epoch: 1},
		},
	}
}

func TestBadInputIsAClearError(t *testing.T) {
	cases := []struct {
		name   string
		edit   func(v *interfaces.View)
		target error
		want   string
	}{
		{"negative load", func(v *interfaces.View) { v.Shards[0].Load.CPU = -1 }, interfaces.ErrInvalid, "shard.load.cpu: must be ≥ 0"},
		{"zero capacity", func(v *interfaces.View) { v.Children[1].Capacity = interfaces.Load{} }, interfaces.ErrInvalid, "child.capacity: must be > 0"},
		{"assignment to missing child", func(v *interfaces.View) { v.Assignments[0].Child = "gone" }, interfaces.ErrNotFound, "assignments[0].child"},
		{"assignment of missing shard", func(v *interfaces.View) { v.Assignments[0].Shard = "gone" }, interfaces.ErrNotFound, "assignments[0].shard"},
		{"duplicate child", func(v *interfaces.View) { v.Children[1].ID = "h0" }, interfaces.ErrInvalid, "children[1].id: must be unique"},
		// smallView lists its shards in ID order (found without an index); the
		// unsorted cases take the indexed path.
		{"duplicate shard, sorted until then", func(v *interfaces.View) { v.Shards[2].ID = "s1" }, interfaces.ErrInvalid, "shards[2].id: must be unique"},
		{"duplicate shard, unsorted", func(v *interfaces.View) {
			v.Shards[0].ID, v.Shards[1].ID, v.Shards[3].ID = "s9", "s0", "s0"
		}, interfaces.ErrInvalid, "shards[3].id: must be unique"},
		{"duplicate shard after an invalid one", func(v *interfaces.View) {
			v.Shards[2].Load.CPU = -1
			v.Shards[3].ID = "s0"
		}, interfaces.ErrInvalid, "shards[2]"},
		{"invalid shard after a duplicate one", func(v *interfaces.View) {
			v.Shards[2].ID = "s1"
			v.Shards[3].Load.CPU = -1
		}, interfaces.ErrInvalid, "shards[2].id: must be unique"},
		{"invalid ID after a duplicate one, unsorted", func(v *interfaces.View) {
			v.Shards[0].ID, v.Shards[1].ID, v.Shards[2].ID, v.Shards[3].ID = "s9", "s0", "s0", "a b"
		}, interfaces.ErrInvalid, "shards[2].id: must be unique"},
		{"invalid ID before a duplicate one", func(v *interfaces.View) {
			v.Shards[1].ID, v.Shards[2].ID = "-s1", "s0"
		}, interfaces.ErrInvalid, `shards[1] ("-s1"): shard.id`},
		{"assignment of missing shard, unsorted", func(v *interfaces.View) {
			v.Shards[0], v.Shards[3] = v.Shards[3], v.Shards[0]
			v.Assignments[2].Shard = "s25"
		}, interfaces.ErrNotFound, "assignments[2].shard"},
		{"assignment repeated out of order", func(v *interfaces.View) { v.Assignments[3].Shard = "s0" }, interfaces.ErrInvalid, "assignments[3]: must hold at most one entry per shard"},
		{"in-flight to missing child", func(v *interfaces.View) {
			v.InFlight = []interfaces.Move{{Shard: "s0", From: "h0", To: "zz"}}
		}, interfaces.ErrNotFound, "in_flight[0].to"},
		{"pin constraint without child", func(v *interfaces.View) {
			v.Constraints = []interfaces.Constraint{{Kind: interfaces.ConstraintPin, Shards: []interfaces.ShardID{"s0"}}}
		}, interfaces.ErrInvalid, "must name exactly one child"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := smallView()
			tc.edit(v)
			_, err := FromView(v, ViewOptions{})
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, tc.target) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q (is %v: %v), want it to contain %q", err, tc.target, errors.Is(err, tc.target), tc.want)
			}
		})
	}
}

// TestFromViewFindsShardsInAnyOrder: a view lists its shards sorted by ID or
// not, and its references in any order; the problem is the same either way.
func TestFromViewFindsShardsInAnyOrder(t *testing.T) {
	sorted := smallView()
	sorted.InFlight = []interfaces.Move{{Shard: "s3", From: "h1", To: "h2"}}
	sorted.Assignments = []interfaces.Assignment{sorted.Assignments[3], sorted.Assignments[0], sorted.Assignments[2]}
	sorted.Constraints = []interfaces.Constraint{{Kind: interfaces.ConstraintPin, Shards: []interfaces.ShardID{"s2", "s0"}, Children: []interfaces.ChildID{"h1"}}}
	unsorted := smallView()
	unsorted.InFlight, unsorted.Assignments, unsorted.Constraints = sorted.InFlight, sorted.Assignments, sorted.Constraints
	unsorted.Shards = []interfaces.Shard{unsorted.Shards[2], unsorted.Shards[0], unsorted.Shards[3], unsorted.Shards[1]}
	a, err := FromView(sorted, ViewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := FromView(unsorted, ViewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	at := func(p *Problem, id interfaces.ShardID) int {
		for s, x := range p.ShardIDs {
			if x == id {
				return s
			}
		}
		t.Fatalf("shard %s missing", id)
		return -1
	}
	for _, id := range []interfaces.ShardID{"s0", "s1", "s2", "s3"} {
		sa, sb := at(a, id), at(b, id)
		if a.Current[sa] != b.Current[sb] || a.Epoch[sa] != b.Epoch[sb] || a.Pinned[sa] != b.Pinned[sb] || a.IsLocked(sa) != b.IsLocked(sb) {
			t.Errorf("%s: sorted view gives current %d epoch %d pin %d locked %v, unsorted %d %d %d %v", id,
				a.Current[sa], a.Epoch[sa], a.Pinned[sa], a.IsLocked(sa), b.Current[sb], b.Epoch[sb], b.Pinned[sb], b.IsLocked(sb))
		}
	}
	// s0 on h0 (epoch 3), s1 unassigned, s2 on h0, s3 in flight to h2; s0 and s2 pinned to h1.
	s := at(a, "s0")
	if a.Current[s] != 0 || a.Epoch[s] != 3 || a.Pinned[s] != 1 || a.Current[at(a, "s1")] != -1 || a.Current[at(a, "s3")] != 2 || !a.IsLocked(at(a, "s3")) {
		t.Errorf("sorted view read wrong: current %v epoch %v pinned %v", a.Current, a.Epoch, a.Pinned)
	}
}

func TestProblemValidateNamesFieldAndRule(t *testing.T) {
	good := func() *Problem {
		p, err := FromView(smallView(), ViewOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name string
		edit func(p *Problem)
		want string
	}{
		{"negative load", func(p *Problem) { p.Load[1] = -2 }, `shard "s1": load.cpu: must be a finite number ≥ 0`},
		{"NaN load", func(p *Problem) { p.Load[1] = math.NaN() }, `shard "s1": load.cpu`},
		{"zero capacity", func(p *Problem) { p.Capacity[2] = 0 }, `child "h2": capacity: must be > 0 in at least one resource`},
		{"pinned to missing child", func(p *Problem) { p.Pinned[0] = 7 }, `shard "s0": pinned: refers to a child that does not exist`},
		{"headroom", func(p *Problem) { p.Headroom = 1 }, "headroom: must be in [0, 1)"},
		{"load shape", func(p *Problem) { p.Load = p.Load[:2] }, "load: must have shards×resources"},
		{"unsorted allowed", func(p *Problem) { p.Allowed = make([][]int32, 4); p.Allowed[0] = []int32{2, 1} }, "must be sorted"},
		{"group limit", func(p *Problem) { p.Groups = make([][]int32, 4); p.Groups[0] = []int32{0}; p.GroupLimit = []int32{0} }, "group 0: limit: must be ≥ 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := good()
			tc.edit(p)
			for _, name := range SolverNames() {
				_, err := Solve(name, p, Options{})
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("%s: error %v, want it to contain %q", name, err, tc.want)
				}
				if !errors.Is(err, interfaces.ErrInvalid) && !errors.Is(err, interfaces.ErrNotFound) {
					t.Fatalf("%s: error %v wraps neither ErrInvalid nor ErrNotFound", name, err)
				}
			}
		})
	}
}

func TestUnknownSolverAndBadOptions(t *testing.T) {
	_, err := SolverByName("simulated-annealing")
	if !errors.Is(err, interfaces.ErrNotFound) || !strings.Contains(err.Error(), "greedy") || !strings.Contains(err.Error(), "local") {
		t.Fatalf("unknown solver: %v (want ErrNotFound listing the known names)", err)
	}
	p, err := FromView(smallView(), ViewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Goals: []Goal{{Kind: "happiness"}}}, "goals[0].kind: must be one of"},
		{Options{Goals: []Goal{{Kind: GoalThreshold, Weight: -1}}}, "goals[0].weight"},
		{Options{Goals: []Goal{{Kind: GoalBalanceSq, Resources: []interfaces.Resource{"gpu"}}}}, "goals[0].resources"},
		{Options{TimeBudget: 1}, "now: is required with a time budget"},
		{Options{Latency: LatencyModel{Quantile: 1}}, "latency.quantile"},
		{Options{Latency: LatencyModel{ServiceTime: []float64{1, 2}}}, "latency.service_time"},
	} {
		for _, name := range SolverNames() {
			if _, err := Solve(name, p, tc.o); err == nil || !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%s with %+v: %v, want ErrInvalid containing %q", name, tc.o, err, tc.want)
			}
		}
	}
	if _, err := Evaluate(p, Options{}, []int32{0}); err == nil || !strings.Contains(err.Error(), "assignment") {
		t.Fatalf("short assignment: %v", err)
	}
	if v := CheckHard(p, []int32{0, 9, 0, 0}); len(v) != 1 || v[0].Constraint != "assignment" {
		t.Fatalf("CheckHard on a malformed assignment: %v", v)
	}
}

func TestFromViewConstraints(t *testing.T) {
	v := smallView()
	v.Shards[0].Constraints.Labels = map[string]string{"zone": "b"}
	v.Shards[1].Constraints.AntiAffinity = "g"
	v.Shards[2].Constraints.AntiAffinity = "g"
	v.Children[2].State = interfaces.ChildDraining
	v.InFlight = []interfaces.Move{{Shard: "s3", From: "h1", To: "h2"}}
	v.Constraints = []interfaces.Constraint{
		{Kind: interfaces.ConstraintCapacity, Children: []interfaces.ChildID{"h1"}, Limit: interfaces.Load{CPU: 8}},
		{Kind: interfaces.ConstraintMaxMoves, Max: 3, MaxBytes: 100},
		{Kind: interfaces.ConstraintMaxMoves, Max: 5},
		{Kind: interfaces.ConstraintAvoid, Shards: []interfaces.ShardID{"s2"}, Children: []interfaces.ChildID{"h1"}},
	}
	p, err := FromView(v, ViewOptions{Headroom: 0.1, LocalityLabel: "zone", ShardDomains: map[interfaces.ShardID]string{"s1": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Resources; len(got) != 1 || got[0] != interfaces.CPU {
		t.Fatalf("resources %v, want [cpu]", got)
	}
	if p.Current[3] != 2 || !p.IsLocked(3) {
		t.Fatalf("in-flight move not applied: current %v locked %v", p.Current, p.Locked)
	}
	if p.AllowedOn(0, 0) || !p.AllowedOn(0, 1) || !p.AllowedOn(0, 2) {
		t.Fatalf("labels: allowed %v", p.Allowed[0])
	}
	if p.Capacity[1] != 8 || p.MaxMoves != 3 || p.MaxBytes != 100 || p.Headroom != 0.1 {
		t.Fatalf("capacity %v, budget %d/%d, headroom %g", p.Capacity, p.MaxMoves, p.MaxBytes, p.Headroom)
	}
	if len(p.GroupLimit) != 1 || p.GroupLimit[0] != 1 || len(p.Groups[1]) != 1 || len(p.Groups[2]) != 1 {
		t.Fatalf("groups %v limits %v", p.Groups, p.GroupLimit)
	}
	if !p.Drained(2) || p.ShardDomain[1] != p.ChildDomain[0] || p.ShardDomain[0] != -1 {
		t.Fatalf("drain/locality: %v %v %v", p.ChildState, p.ShardDomain, p.ChildDomain)
	}
	if len(p.Avoid[2]) != 1 || p.Avoid[2][0] != 1 {
		t.Fatalf("avoid %v", p.Avoid)
	}
	// The start breaks anti-affinity (s1, s2 on h0); local repairs it within the
	// budget, keeps s3 (in flight to a draining child) where it is, and explains
	// every move.
	res, err := Solve(SolverLocal, p, Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Assignment[1] == res.Assignment[2] {
		t.Fatalf("anti-affinity not repaired: %v", res.Assignment)
	}
	if res.Assignment[3] != 2 {
		t.Fatalf("in-flight shard moved: %v", res.Assignment)
	}
	if res.Assignment[0] == 0 {
		t.Fatalf("s0 left on a child without its label: %v", res.Assignment)
	}
	var sawAnti, sawAllowed bool
	for _, m := range res.Moves {
		if m.Epoch == 0 {
			t.Fatalf("move without the planned-against epoch: %+v", m)
		}
		sawAnti = sawAnti || m.Goal == ConstraintAntiAffinity
		sawAllowed = sawAllowed || (m.Shard == "s0" && m.Goal == ConstraintAllowed)
	}
	if !sawAnti || !sawAllowed {
		t.Fatalf("moves lack their forcing constraint: %+v", res.Moves)
	}
	plan := res.Plan("region")
	if plan.Tier != "region" || len(plan.Moves) != len(res.Moves) {
		t.Fatalf("plan %+v", plan)
	}
	as := p.Assignment(res.Assignment)
	for _, a := range as {
		if a.Shard == "s0" && a.Epoch != 4 {
			t.Fatalf("moved shard's epoch %d, want 3+1", a.Epoch)
		}
	}
}

// An infeasible shard says which constraint excluded each child.
func TestInfeasibleExplainsEveryChild(t *testing.T) {
	v := &interfaces.View{
		Children: []interfaces.Child{
			child("full", 10, nil), child("drained", 10, nil), child("elsewhere", 10, map[string]string{"zone": "x"}), child("grouped", 10, nil),
		},
		Shards: []interfaces.Shard{shard("big", 9), shard("mate", 1), shard("new", 5)},
		Assignments: []interfaces.Assignment{
			{Shard: "big", Child: "full"}, {Shard: "mate", Child: "grouped"},
		},
	}
	v.Children[1].State = interfaces.ChildDraining
	v.Shards[2].Constraints.Labels = map[string]string{"zone": "y"}
	v.Shards[2].Constraints.Allowed = []interfaces.ChildID{"full", "drained", "grouped"}
	v.Shards[2].Constraints.AntiAffinity = "g"
	v.Shards[1].Constraints.AntiAffinity = "g"
	// Pins make it truly infeasible: no solver may make room by moving them.
	v.Shards[0].Constraints.Pinned = "full"
	v.Shards[1].Constraints.Pinned = "grouped"
	_, err := FromView(v, ViewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Labels exclude everything; use the allowed list alone for the test.
	v.Shards[2].Constraints.Labels = nil
	p, err := FromView(v, ViewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{SolverGreedy, SolverLocal} {
		res, err := Solve(name, p, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != interfaces.StatusInfeasible || len(res.Infeasible) != 1 || res.Infeasible[0].Shard != "new" {
			t.Fatalf("%s: status %v infeasible %+v", name, res.Status, res.Infeasible)
		}
		ex := res.Infeasible[0].Excluded
		want := map[interfaces.ChildID]string{"full": ConstraintCapacity, "drained": ConstraintDrain, "elsewhere": ConstraintAllowed, "grouped": ConstraintAntiAffinity}
		for c, k := range want {
			if !strings.HasPrefix(ex[c], k) {
				t.Fatalf("%s: child %q excluded by %q, want %s", name, c, ex[c], k)
			}
		}
		if res.Assignment[2] != -1 {
			t.Fatalf("%s placed an infeasible shard: %v", name, res.Assignment)
		}
	}
}

func TestLowerBoundFormula(t *testing.T) {
	p := &Problem{
		Resources: []interfaces.Resource{interfaces.CPU, interfaces.Mem},
		ChildIDs:  []interfaces.ChildID{"a", "b", "c"},
		Capacity:  []float64{10, 100, 20, 100, 30, 100},
		ShardIDs:  []interfaces.ShardID{"x", "y", "z"},
		Load:      []float64{3, 90, 3, 10, 6, 10},
		Current:   []int32{0, 0, 0},
		Pinned:    []int32{-1, 0, -1},
	}
	lb := LowerBound(p)
	// cpu: Σ12/Σ60 = 0.2; largest 6/30 = 0.2; pinned y on a: 3/10 = 0.3.
	if math.Abs(lb["cpu"]-0.3) > 1e-12 {
		t.Fatalf("cpu LB %g, want 0.3", lb["cpu"])
	}
	// mem: Σ110/Σ300 = 0.367; largest 90/100 = 0.9.
	if math.Abs(lb["mem"]-0.9) > 1e-12 {
		t.Fatalf("mem LB %g, want 0.9", lb["mem"])
	}
	p.ChildState = []interfaces.ChildState{0, 0, interfaces.ChildFailed}
	// Without c: cpu Σ12/30 = 0.4.
	if lb := LowerBound(p); math.Abs(lb["cpu"]-0.4) > 1e-12 {
		t.Fatalf("cpu LB with a failed child %g, want 0.4", lb["cpu"])
	}
}

// Every goal formula on a hand-computed instance.
func TestGoalFormulas(t *testing.T) {
	p := &Problem{
		Resources:   []interfaces.Resource{interfaces.CPU},
		ChildIDs:    []interfaces.ChildID{"a", "b"},
		Capacity:    []float64{10, 20},
		ShardIDs:    []interfaces.ShardID{"x", "y", "z"},
		Load:        []float64{6, 3, 3},
		StateBytes:  []int64{10, 20, 30},
		Current:     []int32{0, 0, 1},
		ShardDomain: []int32{0, 1, -1},
		ChildDomain: []int32{0, 1},
	}
	all := []Goal{
		{Kind: GoalThreshold, Priority: 0, Threshold: 0.5},
		{Kind: GoalBalanceMinMax, Priority: 1},
		{Kind: GoalBalanceSq, Priority: 1, Weight: 2},
		{Kind: GoalLatency, Priority: 2},
		{Kind: GoalShortfall, Priority: 3},
		{Kind: GoalLocality, Priority: 4},
		{Kind: GoalMigration, Priority: 5},
	}
	o := Options{Goals: all, Latency: LatencyModel{ServiceTime: []float64{0.01}, Quantile: 0.9, MaxUtil: 0.8}}
	assign := []int32{0, 0, 0} // a: 12/10 = 1.2, b: 0
	obj, err := Evaluate(p, o, assign)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		GoalThreshold:     1.2 - 0.5,
		GoalBalanceMinMax: 1.2,
		// Σ L²/C / (ΣL²/ΣC) - 1 = (144/10) / (144/30) - 1 = 2
		GoalBalanceSq: 2,
		// ρ=1.2 beyond 0.8: k/(0.2) + k/0.04·0.4 with k = 0.01·ln 10; weight 12/12.
		GoalLatency:   0.01*math.Log(10)/0.2 + 0.01*math.Log(10)/0.04*0.4,
		GoalShortfall: 2.0 / 12,
		// y (domain 1) on a (domain 0): 1 of 3 shards.
		GoalLocality: 1.0 / 3,
		// z moved: (1 + 30/20)/2 / 3.
		GoalMigration: (1 + 30.0/20) / 2 / 3,
	}
	for _, gv := range obj.Goals {
		if w := want[gv.Goal.Kind]; math.Abs(gv.Value-w) > 1e-12 {
			t.Errorf("%s = %.15g, want %.15g", gv.Goal.Kind, gv.Value, w)
		}
	}
	if len(obj.Levels) != 6 || math.Abs(obj.Levels[1]-(1.2+2*2)) > 1e-12 {
		t.Fatalf("levels %v", obj.Levels)
	}
	better, _ := Evaluate(p, o, []int32{0, 1, 1})
	if Compare(better, obj, 1e-12) != -1 || Compare(obj, better, 1e-12) != 1 || Compare(obj, obj, 0) != 0 {
		t.Fatalf("Compare is not lexicographic: %v vs %v", better.Levels, obj.Levels)
	}
}
