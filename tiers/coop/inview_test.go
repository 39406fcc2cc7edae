package coop

import (
	"reflect"
	"testing"

	"github.com/strata-sched/strata/interfaces"
)

// Operator constraints keep only the shards and children of the view; one left
// without what its kind needs is dropped.
func TestInView(t *testing.T) {
	v := &interfaces.View{
		Children: []interfaces.Child{{ID: "h1"}, {ID: "h2"}},
		Shards:   []interfaces.Shard{{ID: "s1"}, {ID: "s2"}},
	}
	in := []interfaces.Constraint{
		{Kind: interfaces.ConstraintAllowed, Shards: []interfaces.ShardID{"s1", "gone"}, Children: []interfaces.ChildID{"h1", "h9"}},
		{Kind: interfaces.ConstraintAllowed, Shards: []interfaces.ShardID{"gone"}, Children: []interfaces.ChildID{"h1"}},
		{Kind: interfaces.ConstraintPin, Shards: []interfaces.ShardID{"s2"}, Children: []interfaces.ChildID{"h9"}},
		{Kind: interfaces.ConstraintCapacity, Children: []interfaces.ChildID{"h2"}, Limit: interfaces.Load{CPU: 4}, Reason: "half of h2"},
		{Kind: interfaces.ConstraintCapacity, Children: []interfaces.ChildID{"h9"}, Limit: interfaces.Load{CPU: 4}},
		{Kind: interfaces.ConstraintMaxMoves, Max: 3},
	}
	out := InView(v, in)
	if len(out) != 3 {
		t.Fatalf("got %+v", out)
	}
	if !reflect.DeepEqual(out[0].Shards, []interfaces.ShardID{"s1"}) || !reflect.DeepEqual(out[0].Children, []interfaces.ChildID{"h1"}) || out[0].Reason != "operator constraint" {
		t.Errorf("allowed %+v", out[0])
	}
	if out[1].Reason != "half of h2" || out[2].Kind != interfaces.ConstraintMaxMoves || out[2].Max != 3 {
		t.Errorf("got %+v", out[1:])
	}
	if in[0].Shards[1] != "gone" {
		t.Error("InView changed its input")
	}
}
