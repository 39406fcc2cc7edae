package interfaces

import (
	"slices"
	"testing"
)

// Within drops what the parent tier kept by placing the shard on self: a pin
// to self, an allowed list naming self; everything else binds below, and the
// original is not changed.
func TestWithinDropsWhatTheParentKept(t *testing.T) {
	orig := ShardConstraints{Pinned: "region-1", Allowed: []ChildID{"region-1", "region-2"}, Labels: map[string]string{"zone": "a"}, AntiAffinity: "g", MaxPerChild: 2}
	got := orig.Within("region-1")
	if got.Pinned != "" || got.Allowed != nil || got.Labels["zone"] != "a" || got.AntiAffinity != "g" || got.MaxPerChild != 2 {
		t.Errorf("within region-1: %+v", got)
	}
	if orig.Pinned != "region-1" || !slices.Equal(orig.Allowed, []ChildID{"region-1", "region-2"}) {
		t.Errorf("the original changed: %+v", orig)
	}
	other := ShardConstraints{Pinned: "host-3", Allowed: []ChildID{"host-3", "host-4"}}
	if got := other.Within("region-1"); got.Pinned != "host-3" || len(got.Allowed) != 2 {
		t.Errorf("rules naming children of region-1 must stay: %+v", got)
	}
	if got := (ShardConstraints{Allowed: []ChildID{"region-2", "region-1"}}).Within("region-1"); got.Allowed != nil {
		t.Errorf("allowed naming self: %+v, want no list", got)
	}
	if got := orig.Within(""); got.Pinned != "region-1" {
		t.Errorf("within no instance: %+v, want unchanged", got)
	}
}
