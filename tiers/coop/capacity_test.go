package coop

import (
	"reflect"
	"strings"
	"testing"

	"github.com/strata-sched/strata/interfaces"
)

// The collaborative shard loss (issue 24): a shard larger than every host of
// the region is left unplaced by the region's solver. Its rules admit every
// host, so before the fix no hint named it and the parent never took it back;
// it ran nowhere. The region must propose to keep it elsewhere and ask to shed
// it, saying why.
func TestChildHintsHandsBackShardLargerThanEveryHost(t *testing.T) {
	v := &interfaces.View{Tier: interfaces.TierRegion, Instance: "edge", Now: t0,
		Children: []interfaces.Child{host("edge-0", 8, nil), host("edge-1", 8, nil)},
		Shards: []interfaces.Shard{
			shard("clicks-6", 9.6, interfaces.ShardConstraints{}),
			shard("web-0", 2, interfaces.ShardConstraints{}),
		},
		Assignments: []interfaces.Assignment{assign("web-0", "edge-0")},
	}
	hs, err := ChildHints(v, Config{})
	if err != nil {
		t.Fatal(err)
	}
	want := []interfaces.ShardID{"clicks-6"}
	p := hintsOf(hs, interfaces.HintConstraint)
	if len(p) != 1 || p[0].Constraint == nil || p[0].Constraint.Kind != interfaces.ConstraintAvoid || !reflect.DeepEqual(p[0].Constraint.Shards, want) {
		t.Fatalf("want an avoid proposal for clicks-6, got %+v", hs)
	}
	if !strings.Contains(p[0].Reason, "larger than every child") || !strings.Contains(p[0].Reason, "cpu 9.6 > 8") {
		t.Fatalf("proposal reason %q does not say the shard is too large", p[0].Reason)
	}
	sh := hintsOf(hs, interfaces.HintShed)
	if len(sh) != 1 || !reflect.DeepEqual(sh[0].Shards, want) || sh[0].Amount.CPU != 9.6 {
		t.Fatalf("want a shed request for clicks-6, got %+v", hs)
	}
}

// A shard that fits a host's capacity but not the room any host has left
// (the region is full) is shed, not proposed to be avoided for good: the
// region could hold it once load moves.
func TestChildHintsShedsUnplacedShardWithoutRoom(t *testing.T) {
	v := &interfaces.View{Tier: interfaces.TierRegion, Instance: "edge", Now: t0,
		Children: []interfaces.Child{host("edge-0", 8, nil), host("edge-1", 8, nil)},
		Shards: []interfaces.Shard{
			shard("new-0", 3, interfaces.ShardConstraints{}),
			shard("web-0", 6, interfaces.ShardConstraints{}),
			shard("web-1", 6, interfaces.ShardConstraints{}),
		},
		Assignments: []interfaces.Assignment{assign("web-0", "edge-0"), assign("web-1", "edge-1")},
	}
	hs, err := ChildHints(v, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if p := hintsOf(hs, interfaces.HintConstraint); len(p) != 0 {
		t.Fatalf("no avoid proposal expected, got %+v", p)
	}
	sh := hintsOf(hs, interfaces.HintShed)
	if len(sh) != 1 || !reflect.DeepEqual(sh[0].Shards, []interfaces.ShardID{"new-0"}) {
		t.Fatalf("want a shed request for new-0, got %+v", hs)
	}
	if !strings.Contains(sh[0].Reason, "no room") {
		t.Fatalf("shed reason %q", sh[0].Reason)
	}
	// A shard that has room somewhere is left to the region's own solve.
	v.Shards[0].Load.CPU = 1.5
	hs, err = ChildHints(v, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if sh := hintsOf(hs, interfaces.HintShed); len(sh) != 0 {
		t.Fatalf("no shed expected for a shard with room, got %+v", sh)
	}
}
