package control

import (
	"testing"

	"github.com/strata-sched/strata/interfaces"
)

// TestCanLeaveHonoursLabels: a shard can leave excluded children only for an
// active child its own rules admit — labels included (they were ignored, so a
// policy could evict a shard that no other child could take).
func TestCanLeaveHonoursLabels(t *testing.T) {
	v := &interfaces.View{Children: []interfaces.Child{
		{ID: "a", Labels: map[string]string{"disk": "ssd"}},
		{ID: "b", Labels: map[string]string{"disk": "hdd"}},
		{ID: "c", Labels: map[string]string{"disk": "ssd"}, State: interfaces.ChildDraining},
	}}
	ssd := &interfaces.Shard{ID: "s", Constraints: interfaces.ShardConstraints{Labels: map[string]string{"disk": "ssd"}}}
	ex := map[interfaces.ChildID]bool{"a": true}
	if canLeave(v, ssd, ex) {
		t.Error("an ssd shard can leave a: b lacks the label and c is draining")
	}
	if any := (&interfaces.Shard{ID: "t"}); !canLeave(v, any, ex) {
		t.Error("a shard without rules cannot leave a for b")
	}
	v.Children[1].Labels["disk"] = "ssd"
	if !canLeave(v, ssd, ex) {
		t.Error("an ssd shard cannot leave a although b has the label now")
	}
}
