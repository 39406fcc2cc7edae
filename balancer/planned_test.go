package balancer_test

import (
	"reflect"
	"testing"

	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/interfaces"
)

// PlannedLoads makes a state with declared loads verify as the planning view
// with measured ones does: the same capacity verdicts, in-flight moves
// counted on their targets, shards the view does not list kept at the
// state's load. Before it, the commit verified on the declared loads and
// refused what the planner, on the measured ones, had found room for
// (issue 20, item 6).
func TestPlannedLoadsVerifiesAsThePlanningView(t *testing.T) {
	cpu := func(x float64) interfaces.Load { return interfaces.Load{CPU: x} }
	declared := &interfaces.View{
		Children: []interfaces.Child{{ID: "h1", Capacity: cpu(8)}, {ID: "h2", Capacity: cpu(8)}, {ID: "h3", Capacity: cpu(8)}},
		Shards: []interfaces.Shard{
			{ID: "a", Load: cpu(3)}, {ID: "b", Load: cpu(3)}, {ID: "f", Load: cpu(2)}, // h1 (f in flight to h2)
			{ID: "c", Load: cpu(4)}, // h2
			{ID: "hidden", Load: cpu(5)}, {ID: "u", Load: cpu(3)}, {ID: "w", Load: cpu(4)},
		},
		Assignments: []interfaces.Assignment{{Shard: "a", Child: "h1"}, {Shard: "b", Child: "h1"}, {Shard: "f", Child: "h1"}, {Shard: "c", Child: "h2"}, {Shard: "hidden", Child: "h3"}},
		InFlight:    []interfaces.Move{{Shard: "f", From: "h1", To: "h2"}},
	}
	measured := *declared
	measured.Shards = []interfaces.Shard{
		{ID: "a", Load: cpu(1)}, {ID: "b", Load: cpu(1)}, {ID: "f", Load: cpu(3)},
		{ID: "c", Load: cpu(1)}, {ID: "hidden", Load: cpu(5)}, {ID: "u", Load: cpu(3)}, {ID: "w", Load: cpu(4)},
	}
	st, err := balancer.NewViewState(declared)
	if err != nil {
		t.Fatal(err)
	}
	want, err := balancer.NewViewState(&measured)
	if err != nil {
		t.Fatal(err)
	}
	// The planning view lists every shard but hidden (a view may leave a
	// shard out): it keeps the state's load.
	var planned []interfaces.Shard
	for _, s := range measured.Shards {
		if s.ID != "hidden" {
			planned = append(planned, s)
		}
	}
	got := balancer.PlannedLoads(st, planned)
	for _, c := range []interfaces.ChildID{"h1", "h2", "h3"} {
		if g, w := got.Used(c), want.Used(c); !g.Equal(w) {
			t.Errorf("used on %s: %v, the planning view's %v", c, g, w)
		}
	}
	moves := []interfaces.Move{
		{Shard: "u", To: "h1"}, // 1 + 1 + 3 = 5 as measured (f counts on h2); 3 + 3 + 3 = 9 declared
		{Shard: "w", To: "h2"}, // 1 + 3 + 4 = 8 as measured (c, f, w); 4 + 2 + 4 = 10 declared
		{Shard: "c", From: "h2", To: "h3", Reason: "x"},
	}
	if g, w := balancer.Verify(got, moves), balancer.Verify(want, moves); !reflect.DeepEqual(g, w) {
		t.Errorf("verdict on the planned loads:\n%+v\nthe planning view's:\n%+v", g, w)
	}
	if v := balancer.Verify(got, moves); len(v.Accepted) != 3 {
		t.Errorf("accepted %d of 3 (%+v)", len(v.Accepted), v.Rejected)
	}
	if v := balancer.Verify(st, moves); len(v.Rejected) == 0 {
		t.Errorf("the declared loads accept every move: the test shows nothing")
	}
}
