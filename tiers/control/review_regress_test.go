package control

import (
	"math"
	"testing"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// Regression tests from a review of the control loop's input handling (each
// failed before its fix).

// A child reporting a p99 at the int64 limit (the wire now refuses more than
// 24h; a view built in process may still hold it) must look as bad as
// possible to the controller, not unknown: its smoothed value wrapped negative.
func TestHugeP99IsNotIgnored(t *testing.T) {
	loads := []float64{1, 1, 1, 1, 1, 1, 1, 1}
	owner := []int{0, 0, 0, 0, 1, 1, 1, 1}
	v := tier(2, 16, loads, owner)
	for i := range v.Shards {
		v.Shards[i].LatencySLO = 100 * time.Millisecond
	}
	v.Reports[childID(0)] = interfaces.Report{Child: childID(0), Epoch: 1, LatencyP99: time.Duration(math.MaxInt64)}
	v.Reports[childID(1)] = interfaces.Report{Child: childID(1), Epoch: 1, LatencyP99: 10 * time.Millisecond}
	c := mustNew(t, DefaultConfig())
	d, err := c.Step(Input{Now: t0, View: v})
	if err != nil {
		t.Fatalf("Step: %v", err)
	}
	if got := c.SmoothedP99(childID(0)); got <= 0 {
		t.Errorf("SmoothedP99(h00) = %v, want > 0 (reported %v)", got, time.Duration(math.MaxInt64))
	}
	if d.Mode != ModePeriodic || d.Record.SLO <= 0 {
		t.Errorf("mode %v, SLO error %v, why %q: want a periodic round driven by h00's p99", d.Mode, d.Record.SLO, d.Record.Why)
	}
}

// Per-value validation (finite, ≥ 0) did not keep sums finite: two shard
// loads of 1e308 on one child made its load +Inf, and the controller read
// an infinitely overloaded tier as "within the dead band". Loads are now
// bounded (interfaces.MaxQuantity), so the view is refused.
func TestLoadSumOverflowIsRefused(t *testing.T) {
	v := tier(3, 16, []float64{1e308, 1e308, 1}, []int{0, 0, 1})
	c := mustNew(t, DefaultConfig())
	d, err := c.Step(Input{Now: t0, View: v})
	if err == nil && d.Mode == ModeHold {
		t.Fatalf("Step accepted the view and held (%q, error %v, imbalance %v, util %v): an overflowing load was neither refused nor acted on",
			d.Record.Why, d.Record.Error, d.Record.Imbalance, d.Record.Util)
	}
}

// Duplicate entries of one shard in one child's report were counted as many
// shards: a child that repeated its one fast shard made its honest peers look
// like stragglers and got their shards evicted (the wire refuses such a report
// now; the policy counts a shard once all the same).
func TestStragglerCountsAShardOnce(t *testing.T) {
	ps := mustPolicies(t, []string{"straggler"}, map[string]PolicySettings{"straggler": {"window": "0s"}})
	v := rated(3, 6, nil) // h00: s000,s003  h01: s001,s004  h02: s002,s005, all at 100/s
	// h00 reports s000 fifty times at 1000/s (and s003 not at all).
	r := interfaces.Report{Child: childID(0), Epoch: 1}
	for i := 0; i < 50; i++ {
		r.Shards = append(r.Shards, interfaces.ShardLoad{Shard: shardID(0), Load: interfaces.Load{CPU: 1}, Rate: 1000, InputRate: 100})
	}
	v.Reports[childID(0)] = r
	o := run(t, ps, PolicyInput{Now: t0, View: v})
	if len(o.Actions.Evict) != 0 {
		t.Fatalf("evicted %v from honest children on the strength of duplicated entries (findings %+v)", o.Actions.Evict, o.Findings)
	}
}

// A large (finite, accepted by Validate) Kp overflowed the float→int
// conversion of the budget: the round got MinMoves instead of MaxMoves.
func TestLargeKpSaturatesTheBudget(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Kp = 1e19
	loads := make([]float64, 20)
	owner := make([]int, 20)
	for i := range loads {
		loads[i] = 1
	}
	v := tier(4, 16, loads, owner) // everything on h00
	c := mustNew(t, cfg)
	d, err := c.Step(Input{Now: t0, View: v})
	if err != nil {
		t.Fatal(err)
	}
	if d.Mode != ModePeriodic || d.MaxMoves != min(cfg.MaxMoves, cfg.InitialConcurrency) {
		t.Errorf("mode %v, budget %d (need %d): want the saturated budget %d", d.Mode, d.MaxMoves, d.Record.Need, min(cfg.MaxMoves, cfg.InitialConcurrency))
	}
}

// The bytes cap in Admit overflowed int64: two moves of 2^62 state bytes each
// passed a 2^62 cap.
func TestAdmitMaxBytesDoesNotOverflow(t *testing.T) {
	d := Decision{Mode: ModePeriodic, MaxMoves: 10, MaxBytes: 1 << 62}
	v := tier(2, 16, []float64{1, 1}, []int{0, 0})
	v.Shards[0].StateBytes, v.Shards[1].StateBytes = 1<<62, 1<<62
	plan := interfaces.Plan{Moves: []interfaces.Move{{Shard: shardID(0), From: childID(0), To: childID(1)}, {Shard: shardID(1), From: childID(0), To: childID(1)}}}
	acc, _ := d.Admit(v, plan)
	if len(acc) > 1 {
		t.Errorf("admitted %d moves of 2^62 bytes each under a 2^62-byte cap", len(acc))
	}
}
