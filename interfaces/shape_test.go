package interfaces

import "testing"

func TestCapacityShape(t *testing.T) {
	var cs []Child
	for i := 0; i < 24; i++ {
		cs = append(cs, Child{ID: "edge", Capacity: Load{CPU: 8, Mem: 32 << 30}})
	}
	cs = append(cs, Child{ID: "big", Capacity: Load{CPU: 48, Mem: 16 << 30}, State: ChildFailed})
	sh := ShapeOf(cs)
	if sh.Largest.CPU != 8 || len(sh.Classes) != 1 || sh.Classes[0].Count != 24 {
		t.Fatalf("shape %+v (the failed child must not count)", sh)
	}
	if sh.Fits(Load{CPU: 9.6, Mem: 1 << 30}) {
		t.Error("a 9.6-cpu shard fits no 8-cpu host")
	}
	if !sh.Fits(Load{CPU: 7, Mem: 1 << 30, Tasks: 3}) { // tasks: no child tracks them
		t.Error("a 7-cpu shard fits")
	}
	cs[0] = Child{ID: "a", Capacity: Load{CPU: 16, Mem: 8 << 30}}
	sh = ShapeOf(cs)
	// Largest is per resource (16 cpu, 32 Gi), but no one host has both.
	if sh.Largest.CPU != 16 || sh.Largest.Mem != 32<<30 || len(sh.Classes) != 2 || sh.Classes[0].Capacity.CPU != 16 {
		t.Fatalf("shape %+v", sh)
	}
	if sh.Fits(Load{CPU: 12, Mem: 16 << 30}) {
		t.Error("12 cpu and 16 Gi fit no single host")
	}
}
