package tierd

import (
	"testing"

	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/interfaces"
)

// The per-child index of assignments follows every commit: it is rebuilt when
// the applied index moves, and is the same as filtering all assignments.
func TestOwnedIndexFollowsCommits(t *testing.T) {
	f := fsm.New()
	idx := uint64(0)
	apply := func(c fsm.Command) {
		t.Helper()
		idx++
		if _, err := f.ApplyCommand(idx, c); err != nil {
			t.Fatalf("apply %T: %v", c, err)
		}
	}
	for _, id := range []interfaces.ChildID{"h1", "h2"} {
		apply(&fsm.PutChild{Child: interfaces.Child{ID: id, Tier: interfaces.TierHost, Capacity: interfaces.Load{CPU: 10}}})
	}
	apply(&fsm.PutShards{Shards: []interfaces.Shard{{ID: "a", Job: "j", Load: interfaces.Load{CPU: 1}}, {ID: "b", Job: "j", Load: interfaces.Load{CPU: 1}}}})
	apply(&fsm.Assign{Shard: "a", Child: "h1"})
	apply(&fsm.Assign{Shard: "b", Child: "h1"})

	var o ownedIndex
	check := func(want map[interfaces.ChildID][]interfaces.ShardID) {
		t.Helper()
		for child, shards := range want {
			got := o.of(f, child)
			if len(got) != len(shards) {
				t.Fatalf("%s: got %+v, want %v", child, got, shards)
			}
			for i, a := range got {
				if a.Shard != shards[i] || a.Child != child {
					t.Fatalf("%s: got %+v, want %v", child, got, shards)
				}
			}
		}
	}
	check(map[interfaces.ChildID][]interfaces.ShardID{"h1": {"a", "b"}, "h2": nil})
	a, _ := f.Assignment("a")
	apply(&fsm.Move{Move: interfaces.Move{Shard: "a", From: "h1", To: "h2", Epoch: a.Epoch}})
	check(map[interfaces.ChildID][]interfaces.ShardID{"h1": {"b"}, "h2": {"a"}})
	b, _ := f.Assignment("b")
	apply(&fsm.Unassign{Shard: "b", Epoch: b.Epoch})
	check(map[interfaces.ChildID][]interfaces.ShardID{"h1": nil, "h2": {"a"}})
}
