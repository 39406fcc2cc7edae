package wire_test

// Generators of random, valid domain values for the property tests. They produce
// nil, empty and filled slices and maps, Extra dimensions, labels, constraints and
// hints, and instants in several locations, so that the canonical form (see
// canonDomain) is exercised.

import (
	"math"
	"time"

	"pgregory.net/rapid"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

// optSlice draws nil, an empty slice, or 1..max elements.
func optSlice[T any](g *rapid.Generator[T], max int) *rapid.Generator[[]T] {
	return rapid.OneOf(rapid.Just([]T(nil)), rapid.Just([]T{}), rapid.SliceOfN(g, 1, max))
}

// optSliceOfDistinct is optSlice with distinct keys.
func optSliceOfDistinct[T any, K comparable](g *rapid.Generator[T], key func(T) K, max int) *rapid.Generator[[]T] {
	return rapid.OneOf(rapid.Just([]T(nil)), rapid.Just([]T{}), rapid.SliceOfNDistinct(g, 1, max, key))
}

// optMap draws nil, an empty map, or 1..max entries.
func optMap[K comparable, V any](k *rapid.Generator[K], v *rapid.Generator[V], max int) *rapid.Generator[map[K]V] {
	return rapid.OneOf(rapid.Just(map[K]V(nil)), rapid.Just(map[K]V{}), rapid.MapOfN(k, v, 1, max))
}

var (
	// genID makes IDs valid for every field (job and child IDs have no "/");
	// genShardID's may have one (<job>/<index>).
	genID           = rapid.StringMatching(`[a-z0-9][a-z0-9._:-]{0,6}`)
	genShardID      = rapid.Map(rapid.StringMatching(`[a-z0-9][a-z0-9._:-]{0,4}(/[a-z0-9][a-z0-9._:-]{0,2})?`), func(s string) interfaces.ShardID { return interfaces.ShardID(s) })
	genChildID      = rapid.Map(genID, func(s string) interfaces.ChildID { return interfaces.ChildID(s) })
	genText         = rapid.String()
	genNonEmptyText = rapid.StringN(1, 8, -1)
	genName         = rapid.StringMatching(`[a-z][a-z0-9_]{0,5}`)
	// genExtraName never yields a built-in dimension name.
	genExtraName = rapid.Map(genName, func(s string) string {
		switch s {
		case "cpu", "mem", "net", "tasks":
			return "x_" + s
		}
		return s
	})
	genLabelKey = rapid.StringMatching(`[a-z][a-z0-9./-]{0,6}`)
	genNonNeg   = rapid.OneOf(rapid.Just(0.0), rapid.Float64Range(0, 1e6), rapid.Float64Range(0, interfaces.MaxQuantity))
	genFinite   = rapid.OneOf(rapid.Just(0.0), rapid.Float64Range(-1e6, 1e6), rapid.Float64Range(-interfaces.MaxQuantity, interfaces.MaxQuantity))
	// genNumber is any float but NaN.
	genNumber   = rapid.OneOf(genFinite, rapid.Just(math.Inf(1)), rapid.Just(math.Inf(-1)))
	genDuration = rapid.Map(rapid.Int64Min(0), func(n int64) time.Duration { return time.Duration(n) })
	// genLatency is a reported latency: at most MaxLatency.
	genLatency = rapid.Map(rapid.Int64Range(0, int64(wire.MaxLatency)), func(n int64) time.Duration { return time.Duration(n) })
	genLabels  = optMap(genLabelKey, genText, 3)
)

func genLoadWith(v *rapid.Generator[float64]) *rapid.Generator[interfaces.Load] {
	return rapid.Custom(func(t *rapid.T) interfaces.Load {
		return interfaces.Load{
			CPU:   v.Draw(t, "cpu"),
			Mem:   v.Draw(t, "mem"),
			Net:   v.Draw(t, "net"),
			Tasks: v.Draw(t, "tasks"),
			Extra: optMap(genExtraName, v, 3).Draw(t, "extra"),
		}
	})
}

var (
	genLoad       = genLoadWith(genNonNeg)
	genSignedLoad = genLoadWith(genFinite)
)

var genShard = rapid.Custom(func(t *rapid.T) interfaces.Shard {
	c := interfaces.ShardConstraints{
		Allowed: optSlice(genChildID, 3).Draw(t, "allowed"),
		Labels:  genLabels.Draw(t, "labels"),
	}
	if rapid.Bool().Draw(t, "pinned?") {
		c.Pinned = genChildID.Draw(t, "pinned")
		if len(c.Allowed) > 0 {
			c.Allowed = append(c.Allowed, c.Pinned) // the pin must be allowed
		}
	}
	if rapid.Bool().Draw(t, "anti-affinity?") {
		c.AntiAffinity = genNonEmptyText.Draw(t, "group")
		c.MaxPerChild = rapid.IntRange(0, 1000).Draw(t, "max_per_child")
	}
	return interfaces.Shard{
		ID:          genShardID.Draw(t, "id"),
		Job:         genID.Draw(t, "job"),
		Load:        genLoad.Draw(t, "load"),
		InputRate:   genNonNeg.Draw(t, "input_rate"),
		StateBytes:  rapid.Int64Min(0).Draw(t, "state_bytes"),
		LatencySLO:  genDuration.Draw(t, "slo"),
		Constraints: c,
	}
})

var genChild = rapid.Custom(func(t *rapid.T) interfaces.Child {
	capacity := genLoad.Draw(t, "capacity")
	if capacity.IsZero() {
		capacity.CPU = rapid.Float64Range(1, 64).Draw(t, "cpu")
	}
	return interfaces.Child{
		ID:       genChildID.Draw(t, "id"),
		Tier:     genNonEmptyText.Draw(t, "tier"),
		Capacity: capacity,
		Labels:   genLabels.Draw(t, "labels"),
		State:    interfaces.ChildState(rapid.IntRange(0, 2).Draw(t, "state")),
	}
})

var genAssignment = rapid.Custom(func(t *rapid.T) interfaces.Assignment {
	return interfaces.Assignment{
		Shard: genShardID.Draw(t, "shard"),
		Child: genChildID.Draw(t, "child"),
		Epoch: interfaces.Epoch(rapid.Uint64().Draw(t, "epoch")),
	}
})

var genMove = rapid.Custom(func(t *rapid.T) interfaces.Move {
	m := interfaces.Move{
		Shard:  genShardID.Draw(t, "shard"),
		To:     genChildID.Draw(t, "to"),
		Epoch:  interfaces.Epoch(rapid.Uint64().Draw(t, "epoch")),
		Reason: genText.Draw(t, "reason"),
		Goal:   genText.Draw(t, "goal"),
		Delta:  genFinite.Draw(t, "delta"), // a tier commits only finite deltas
	}
	if rapid.Bool().Draw(t, "from?") {
		m.From = genChildID.Filter(func(id interfaces.ChildID) bool { return id != m.To }).Draw(t, "from")
	}
	return m
})

var genConstraint = rapid.Custom(func(t *rapid.T) interfaces.Constraint {
	c := interfaces.Constraint{
		Kind:     interfaces.ConstraintKind(rapid.IntRange(0, 5).Draw(t, "kind")),
		Shards:   optSlice(genShardID, 3).Draw(t, "shards"),
		Children: optSlice(genChildID, 3).Draw(t, "children"),
		Limit:    genLoad.Draw(t, "limit"),
		Max:      rapid.IntRange(0, 1<<20).Draw(t, "max"),
		MaxBytes: rapid.Int64Min(0).Draw(t, "max_bytes"),
		Reason:   genText.Draw(t, "reason"),
	}
	if c.Kind == interfaces.ConstraintPin && len(c.Children) == 0 {
		c.Children = []interfaces.ChildID{genChildID.Draw(t, "pin_to")}
	}
	return c
})

var genHint = rapid.Custom(func(t *rapid.T) interfaces.Hint {
	h := interfaces.Hint{
		Kind:   interfaces.HintKind(rapid.IntRange(0, 3).Draw(t, "kind")),
		Amount: genLoad.Draw(t, "amount"),
		Shards: optSlice(genShardID, 3).Draw(t, "shards"),
		Reason: genText.Draw(t, "reason"),
	}
	if h.Kind == interfaces.HintConstraint || rapid.Bool().Draw(t, "constraint?") {
		c := genConstraint.Draw(t, "constraint")
		h.Constraint = &c
	}
	return h
})

var genShardLoad = rapid.Custom(func(t *rapid.T) interfaces.ShardLoad {
	return interfaces.ShardLoad{
		Shard:      genShardID.Draw(t, "shard"),
		Load:       genLoad.Draw(t, "load"),
		Rate:       genNonNeg.Draw(t, "rate"),
		InputRate:  genNonNeg.Draw(t, "input_rate"),
		LatencyP99: genLatency.Draw(t, "p99"),
		Lag:        genNonNeg.Draw(t, "lag"),
	}
})

func genReportFor(child interfaces.ChildID) *rapid.Generator[interfaces.Report] {
	return rapid.Custom(func(t *rapid.T) interfaces.Report {
		return interfaces.Report{
			Child:      child,
			Epoch:      rapid.Uint64().Draw(t, "epoch"),
			Capacity:   genLoad.Draw(t, "capacity"),
			Used:       genLoad.Draw(t, "used"),
			Headroom:   genSignedLoad.Draw(t, "headroom"),
			LatencyP50: genLatency.Draw(t, "p50"),
			LatencyP99: genLatency.Draw(t, "p99"),
			Throughput: genNonNeg.Draw(t, "throughput"),
			Shards:     optSliceOfDistinct(genShardLoad, func(l interfaces.ShardLoad) interfaces.ShardID { return l.Shard }, 3).Draw(t, "shards"),
			Hints:      optSlice(genHint, 2).Draw(t, "hints"),
			Shape:      genShape.Draw(t, "shape"),
		}
	})
}

// genShape draws no capacity shape or one with up to three classes.
var genShape = rapid.Custom(func(t *rapid.T) *interfaces.CapacityShape {
	if rapid.Bool().Draw(t, "no shape") {
		return nil
	}
	sh := &interfaces.CapacityShape{Largest: genLoad.Draw(t, "largest")}
	for i := rapid.IntRange(0, 3).Draw(t, "classes"); i > 0; i-- {
		sh.Classes = append(sh.Classes, interfaces.HostClass{Capacity: genLoad.Draw(t, "class"), Count: rapid.IntRange(1, 1000).Draw(t, "count")})
	}
	return sh
})

var genReport = rapid.Custom(func(t *rapid.T) interfaces.Report {
	return genReportFor(genChildID.Draw(t, "child")).Draw(t, "report")
})

// genTime draws the zero time, the Unix epoch, or an instant int64 nanoseconds can
// hold, in UTC or another location.
var genTime = rapid.Custom(func(t *rapid.T) time.Time {
	switch rapid.IntRange(0, 2).Draw(t, "which") {
	case 0:
		return time.Time{}
	case 1:
		return time.Unix(0, 0)
	}
	ts := time.Unix(0, rapid.Int64().Draw(t, "nanos"))
	if rapid.Bool().Draw(t, "zone?") {
		ts = ts.In(time.FixedZone("z", 3600*rapid.IntRange(-12, 12).Draw(t, "offset")))
	}
	return ts
})

var genView = rapid.Custom(func(t *rapid.T) *interfaces.View {
	v := &interfaces.View{
		Tier:        genNonEmptyText.Draw(t, "tier"),
		Instance:    genText.Draw(t, "instance"),
		Now:         genTime.Draw(t, "now"),
		Seed:        rapid.Int64().Draw(t, "seed"),
		Children:    optSlice(genChild, 3).Draw(t, "children"),
		Shards:      optSlice(genShard, 3).Draw(t, "shards"),
		Assignments: optSlice(genAssignment, 3).Draw(t, "assignments"),
		InFlight:    optSlice(genMove, 3).Draw(t, "in_flight"),
		Constraints: optSlice(genConstraint, 3).Draw(t, "constraints"),
	}
	switch rapid.IntRange(0, 2).Draw(t, "reports?") {
	case 1:
		v.Reports = map[interfaces.ChildID]interfaces.Report{}
	case 2:
		keys := rapid.SliceOfNDistinct(genChildID, 1, 3, rapid.ID[interfaces.ChildID]).Draw(t, "report keys")
		v.Reports = make(map[interfaces.ChildID]interfaces.Report, len(keys))
		for _, k := range keys {
			v.Reports[k] = genReportFor(k).Draw(t, "report")
		}
	}
	return v
})

var genInfeasible = rapid.Custom(func(t *rapid.T) interfaces.Infeasible {
	return interfaces.Infeasible{
		Shard:    genShardID.Draw(t, "shard"),
		Excluded: optMap(genChildID, genText, 3).Draw(t, "excluded"),
	}
})

var (
	genResourceName = rapid.OneOf(rapid.SampledFrom(interfaces.BuiltinResources), genExtraName)
	genResourceMap  = optMap(genResourceName, genNumber, 4)
)

var genPlan = rapid.Custom(func(t *rapid.T) interfaces.Plan {
	return interfaces.Plan{
		Tier:       genText.Draw(t, "tier"),
		Status:     interfaces.Status(rapid.IntRange(0, 2).Draw(t, "status")),
		Moves:      optSlice(genMove, 4).Draw(t, "moves"),
		Infeasible: optSlice(genInfeasible, 3).Draw(t, "infeasible"),
		Summary: interfaces.Summary{
			MaxOverMean:  genResourceMap.Draw(t, "max_over_mean"),
			MaxOverLB:    genResourceMap.Draw(t, "max_over_lb"),
			LB:           genResourceMap.Draw(t, "lb"),
			Moves:        rapid.IntRange(0, 1<<30).Draw(t, "moves"),
			BytesMoved:   rapid.Int64Min(0).Draw(t, "bytes_moved"),
			SolveSeconds: genNonNeg.Draw(t, "solve_seconds"),
			Objective:    genNumber.Draw(t, "objective"),
		},
	}
})
