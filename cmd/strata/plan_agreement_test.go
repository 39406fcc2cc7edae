package main

import (
	"testing"

	"github.com/strata-sched/strata/sim"
)

// TestAgreement: a tier plan's moves are matched with the simulation's first
// window of the same policy by shard and destination — hosts for a region's
// plan (only moves into or out of that region count as the simulation's),
// regions for the global tier's (only moves between regions count).
func TestAgreement(t *testing.T) {
	first := []sim.PlanMove{
		{Shard: "a", FromRegion: "r1", From: "h1", ToRegion: "r1", To: "h2"}, // within r1
		{Shard: "b", FromRegion: "r1", From: "h1", ToRegion: "r1", To: "h3"}, // within r1, another host than planned
		{Shard: "c", FromRegion: "r1", From: "h1", ToRegion: "r2", To: "h9"}, // r1 → r2
		{Shard: "d", FromRegion: "r2", From: "h8", ToRegion: "r2", To: "h9"}, // within r2
		{Shard: "f", FromRegion: "r3", From: "h5", ToRegion: "r3", To: "h6"}, // within r3
	}
	predicted := []predictedJSON{{Policy: "other", FirstMoves: []sim.PlanMove{{Shard: "a", FromRegion: "r1", ToRegion: "r1", To: "h4"}}}, {Policy: "live", FirstMoves: first}}
	region := planJSON{Tier: "region", Instance: "r1", Moves: []planMoveJSON{
		{Shard: "a", From: "h1", To: "h2"}, // same
		{Shard: "b", From: "h1", To: "h2"}, // same shard, another host
		{Shard: "e", From: "h1", To: "h2"}, // not in the simulation
	}}
	if got := agreement(region, "live", predicted); got.PlanMoves != 3 || got.SameInSim != 1 || got.SimMoves != 3 || got.Tier != "region" || got.Instance != "r1" {
		t.Errorf("region plan: %+v; want 3 plan moves, 1 the same, 3 simulated moves touching r1", got)
	}
	global := planJSON{Tier: "global", Instance: "global", Moves: []planMoveJSON{
		{Shard: "c", From: "r1", To: "r2"}, // same
		{Shard: "f", From: "r3", To: "r2"}, // the simulation kept f in r3: not the same
	}}
	if got := agreement(global, "live", predicted); got.PlanMoves != 2 || got.SameInSim != 1 || got.SimMoves != 1 {
		t.Errorf("global plan: %+v; want 2 plan moves, 1 the same, 1 simulated move between regions", got)
	}
	if got := agreement(region, "absent", predicted); got.SameInSim != 0 || got.SimMoves != 0 {
		t.Errorf("a policy the simulation did not run: %+v", got)
	}
}
