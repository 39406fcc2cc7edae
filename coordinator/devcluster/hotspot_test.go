package devcluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

// One host's real load doubles (every shard on it now measures twice its declared
// load): the region sees it in the hosts' reports and moves shards off that host
// within a few control intervals, each move explained.
func TestRegionRelievesAHostWhoseLoadDoubled(t *testing.T) {
	c, err := Start(Options{Dir: t.TempDir(), Regions: 1, HostsPerRegion: 3, Interval: 200 * time.Millisecond, LeaseTTL: 3 * time.Second,
		HostCapacity: interfaces.Load{CPU: 20, Mem: 64 << 30, Tasks: 100}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	a := admin(t, c.Global.GRPCAddr())
	if _, err := a.SubmitJob(ctx, &wire.SubmitJobRequest{Job: &wire.JobSpec{Id: "hot", Parallelism: 30, ShardTemplate: &wire.Shard{Load: &wire.Load{Cpu: 1, Tasks: 1}}}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "placed", 30*time.Second, func() error { return allRunningOnce(c, 30) })
	// Let the placement settle (the periodic rounds balance the hosts).
	if err := c.Settle(1500*time.Millisecond, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	host := "region-1-host-1"
	before := c.Hosts[host].Agent().Running()
	if len(before) < 5 {
		t.Fatalf("%s runs only %d shards", host, len(before))
	}
	for _, s := range before {
		if err := c.Drivers[host].Scale(s, 2); err != nil {
			t.Fatal(err)
		}
	}
	doubled := time.Now()
	var moved string
	waitFor(t, "shards moved off the hot host", 20*time.Second, func() error {
		now := c.Hosts[host].Agent().Running()
		if len(now) >= len(before) {
			return fmt.Errorf("%s still runs %d shards", host, len(now))
		}
		still := map[string]bool{}
		for _, s := range now {
			still[string(s)] = true
		}
		for _, s := range before {
			if !still[string(s)] {
				moved = string(s)
			}
		}
		return allRunningOnce(c, 30)
	})
	took := time.Since(doubled)
	t.Logf("load doubled on %s: first shards moved off after %v (%.0f control intervals)", host, took.Round(10*time.Millisecond), took.Seconds()/0.2)
	ex, err := admin(t, c.Regions["region-1"].GRPCAddr()).Explain(ctx, &wire.ExplainRequest{Shard: moved})
	if err != nil {
		t.Fatal(err)
	}
	last := ex.History[len(ex.History)-1].GetMove()
	if last.GetFrom() != host || last.GetReason() == "" || !strings.Contains(last.GetReason()+last.GetGoal(), "balance") {
		t.Errorf("the move of %s is not explained as relieving %s: %+v", moved, host, last)
	}
	if err := c.CloseAndCheckLedger(); err != nil {
		t.Error(err)
	}
}
