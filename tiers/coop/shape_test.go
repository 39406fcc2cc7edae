package coop

import (
	"reflect"
	"strings"
	"testing"

	"github.com/strata-sched/strata/interfaces"
)

func TestShapeRulesKeepShardsOffChildrenTooSmall(t *testing.T) {
	edge := interfaces.CapacityShape{Largest: interfaces.Load{CPU: 8}, Classes: []interfaces.HostClass{{Capacity: interfaces.Load{CPU: 8}, Count: 24}}}
	core := interfaces.CapacityShape{Largest: interfaces.Load{CPU: 48}, Classes: []interfaces.HostClass{{Capacity: interfaces.Load{CPU: 48}, Count: 4}}}
	v := &interfaces.View{Tier: interfaces.TierGlobal, Instance: "global", Now: t0,
		Children: []interfaces.Child{region("core", 192), region("edge", 192), region("new", 10)},
		Shards:   []interfaces.Shard{shard("clicks-3", 9.6, interfaces.ShardConstraints{}), shard("web-0", 2, interfaces.ShardConstraints{}), shard("huge-0", 60, interfaces.ShardConstraints{})},
		Reports:  map[interfaces.ChildID]interfaces.Report{"edge": {Child: "edge", Shape: &edge}, "core": {Child: "core", Shape: &core}},
	}
	got := ShapeRules(v)
	if len(got) != 2 || !reflect.DeepEqual(got[1].Shards, []interfaces.ShardID{"huge-0"}) || !reflect.DeepEqual(got[1].Children, []interfaces.ChildID{"new"}) {
		t.Fatalf("want two rules (huge-0 only on the child without a shape), got %+v", got)
	}
	r := got[0]
	// new reported no shape: it may hold anything; huge-0 fits no shaped
	// child but fits "new" by assumption, so it is allowed there only.
	if r.Kind != interfaces.ConstraintAllowed || !reflect.DeepEqual(r.Shards, []interfaces.ShardID{"clicks-3"}) || !reflect.DeepEqual(r.Children, []interfaces.ChildID{"core", "new"}) {
		t.Fatalf("rule %+v", r)
	}
	if !strings.Contains(r.Reason, "no host of edge (largest host cpu 8) can hold it") {
		t.Fatalf("reason %q", r.Reason)
	}
	// Without the shapeless child, huge-0 fits nowhere: no rule for it.
	v.Children = v.Children[:2]
	for _, r := range ShapeRules(v) {
		for _, s := range r.Shards {
			if s == "huge-0" {
				t.Fatalf("a rule for a shard no child can hold: %+v", r)
			}
		}
	}
}
