package devcluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/interfaces/wire"
)

// When 40% of a region's hosts vanish at once, the mass-failure guard holds:
// nobody is declared failed, nothing stampedes, and the alert is in the status.
func TestMassFailureGuard(t *testing.T) {
	c, err := Start(Options{Dir: t.TempDir(), Regions: 1, HostsPerRegion: 5, Interval: 200 * time.Millisecond, LeaseTTL: 2 * time.Second, Grace: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	a := admin(t, c.Global.GRPCAddr())
	if _, err := a.SubmitJob(ctx, &wire.SubmitJobRequest{Job: &wire.JobSpec{Id: "g", Parallelism: 40, ShardTemplate: &wire.Shard{Load: &wire.Load{Cpu: 0.25, Tasks: 1}}}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "placed", 30*time.Second, func() error { return allRunningOnce(c, 40) })
	if err := c.Settle(1500*time.Millisecond, 30*time.Second); err != nil {
		t.Fatal(err) // the counts below must not change by rebalancing
	}
	ra := admin(t, c.Regions["region-1"].GRPCAddr())
	status := func() (*wire.InstanceStatus, error) {
		st, err := ra.Status(ctx, &wire.StatusRequest{})
		if err != nil {
			return nil, err
		}
		return st.Tiers[0].Instances[0], nil
	}
	before, err := status()
	if err != nil {
		t.Fatal(err)
	}
	shardsOn := map[string]int64{}
	for _, ch := range before.Children {
		shardsOn[ch.Child.GetId()] = ch.Shards
	}
	// Two of five hosts go silent at once.
	for _, h := range []string{"region-1-host-1", "region-1-host-2"} {
		if err := c.Hosts[h].Close(); err != nil {
			t.Fatal(err)
		}
		delete(c.Hosts, h)
	}
	waitFor(t, "guard engaged", 20*time.Second, func() error {
		st, err := status()
		if err != nil {
			return err
		}
		for _, al := range st.Alerts {
			if strings.HasPrefix(al, "mass_failure") {
				return nil
			}
		}
		return fmt.Errorf("no mass_failure alert yet: %v", st.Alerts)
	})
	// Well past lease + grace: still nobody failed, no shard moved off them.
	time.Sleep(2 * time.Second)
	st, err := status()
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range st.Children {
		if ch.Child.GetState() == wire.ChildState_CHILD_STATE_FAILED {
			t.Errorf("%s declared failed while the guard holds", ch.Child.GetId())
		}
		if id := ch.Child.GetId(); ch.Shards != shardsOn[id] {
			t.Errorf("%s: %d shards, %d before: shards moved while the guard holds", id, ch.Shards, shardsOn[id])
		}
	}
	if len(st.Alerts) == 0 {
		t.Error("the alert went away while the hosts are still gone")
	}
	if err := c.CloseAndCheckLedger(); err != nil {
		t.Error(err)
	}
}
