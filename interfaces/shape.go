package interfaces

import "sort"

// CapacityShape is what a tier instance tells its parent about how its
// capacity is cut into children, beyond the sum: a region with 24 hosts of 8
// cpu and one with 4 hosts of 48 cpu have the same total, but only the second
// can run a 10-cpu shard. A parent that plans aggregates (the global tier over
// regions) uses it to skip a child whose largest host cannot hold a shard
// (Fits), without runtime hints: that is the knowledge a sensible decoupled
// hierarchy has. It describes the instance's active children only.
type CapacityShape struct {
	// Largest is, per resource, the largest capacity of one active child
	// (the dimensions may come from different children).
	Largest Load
	// Classes are the distinct capacities of the active children with how
	// many children have each, largest first by cpu then mem (at most
	// MaxShapeClasses; the smallest classes are merged into the last).
	Classes []HostClass
}

// HostClass is one capacity a tier instance's children have, and how many.
type HostClass struct {
	Capacity Load
	Count    int
}

// MaxShapeClasses bounds CapacityShape.Classes.
const MaxShapeClasses = 16

// ShapeOf returns the capacity shape of the active children of cs.
func ShapeOf(cs []Child) CapacityShape {
	var sh CapacityShape
	var classes []HostClass
	for _, c := range cs {
		if c.State != ChildActive {
			continue
		}
		sh.Largest = sh.Largest.Max(c.Capacity)
		found := false
		for i := range classes {
			if classes[i].Capacity.Equal(c.Capacity) {
				classes[i].Count++
				found = true
				break
			}
		}
		if !found {
			classes = append(classes, HostClass{Capacity: c.Capacity, Count: 1})
		}
	}
	sort.SliceStable(classes, func(a, b int) bool {
		x, y := classes[a].Capacity, classes[b].Capacity
		if x.CPU != y.CPU {
			return x.CPU > y.CPU
		}
		return x.Mem > y.Mem
	})
	if len(classes) > MaxShapeClasses {
		last := &classes[MaxShapeClasses-1]
		for _, k := range classes[MaxShapeClasses:] {
			last.Count += k.Count // merged into the smallest kept class: a lower bound of their capacity is not kept
		}
		classes = classes[:MaxShapeClasses]
	}
	sh.Classes = classes
	return sh
}

// Fits reports whether load l fits, whole, in one child of the shape: in
// some class's capacity when classes are given, else within Largest. A
// resource no child has capacity for (0 in Largest) is not tracked by the
// children and does not count; one that some child has counts for every class.
func (sh CapacityShape) Fits(l Load) bool {
	tracked := func(x, largest float64) float64 {
		if largest == 0 {
			return 0
		}
		return x
	}
	m := Load{CPU: tracked(l.CPU, sh.Largest.CPU), Mem: tracked(l.Mem, sh.Largest.Mem), Net: tracked(l.Net, sh.Largest.Net), Tasks: tracked(l.Tasks, sh.Largest.Tasks)}
	for k, x := range l.Extra {
		if m.Extra == nil {
			m.Extra = map[string]float64{}
		}
		m.Extra[k] = tracked(x, sh.Largest.Extra[k])
	}
	if len(sh.Classes) == 0 {
		return m.Fits(sh.Largest)
	}
	for _, k := range sh.Classes {
		if m.Fits(k.Capacity) {
			return true
		}
	}
	return false
}
