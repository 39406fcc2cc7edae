package balancer

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/strata-sched/strata/interfaces"
)

// TestTargetMaxOverLBStopsLocalSearch: with a target the local solver stops as
// soon as every resource's max/LB is within it — so it ends within the target,
// after fewer steps than without one — and a target of 1 (not reachable with
// whole shards here) changes nothing.
func TestTargetMaxOverLBStopsLocalSearch(t *testing.T) {
	p, err := Generate(InstanceSpec{Shards: 2000, Hosts: 20, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	full, err := Solve(SolverLocal, p, Options{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	const target = 1.05
	start := summarize(p, p.Current)
	for _, v := range start.MaxOverLB {
		if v <= target {
			t.Fatalf("the start is already within %g (%v): the test checks nothing", target, start.MaxOverLB)
		}
	}
	res, err := Solve(SolverLocal, p, Options{Seed: 3, TargetMaxOverLB: target})
	if err != nil {
		t.Fatal(err)
	}
	for r, v := range res.Summary.MaxOverLB {
		if v > target {
			t.Errorf("%s: max/LB %g above the target %g", r, v, target)
		}
	}
	if res.Iterations >= full.Iterations || res.Summary.Moves >= full.Summary.Moves {
		t.Errorf("target %g: %d steps and %d moves, without a target %d and %d: it did not stop early",
			target, res.Iterations, res.Summary.Moves, full.Iterations, full.Summary.Moves)
	}
	if res.Status != interfaces.StatusOK {
		t.Errorf("status %v, want ok: reaching the target is not a budget running out", res.Status)
	}
	one, err := Solve(SolverLocal, p, Options{Seed: 3, TargetMaxOverLB: 1})
	if err != nil {
		t.Fatal(err)
	}
	if one.Summary.Moves != full.Summary.Moves || one.Objective.Total() != full.Objective.Total() {
		t.Errorf("target 1: %d moves, objective %g; without a target %d, %g", one.Summary.Moves, one.Objective.Total(), full.Summary.Moves, full.Objective.Total())
	}
	for _, bad := range []float64{0.5, -1, math.NaN(), math.Inf(1)} {
		_, err := Solve(SolverLocal, p, Options{TargetMaxOverLB: bad})
		if !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), "target_max_over_lb") {
			t.Errorf("target %g: %v, want ErrInvalid naming target_max_over_lb", bad, err)
		}
	}
}
