package balancer

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/strata-sched/strata/interfaces"
	"pgregory.net/rapid"
)

// propSolvers are the solvers the property tests run: every registered solver
// (exact included once it registers itself), each on instances small enough for
// it.
func propSolvers() []string { return SolverNames() }

// maxSizeFor bounds generated instances per solver so exact stays fast.
func maxSizeFor(solver string) genSpec {
	if solver == "exact" {
		return genSpec{maxShards: 8, maxChildren: 3, constraints: true}
	}
	return genSpec{maxShards: 14, maxChildren: 5, constraints: true}
}

// checkResult asserts the solver-independent contract of a result.
func checkResult(t rapid.TB, p *Problem, o Options, res Result) {
	N := p.NumShards()
	if len(res.Assignment) != N {
		t.Fatalf("assignment has %d entries, want %d", len(res.Assignment), N)
	}
	infeasible := map[interfaces.ShardID]bool{}
	for _, inf := range res.Infeasible {
		infeasible[inf.Shard] = true
		if len(inf.Excluded) != p.NumChildren() {
			t.Fatalf("infeasible shard %q explains %d children, want all %d: %v", inf.Shard, len(inf.Excluded), p.NumChildren(), inf.Excluded)
		}
		for c, why := range inf.Excluded {
			if why == "" {
				t.Fatalf("infeasible shard %q: empty reason for child %q", inf.Shard, c)
			}
		}
	}
	// No hard constraint broken, except those the start already broke and the
	// solver reported as infeasible.
	startViol := map[string]bool{}
	for _, v := range CheckHard(p, p.Current) {
		startViol[fmt.Sprintf("%s/%d/%s", v.Constraint, v.Child, v.Resource)] = true
	}
	for _, v := range CheckHard(p, res.Assignment) {
		switch {
		case v.Constraint == ConstraintMaxMoves || v.Constraint == ConstraintMaxBytes:
			t.Fatalf("%s broke the move budget: %s", res.Solver, v)
		case v.Shard >= 0:
			if !infeasible[p.ShardIDs[v.Shard]] && !p.IsLocked(v.Shard) {
				t.Fatalf("%s: violation of an unreported shard: %s", res.Solver, v)
			}
		default:
			if !startViol[fmt.Sprintf("%s/%d/%s", v.Constraint, v.Child, v.Resource)] {
				t.Fatalf("%s: new violation: %s", res.Solver, v)
			}
		}
	}
	// In-flight shards stay where their move takes them.
	for s := 0; s < N; s++ {
		if p.IsLocked(s) && res.Assignment[s] != p.Current[s] {
			t.Fatalf("%s moved in-flight shard %q", res.Solver, p.ShardIDs[s])
		}
	}
	// Drained children end empty (but for shards that fit nowhere and are
	// reported, or are in flight there).
	for s, c := range res.Assignment {
		if c >= 0 && p.Drained(int(c)) && !infeasible[p.ShardIDs[s]] && !p.IsLocked(s) {
			t.Fatalf("%s left shard %q on %s child %q", res.Solver, p.ShardIDs[s], p.ChildState[c], p.ChildIDs[c])
		}
	}
	// One move per changed shard, each explained, consistent with the summary.
	moved := 0
	var bytes int64
	for s, c := range res.Assignment {
		if c != p.Current[s] && c >= 0 {
			moved++
			bytes += p.Bytes(s)
		}
	}
	if len(res.Moves) != moved || res.Summary.Moves != moved || res.Summary.BytesMoved != bytes {
		t.Fatalf("%s: %d moves in plan, summary %d/%d bytes, assignment changes %d/%d bytes", res.Solver, len(res.Moves), res.Summary.Moves, res.Summary.BytesMoved, moved, bytes)
	}
	for _, m := range res.Moves {
		if m.Goal == "" || m.Reason == "" || math.IsNaN(m.Delta) {
			t.Fatalf("%s: move without an explanation: %+v", res.Solver, m)
		}
	}
	// Objective as reported equals the reference evaluation.
	want, err := Evaluate(p, o, res.Assignment)
	if err != nil {
		t.Fatal(err)
	}
	if Compare(want, res.Objective, 1e-9) != 0 {
		t.Fatalf("%s: reported objective %v, reference %v", res.Solver, res.Objective.Levels, want.Levels)
	}
	for _, r := range p.Resources {
		if _, ok := res.Summary.MaxOverLB[r]; !ok {
			t.Fatalf("summary lacks max_over_lb for %s", r)
		}
	}
}

func TestPropSolversRespectHardConstraints(t *testing.T) {
	for _, name := range propSolvers() {
		name := name
		t.Run(name, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				p := genProblem(t, maxSizeFor(name))
				o := Options{Goals: genGoals(t), Seed: uint64(rapid.IntRange(0, 3).Draw(t, "seed"))}
				res, err := Solve(name, p, o)
				if err != nil {
					t.Fatalf("solve: %v", err)
				}
				checkResult(t, p, o, res)
			})
		})
	}
}

// The lower bound is below the busiest child of every feasible placement any
// solver finds.
func TestPropLowerBoundBelowResults(t *testing.T) {
	for _, name := range propSolvers() {
		name := name
		t.Run(name, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				p := genProblem(t, maxSizeFor(name))
				res, err := Solve(name, p, Options{})
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Infeasible) > 0 || slices.Contains(res.Assignment, -1) {
					return // some shards unplaced or stuck: the bound need not hold for the rest
				}
				lb := LowerBound(p)
				load := childLoads(p, res.Assignment)
				R := p.NumResources()
				for r, name := range p.Resources {
					mx := 0.0
					for c := 0; c < p.NumChildren(); c++ {
						mx = math.Max(mx, util(load[c*R+r], p.Capacity[c*R+r]))
					}
					if mx < lb[name]*(1-1e-9) {
						t.Fatalf("max utilization %g of %s below LB %g", mx, name, lb[name])
					}
				}
			})
		})
	}
}

// Local search from a feasible start never returns a worse plan, and never
// worsens the most important level.
func TestPropLocalNeverWorseThanStart(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := genProblem(t, genSpec{maxShards: 14, maxChildren: 5, constraints: true})
		if len(CheckHard(p, p.Current)) > 0 {
			// Make the start feasible: drop the constraints it breaks.
			p.ChildState, p.Pinned, p.Allowed, p.Groups, p.GroupLimit = nil, nil, nil, nil, nil
			p.Headroom = 0
			for s := range p.Current {
				if p.Current[s] < 0 {
					p.Current[s] = 0
				}
			}
			for c := range p.Capacity {
				p.Capacity[c] = 1000
			}
		}
		if v := CheckHard(p, p.Current); len(v) > 0 {
			t.Fatalf("start still infeasible: %v", v)
		}
		o := Options{Goals: genGoals(t), Seed: 7}
		res, err := Solve(SolverLocal, p, o)
		if err != nil {
			t.Fatal(err)
		}
		if Compare(res.Objective, res.Start, 1e-9) > 0 {
			t.Fatalf("local made the plan worse: start %v, result %v", res.Start.Levels, res.Objective.Levels)
		}
		if res.Objective.Levels[0] > res.Start.Levels[0]+1e-9*math.Max(1, math.Abs(res.Start.Levels[0])) {
			t.Fatalf("local worsened the highest-priority level: %v → %v", res.Start.Levels, res.Objective.Levels)
		}
		if len(CheckHard(p, res.Assignment)) > 0 {
			t.Fatalf("feasible start, infeasible result: %v", CheckHard(p, res.Assignment))
		}
	})
}

// A lower-priority goal never makes a higher-priority one worse: solving with
// goals A (priority 0) and B (priority 1) gives a value of A no worse than
// solving from the same start with B's priority swapped out, and never worse
// than the start.
func TestPropHigherPriorityNeverWorsened(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := genProblem(t, genSpec{maxShards: 12, maxChildren: 4})
		for s := range p.Current {
			if p.Current[s] < 0 {
				p.Current[s] = 0
			}
		}
		for c := range p.Capacity {
			p.Capacity[c] *= 10
		}
		hi := rapid.SampledFrom(goalKinds).Draw(t, "high")
		lo := rapid.SampledFrom(goalKinds).Draw(t, "low")
		o := Options{Goals: []Goal{{Kind: hi, Priority: 0}, {Kind: lo, Priority: 1}}}
		res, err := Solve(SolverLocal, p, o)
		if err != nil {
			t.Fatal(err)
		}
		before, after := res.Start.Goals[0].Value, res.Objective.Goals[0].Value
		if after > before+1e-9*math.Max(1, math.Abs(before)) {
			t.Fatalf("high-priority %s went from %g to %g while optimizing %s", hi, before, after, lo)
		}
	})
}

// Same problem, options and seed → the same plan.
func TestPropDeterministic(t *testing.T) {
	for _, name := range propSolvers() {
		name := name
		t.Run(name, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				p := genProblem(t, maxSizeFor(name))
				o := Options{Goals: genGoals(t), Seed: uint64(rapid.IntRange(0, 100).Draw(t, "seed"))}
				a, err := Solve(name, p, o)
				if err != nil {
					t.Fatal(err)
				}
				b, err := Solve(name, p, o)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(a.Assignment, b.Assignment) || !reflect.DeepEqual(a.Moves, b.Moves) {
					t.Fatalf("two solves differ:\n%v\n%v", a.Moves, b.Moves)
				}
			})
		})
	}
}

// A new empty child receives load.
func TestPropNewEmptyChildReceivesLoad(t *testing.T) {
	for _, name := range []string{SolverGreedy, SolverLocal} {
		name := name
		t.Run(name, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				M := rapid.IntRange(1, 3).Draw(t, "old children")
				perChild := rapid.IntRange(2, 4).Draw(t, "shards per child")
				N := M * perChild
				p := &Problem{Resources: []interfaces.Resource{interfaces.CPU}, Current: make([]int32, N), ShardIDs: make([]interfaces.ShardID, N), Load: make([]float64, N)}
				for c := 0; c <= M; c++ {
					p.ChildIDs = append(p.ChildIDs, interfaces.ChildID(fmt.Sprintf("c%d", c)))
					p.Capacity = append(p.Capacity, 100)
				}
				for s := 0; s < N; s++ {
					p.ShardIDs[s] = interfaces.ShardID(fmt.Sprintf("s%d", s))
					p.Load[s] = float64(rapid.IntRange(1, 10).Draw(t, "load"))
					p.Current[s] = int32(s % M) // the new child M starts empty
				}
				res, err := Solve(name, p, Options{})
				if err != nil {
					t.Fatal(err)
				}
				got := 0
				for _, c := range res.Assignment {
					if int(c) == M {
						got++
					}
				}
				if got == 0 {
					t.Fatalf("the new child got no shard: %v", res.Assignment)
				}
			})
		})
	}
}

// A budget that has run out ends the local search early with a valid plan.
func TestLocalAnytimeBudgets(t *testing.T) {
	p, err := Generate(InstanceSpec{Shards: 2000, Hosts: 20, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	// A fake clock that advances 1 ms per reading: a 50 ms budget stops the
	// search after about 50 steps.
	var now time.Time
	fake := func() time.Time { now = now.Add(time.Millisecond); return now }
	res, err := Solve(SolverLocal, p, Options{TimeBudget: 50 * time.Millisecond, Now: fake, Kicks: -1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != interfaces.StatusPartial {
		t.Fatalf("status %v, want partial", res.Status)
	}
	if res.Iterations == 0 || res.Iterations > 60 {
		t.Fatalf("iterations %d, want 1..60 under a 50-reading budget", res.Iterations)
	}
	if Compare(res.Objective, res.Start, 0) >= 0 {
		t.Fatalf("partial plan not better than start: %v vs %v", res.Objective.Levels, res.Start.Levels)
	}
	full, err := Solve(SolverLocal, p, Options{MaxIterations: 10, Kicks: -1})
	if err != nil {
		t.Fatal(err)
	}
	if full.Iterations != 10 || full.Status != interfaces.StatusPartial {
		t.Fatalf("max iterations: %d iterations, status %v", full.Iterations, full.Status)
	}
	stop := 0
	dl, err := Solve(SolverLocal, p, Options{Deadline: func() bool { stop++; return stop > 5 }, Kicks: -1})
	if err != nil {
		t.Fatal(err)
	}
	if dl.Status != interfaces.StatusPartial || dl.Iterations > 5 {
		t.Fatalf("deadline: %d iterations, status %v", dl.Iterations, dl.Status)
	}
	if v := CheckHard(p, dl.Assignment); len(v) > 0 {
		t.Fatalf("partial plan breaks constraints: %v", v)
	}
}

// unplacedInstance is the generated instance of spec with every shard
// unplaced.
func unplacedInstance(t *testing.T, spec InstanceSpec) *Problem {
	t.Helper()
	p, err := Generate(spec)
	if err != nil {
		t.Fatal(err)
	}
	for s := range p.Current {
		p.Current[s] = -1
	}
	return p
}

// solveWithPolls solves p with the local solver under a deadline that has
// passed from its (n+1)th poll on.
func solveWithPolls(t *testing.T, p *Problem, n int) Result {
	t.Helper()
	polls := 0
	res, err := Solve(SolverLocal, p, Options{Deadline: func() bool { polls++; return polls > n }})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestDeadlineBoundsPlacement: a deadline that ends the repair of a placement
// from nothing ends the solve — the last-chance pass does not go on to place
// (and explain) every shard the repair had not reached. The plan is partial,
// with the shards it did not reach unplaced and not reported infeasible.
func TestDeadlineBoundsPlacement(t *testing.T) {
	p := unplacedInstance(t, InstanceSpec{Shards: 2000, Hosts: 50, Seed: 3})
	res := solveWithPolls(t, p, 20)
	placed := 0
	for _, c := range res.Assignment {
		if c >= 0 {
			placed++
		}
	}
	if res.Status != interfaces.StatusPartial || len(res.Infeasible) != 0 {
		t.Errorf("status %v with %d explained infeasible, want partial with none", res.Status, len(res.Infeasible))
	}
	if placed == 0 || placed > 20 {
		t.Errorf("%d of %d shards placed after 20 deadline polls, want 1..20", placed, p.NumShards())
	}
	for _, v := range CheckHard(p, res.Assignment) {
		if v.Constraint != ConstraintUnplaced {
			t.Errorf("partial plan breaks a constraint: %+v", v)
		}
	}
}

// TestDeadlineAfterRepairStillExplains: when the deadline ends the solve after
// the repair tried every forced shard, a shard the repair found to fit nowhere
// is still explained (status infeasible), while the shards it placed stay put.
func TestDeadlineAfterRepairStillExplains(t *testing.T) {
	p := unplacedInstance(t, InstanceSpec{Shards: 20, Hosts: 4, Seed: 5})
	huge := 7
	for r := 0; r < p.NumResources(); r++ {
		p.Load[huge*p.NumResources()+r] = 1e9 // larger than any host
	}
	// The repair polls once per forced shard (20); the next poll, in the
	// local search, ends the solve.
	res := solveWithPolls(t, p, 20)
	if res.Status != interfaces.StatusInfeasible || len(res.Infeasible) != 1 || res.Infeasible[0].Shard != p.ShardIDs[huge] {
		t.Fatalf("status %v, infeasible %+v: want shard %s explained", res.Status, res.Infeasible, p.ShardIDs[huge])
	}
	for s, c := range res.Assignment {
		if (c < 0) != (s == huge) {
			t.Errorf("shard %d on child %d", s, c)
		}
	}
}

// TestDeadlineExplainsWhatTheRepairSkips: a shard that breaks a constraint
// but is not the repair's to move (pinned to a child it overloads) is still
// explained when the deadline ends the solve after the repair.
func TestDeadlineExplainsWhatTheRepairSkips(t *testing.T) {
	p := &Problem{
		Resources: []interfaces.Resource{"cpu"},
		ChildIDs:  []interfaces.ChildID{"c0", "c1"},
		Capacity:  []float64{10, 10},
		ShardIDs:  []interfaces.ShardID{"s0", "s1"},
		Load:      []float64{15, 1},
		Current:   []int32{0, -1},
		Pinned:    []int32{0, -1},
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	// One poll per shard the repair tries (s1); the next one, in the local
	// search, ends the solve.
	res := solveWithPolls(t, p, 1)
	if res.Status != interfaces.StatusInfeasible || len(res.Infeasible) != 1 || res.Infeasible[0].Shard != "s0" {
		t.Fatalf("status %v, infeasible %+v: want s0 explained", res.Status, res.Infeasible)
	}
	if res.Assignment[1] < 0 {
		t.Error("s1 was not placed")
	}
}

// TestExplainForcedRetriesAfterRoomIsMade: the last-chance pass must retry a
// shard when a later shard's move made room for it. s0 may only run on c1,
// where s1 leaves no room; s1 is pinned to c0, where s2 leaves no room; s2 may
// move to c2. In index order s0 finds nowhere to go, then s1 gets to c0 by
// pushing s2 to c2 — which empties c1. One pass reported s0 infeasible
// although c1 had room by then.
func TestExplainForcedRetriesAfterRoomIsMade(t *testing.T) {
	p := &Problem{
		Resources: []interfaces.Resource{"cpu"},
		ChildIDs:  []interfaces.ChildID{"c0", "c1", "c2"},
		Capacity:  []float64{10, 10, 20},
		ShardIDs:  []interfaces.ShardID{"s0", "s1", "s2"},
		Load:      []float64{5, 8, 8},
		Current:   []int32{2, 1, 0},
		Pinned:    []int32{-1, 0, -1},
		Allowed:   [][]int32{{1}, nil, {0, 2}},
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	st := newState(p, DefaultGoals(), LatencyModel{}, p.Current)
	pl := newPlacer(st)
	inf, cut := pl.explainForced(8, nil, nil)
	if cut {
		t.Error("cut short without a clock")
	}
	if len(inf) != 0 {
		t.Errorf("reported infeasible: %+v", inf)
	}
	if want := []int32{1, 0, 2}; !slices.Equal(st.assign, want) {
		t.Errorf("assignment %v, want %v", st.assign, want)
	}
}
