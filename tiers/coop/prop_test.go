package coop

import (
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/interfaces"
)

// genView draws a tier instance whose active children's capacities add up to
// at least the load of its shards, with a random placement, random hints from
// every child (shed, headroom, SLO at risk, proposals, naming real and unknown
// shards and children) and a random memory.
func genView(t *rapid.T) (*interfaces.View, Memory) {
	nc := rapid.IntRange(1, 5).Draw(t, "children")
	ns := rapid.IntRange(0, 25).Draw(t, "shards")
	v := &interfaces.View{Tier: "global", Instance: "g", Now: t0.Add(time.Duration(rapid.IntRange(0, 3600).Draw(t, "now")) * time.Second),
		Reports: map[interfaces.ChildID]interfaces.Report{}}
	labels := []string{"ssd", "hdd"}
	for c := 0; c < nc; c++ {
		st := interfaces.ChildActive
		if c > 0 {
			st = interfaces.ChildState(rapid.IntRange(0, 2).Draw(t, fmt.Sprintf("state%d", c)))
		}
		v.Children = append(v.Children, interfaces.Child{ID: interfaces.ChildID(fmt.Sprintf("c%d", c)), Tier: "region", Capacity: interfaces.Load{CPU: 1, Mem: 1},
			Labels: map[string]string{"disk": labels[rapid.IntRange(0, 1).Draw(t, fmt.Sprintf("label%d", c))]}, State: st})
	}
	var total interfaces.Load
	for s := 0; s < ns; s++ {
		sh := interfaces.Shard{ID: interfaces.ShardID(fmt.Sprintf("s%d", s)), Job: "j", Load: interfaces.Load{CPU: rapid.Float64Range(0, 10).Draw(t, "cpu"), Mem: rapid.Float64Range(0, 10).Draw(t, "mem")}}
		switch rapid.IntRange(0, 4).Draw(t, fmt.Sprintf("rule%d", s)) {
		case 1:
			sh.Constraints.Labels = map[string]string{"disk": "ssd"}
		case 2:
			sh.Constraints.AntiAffinity, sh.Constraints.MaxPerChild = "g", rapid.IntRange(0, 2).Draw(t, "max")
		case 3:
			sh.Constraints.Allowed = []interfaces.ChildID{v.Children[rapid.IntRange(0, nc-1).Draw(t, "allowed")].ID}
		}
		total = total.Add(sh.Load)
		v.Shards = append(v.Shards, sh)
		if o := rapid.IntRange(-1, nc-1).Draw(t, fmt.Sprintf("owner%d", s)); o >= 0 {
			v.Assignments = append(v.Assignments, interfaces.Assignment{Shard: sh.ID, Child: v.Children[o].ID, Epoch: 1})
		}
	}
	// Size the children at random, then scale them so that the active ones
	// hold the total load with some slack (none, now and then).
	var active interfaces.Load
	for i := range v.Children {
		f := rapid.Float64Range(0.2, 3).Draw(t, fmt.Sprintf("size%d", i))
		v.Children[i].Capacity = interfaces.Load{CPU: f, Mem: f * rapid.Float64Range(0.5, 2).Draw(t, "memsize")}
		if v.Children[i].State == interfaces.ChildActive {
			active = active.Add(v.Children[i].Capacity)
		}
	}
	slack := rapid.Float64Range(1, 2).Draw(t, "slack")
	for i := range v.Children {
		c := &v.Children[i].Capacity
		c.CPU = math.Max(c.CPU*slack*total.CPU/active.CPU, 1e-3)
		c.Mem = math.Max(c.Mem*slack*total.Mem/active.Mem, 1e-3)
	}
	shardIDs := func(label string) []interfaces.ShardID {
		n := rapid.IntRange(0, 4).Draw(t, label)
		var out []interfaces.ShardID
		for k := 0; k < n; k++ {
			out = append(out, interfaces.ShardID(fmt.Sprintf("s%d", rapid.IntRange(0, ns+1).Draw(t, label+"id"))))
		}
		return out
	}
	for _, ch := range v.Children {
		var hs []interfaces.Hint
		for k := rapid.IntRange(0, 4).Draw(t, "hints"); k > 0; k-- {
			amount := interfaces.Load{CPU: rapid.Float64Range(-1, 100).Draw(t, "amount"), Mem: rapid.Float64Range(0, 100).Draw(t, "amount")}
			switch rapid.IntRange(0, 5).Draw(t, "kind") {
			case 0:
				hs = append(hs, interfaces.Hint{Kind: interfaces.HintShed, Amount: amount, Shards: shardIDs("shed")})
			case 1:
				hs = append(hs, interfaces.Hint{Kind: interfaces.HintHeadroom, Amount: amount})
			case 2:
				hs = append(hs, interfaces.Hint{Kind: interfaces.HintSLOAtRisk, Shards: shardIDs("slo")})
			default:
				kind := interfaces.ConstraintKind(rapid.IntRange(0, 6).Draw(t, "ckind"))
				who := ch.ID
				if rapid.Bool().Draw(t, "other") {
					who = v.Children[rapid.IntRange(0, nc-1).Draw(t, "who")].ID
				}
				hs = append(hs, interfaces.Hint{Kind: interfaces.HintConstraint, Constraint: &interfaces.Constraint{Kind: kind, Shards: shardIDs("prop"),
					Children: []interfaces.ChildID{who}, Limit: amount, Max: rapid.IntRange(0, 3).Draw(t, "pmax")}})
			}
		}
		v.Reports[ch.ID] = interfaces.Report{Child: ch.ID, Hints: hs}
	}
	var mem Memory
	for k := rapid.IntRange(0, 5).Draw(t, "held"); k > 0; k-- {
		mem.Held = append(mem.Held, Held{Shard: interfaces.ShardID(fmt.Sprintf("s%d", rapid.IntRange(0, ns+1).Draw(t, "hs"))),
			Child: v.Children[rapid.IntRange(0, nc-1).Draw(t, "hc")].ID, Until: t0.Add(time.Duration(rapid.IntRange(0, 7200).Draw(t, "until")) * time.Second)})
	}
	return v, mem
}

// TestDeriveKeepsRoom checks, over generated views whose active children can
// hold the total load, that the derived constraints
//
//  1. are accepted by the balancer (no unknown shard or child, valid limits);
//  2. leave the active children, with their capacities capped by every derived
//     capacity limit, at least the total load in every resource;
//  3. give every shard named in a derived allowed rule an active child in that
//     rule that admits it by its own rules and either holds it already or has
//     room for it under the capped capacities;
//  4. name no child in an allowed rule the shard is held away from;
//  5. are deterministic (the same view and memory give the same result).
//
// This is the honest invariant: cooperation never takes away more room than
// the load needs, and never strands a shard it moves. It does not claim that a
// view that is hard to pack shard by shard becomes any easier.
func TestDeriveKeepsRoom(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v, mem := genView(t)
		d, err := Derive(v, Config{Hold: time.Duration(rapid.IntRange(0, 3600).Draw(t, "hold")) * time.Second}, mem)
		if err != nil {
			t.Fatal(err)
		}
		vv := *v
		vv.Constraints = d.Constraints
		if _, err := balancer.FromView(&vv, balancer.ViewOptions{}); err != nil {
			t.Fatalf("balancer refuses the derived constraints: %v\n%+v", err, d.Constraints)
		}
		eff := map[interfaces.ChildID]interfaces.Load{}
		for _, c := range v.Children {
			if c.State == interfaces.ChildActive {
				eff[c.ID] = c.Capacity
			}
		}
		for _, c := range d.Constraints {
			if c.Kind != interfaces.ConstraintCapacity {
				continue
			}
			for _, id := range c.Children {
				e, ok := eff[id]
				if !ok {
					continue
				}
				for _, r := range []interfaces.Resource{interfaces.CPU, interfaces.Mem} {
					if l := c.Limit.Get(r); l > 0 && l < e.Get(r) {
						e = e.With(r, l)
					}
				}
				eff[id] = e
			}
		}
		var total, room interfaces.Load
		for _, s := range v.Shards {
			total = total.Add(s.Load)
		}
		for _, e := range eff {
			room = room.Add(e)
		}
		if room.CPU < total.CPU*(1-1e-9) || room.Mem < total.Mem*(1-1e-9) {
			t.Fatalf("effective room %+v below the load %+v\n%+v", room, total, d.Constraints)
		}
		st := project(v)
		away := map[[2]string]bool{}
		for _, h := range d.Memory.Held {
			away[[2]string{string(h.Shard), string(h.Child)}] = true
		}
		for _, c := range d.Constraints {
			if c.Kind != interfaces.ConstraintAllowed {
				continue
			}
			for _, s := range c.Shards {
				i := st.shardIdx[s]
				ok := false
				for _, id := range c.Children {
					if away[[2]string{string(s), string(id)}] {
						t.Fatalf("%s allowed on %s, which it is held away from", s, id)
					}
					ch := st.childIdx[id]
					on := st.owner[i] == ch
					if st.admits(i, ch, on) == "" && (on || st.fits(ch, v.Shards[i].Load, eff[id])) {
						ok = true
					}
				}
				if !ok {
					t.Fatalf("shard %s stranded by %+v", s, c)
				}
			}
		}
		d2, err := Derive(v, Config{Hold: 0}, mem)
		if err != nil {
			t.Fatal(err)
		}
		d3, _ := Derive(v, Config{Hold: 0}, mem)
		if !reflect.DeepEqual(d2, d3) {
			t.Fatal("Derive is not deterministic")
		}
	})
}

// ChildHints never errs on a valid config, names only shards of the view, and
// sheds only shards placed above target on a child.
func TestChildHintsProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v, _ := genView(t)
		hs, err := ChildHints(v, Config{})
		if err != nil {
			t.Fatal(err)
		}
		known := map[interfaces.ShardID]bool{}
		for _, s := range v.Shards {
			known[s.ID] = true
		}
		heads := 0
		for _, h := range hs {
			for _, s := range h.Shards {
				if !known[s] {
					t.Fatalf("hint names unknown shard %s: %+v", s, h)
				}
			}
			if h.Kind == interfaces.HintHeadroom {
				heads++
				if err := interfaces.ValidateLoad("amount", h.Amount); err != nil {
					t.Fatal(err)
				}
			}
			if h.Reason == "" {
				t.Fatalf("hint without a reason: %+v", h)
			}
		}
		if heads != 1 {
			t.Fatalf("want exactly one headroom hint, got %d", heads)
		}
		hs2, _ := ChildHints(v, Config{})
		if !reflect.DeepEqual(hs, hs2) {
			t.Fatal("ChildHints is not deterministic")
		}
	})
}
