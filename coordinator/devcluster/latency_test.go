package devcluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/coordinator/hostagent/driver/synthetic"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

// latencyRun starts one region of two 8-cpu hosts whose synthetic drivers
// execute their shards' work (execution on): host-1 splits each shard's
// work into up to 200 items/s, host-2 into 10, so at the same cpu load an
// item on host-2 takes 20× as long (its service time). Eight shards of 0.8
// cpu with a 50 ms SLO are placed, balanced by cpu (4 + 4); the run then
// lets the region's rounds act on the hosts' reports and returns the worst
// measured shard p99 over a few seconds, and the goal of the moves.
func latencyRun(t *testing.T, regionGoals string) (worst time.Duration, goals map[string]int, slowShards int) {
	cfg := interfaces.PolicyConfig{}
	if regionGoals != "" {
		cfg["goals"] = regionGoals
	}
	c, err := Start(Options{Dir: t.TempDir(), Regions: 1, HostsPerRegion: 2, Interval: 200 * time.Millisecond, LeaseTTL: 3 * time.Second,
		HostCapacity: interfaces.Load{CPU: 8, Mem: 64 << 30, Tasks: 100},
		RegionPolicy: "local", RegionPolicyConfig: cfg,
		HostDriver: func(host string) synthetic.Config {
			items := 200.0
			if host == "region-1-host-2" {
				items = 10
			}
			return synthetic.Config{Cores: 8, MaxItemRate: items, Window: 2 * time.Second}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	a := admin(t, c.Global.GRPCAddr())
	const n = 8
	if _, err := a.SubmitJob(ctx, &wire.SubmitJobRequest{Job: &wire.JobSpec{Id: "q", Parallelism: n,
		ShardTemplate: &wire.Shard{Load: &wire.Load{Cpu: 0.8, Tasks: 1}, InputRate: 100, LatencySloNanos: int64(50 * time.Millisecond)}}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "placed", 30*time.Second, func() error { return allRunningOnce(c, n) })
	// Let the reports come in and the rounds act, then measure.
	time.Sleep(4 * time.Second)
	if err := c.Settle(2*time.Second, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // a full measurement window on the final placement
	for h, d := range c.Drivers {
		for id, l := range d.Measure() {
			if l.LatencyP99 > worst {
				worst = l.LatencyP99
			}
			if h == "region-1-host-2" {
				_ = id
				slowShards++
			}
		}
	}
	ra := admin(t, c.Regions["region-1"].GRPCAddr())
	goals = map[string]int{}
	for i := 0; i < n; i++ {
		ex, err := ra.Explain(ctx, &wire.ExplainRequest{Shard: fmt.Sprintf("q/%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ex.History {
			if m := e.GetMove(); m != nil && m.GetFrom() != "" {
				goals[m.GetGoal()]++
				if m.GetGoal() == balancer.GoalSLO {
					t.Logf("explain q/%d: %s → %s: %s (goal %s)", i, m.GetFrom(), m.GetTo(), m.GetReason(), m.GetGoal())
				}
			}
		}
	}
	if err := c.CloseAndCheckLedger(); err != nil {
		t.Error(err)
	}
	return worst, goals, slowShards
}

// The done-when test of issue 24's latency objective: two hosts equally
// balanced by cpu but with different service times. The region fits each
// host's latency from its reports; with the default goals (latency_slo above
// balance) it moves shards off the slow host, the measured p99 is lower than
// with balance alone, and explain names the latency goal.
func TestLatencyAwarePlacementLowersMeasuredP99(t *testing.T) {
	if testing.Short() {
		t.Skip("two clusters with executing hosts")
	}
	aware, goals, onSlow := latencyRun(t, "")
	bal, balGoals, balSlow := latencyRun(t, "threshold,balance_minmax,balance_sq,latency,shortfall,locality,migration")
	t.Logf("latency-aware: worst shard p99 %v, %d shards on the slow host, moves by goal %v", aware, onSlow, goals)
	t.Logf("balance alone: worst shard p99 %v, %d shards on the slow host, moves by goal %v", bal, balSlow, balGoals)
	if goals[balancer.GoalSLO] == 0 {
		t.Errorf("no move explained by the %s goal: %v", balancer.GoalSLO, goals)
	}
	if !(aware < bal) {
		t.Errorf("latency-aware worst p99 %v is not below balance alone's %v", aware, bal)
	}
}
