package tiercore

import (
	"reflect"
	"testing"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

func TestUnreachable(t *testing.T) {
	t0 := time.Unix(1000, 0)
	kids := []interfaces.Child{{ID: "h1"}, {ID: "h2"}, {ID: "h3", State: interfaces.ChildFailed}, {ID: "h4"}}
	heard := map[interfaces.ChildID]time.Time{"h1": t0.Add(9 * time.Second), "h2": t0.Add(7 * time.Second), "h3": t0}
	got := Unreachable(t0.Add(10*time.Second), t0, heard, kids, 1500*time.Millisecond)
	// h1 heard 1s ago; h2 3s ago; h3 failed (the round moves its shards);
	// h4 never heard in this term, which began 10s ago.
	if want := []interfaces.ChildID{"h2", "h4"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Unreachable = %v, want %v", got, want)
	}
	// A new leader gives every child the silence limit from its start.
	if got := Unreachable(t0.Add(10*time.Second), t0.Add(9*time.Second), heard, kids, 1500*time.Millisecond); got != nil {
		t.Errorf("just elected: Unreachable = %v, want none", got)
	}
	if got := Unreachable(t0.Add(time.Hour), t0, heard, kids, 0); got != nil {
		t.Errorf("silence 0 (off): Unreachable = %v, want none", got)
	}
}

func TestFreezeAndReachable(t *testing.T) {
	v := &interfaces.View{
		Children:    []interfaces.Child{{ID: "h1"}, {ID: "h2"}, {ID: "h3"}},
		Shards:      []interfaces.Shard{{ID: "a"}, {ID: "b"}, {ID: "c"}, {ID: "d"}},
		Assignments: []interfaces.Assignment{{Shard: "a", Child: "h2"}, {Shard: "b", Child: "h1"}, {Shard: "c", Child: "h2"}},
		InFlight:    []interfaces.Move{{Shard: "c", From: "h2", To: "h1"}},
	}
	got := Freeze(v, []interfaces.ChildID{"h2"})
	if len(got) != 2 {
		t.Fatalf("Freeze = %+v, want a pin and an allowed", got)
	}
	if got[0].Kind != interfaces.ConstraintPin || !reflect.DeepEqual(got[0].Shards, []interfaces.ShardID{"a"}) || !reflect.DeepEqual(got[0].Children, []interfaces.ChildID{"h2"}) {
		t.Errorf("pin = %+v, want a on h2 (c is moving: its move decides)", got[0])
	}
	if got[1].Kind != interfaces.ConstraintAllowed || !reflect.DeepEqual(got[1].Shards, []interfaces.ShardID{"b", "d"}) || !reflect.DeepEqual(got[1].Children, []interfaces.ChildID{"h1", "h3"}) {
		t.Errorf("allowed = %+v, want b and d allowed on h1 and h3 only", got[1])
	}
	if all := Freeze(v, []interfaces.ChildID{"h1", "h2", "h3"}); len(all) != 2 || all[0].Kind != interfaces.ConstraintPin || all[1].Kind != interfaces.ConstraintPin {
		t.Errorf("nobody reachable: Freeze = %+v, want only the pins", all)
	}
	if Freeze(v, nil) != nil {
		t.Error("Freeze with nobody unreachable returned constraints")
	}
	moves := []interfaces.Move{{Shard: "d", To: "h2"}, {Shard: "a", From: "h2", To: "h1"}, {Shard: "b", From: "h1", To: "h3"}, {Shard: "e", To: "h1"}}
	kept, dropped := Reachable(moves, []interfaces.ChildID{"h2"})
	if dropped != 2 || len(kept) != 2 || kept[0].Shard != "b" || kept[1].Shard != "e" {
		t.Errorf("Reachable = %+v (%d dropped), want b and e kept, 2 dropped", kept, dropped)
	}
	if k, n := Reachable(moves, nil); n != 0 || len(k) != len(moves) {
		t.Errorf("Reachable with nobody unreachable dropped %d", n)
	}
}
