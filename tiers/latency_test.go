package tiers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/interfaces"
)

// twoHosts: equal cpu capacity and load; fast reports a p99 of 8 ms, slow 60
// ms at the same utilization (0.5); every shard has an SLO of 40 ms.
func twoHosts(seq uint64) *interfaces.View {
	v := &interfaces.View{Tier: interfaces.TierRegion, Instance: "eu", Now: time.Date(2026, 1, 1, 0, 0, int(seq), 0, time.UTC), Seed: 1,
		Reports: map[interfaces.ChildID]interfaces.Report{}}
	for _, h := range []string{"fast", "slow"} {
		c := interfaces.Load{CPU: 8}
		v.Children = append(v.Children, interfaces.Child{ID: interfaces.ChildID(h), Tier: interfaces.TierHost, Capacity: c})
		p99 := 8 * time.Millisecond
		if h == "slow" {
			p99 = 60 * time.Millisecond
		}
		v.Reports[interfaces.ChildID(h)] = interfaces.Report{Child: interfaces.ChildID(h), Epoch: seq, Capacity: c, Used: interfaces.Load{CPU: 4}, LatencyP99: p99}
	}
	for i := 0; i < 8; i++ {
		h := "fast"
		if i%2 == 1 {
			h = "slow"
		}
		id := interfaces.ShardID(fmt.Sprintf("s/%d", i))
		v.Shards = append(v.Shards, interfaces.Shard{ID: id, Job: "s", Load: interfaces.Load{CPU: 1}, LatencySLO: 40 * time.Millisecond})
		v.Assignments = append(v.Assignments, interfaces.Assignment{Shard: id, Child: interfaces.ChildID(h), Epoch: 1})
	}
	return v
}

func TestLatencySLOGoalMovesOffTheSlowHost(t *testing.T) {
	pol, err := New("local", interfaces.PolicyConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var plan interfaces.Plan
	for seq := uint64(1); seq <= 3; seq++ { // three reports: calibrated from them
		plan, err = pol.Plan(context.Background(), twoHosts(seq))
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(plan.Moves) == 0 {
		t.Fatal("no move: the latency_slo goal did not act on the slow host's shards")
	}
	for _, m := range plan.Moves {
		if m.From != "slow" || m.To != "fast" || m.Goal != balancer.GoalSLO || !strings.Contains(m.Reason, "latency_slo") {
			t.Fatalf("move %+v: want slow → fast driven by latency_slo", m)
		}
	}
	// Balance alone (the goal list without latency_slo) keeps the even split.
	bal, err := New("local", interfaces.PolicyConfig{"goals": "threshold,balance_minmax,balance_sq,latency"})
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 3; seq++ {
		plan, err = bal.Plan(context.Background(), twoHosts(seq))
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(plan.Moves) != 0 {
		t.Fatalf("balance alone moved: %+v", plan.Moves)
	}
	// Before any child is measured, the goal is left out: no move.
	fresh, _ := New("local", interfaces.PolicyConfig{})
	v := twoHosts(1)
	v.Reports = nil
	if plan, err = fresh.Plan(context.Background(), v); err != nil || len(plan.Moves) != 0 {
		t.Fatalf("unmeasured: %v, moves %+v", err, plan.Moves)
	}
}

func TestGoalsConfig(t *testing.T) {
	for _, tc := range []struct{ cfg, want string }{
		{"threshold,nope", `key "goals": goals[1]: unknown goal "nope" (known: threshold, balance_minmax`},
		{"threshold,threshold", `goals[1]: "threshold" is listed twice`},
		{"latency_slo:-1", `goals[0]: weight "-1" of latency_slo must be a finite number > 0`},
	} {
		_, err := New("local", interfaces.PolicyConfig{"goals": tc.cfg})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("goals %q: error %v, want it to contain %q", tc.cfg, err, tc.want)
		}
	}
	if _, err := New("local", interfaces.PolicyConfig{"latency_samples": "4"}); err == nil || !strings.Contains(err.Error(), `key "latency_samples": must be at least 8`) {
		t.Errorf("latency_samples 4: %v", err)
	}
	gs, err := ParseGoals("threshold, latency_slo:2 ,balance_sq")
	if err != nil || len(gs) != 3 || gs[1].Kind != balancer.GoalSLO || gs[1].Weight != 2 || gs[1].Priority != 2 {
		t.Fatalf("ParseGoals: %+v, %v", gs, err)
	}
}
