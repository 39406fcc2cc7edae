package tierd_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/hostagent"
	"github.com/strata-sched/strata/coordinator/hostagent/driver/synthetic"
	"github.com/strata-sched/strata/coordinator/hostd"
	"github.com/strata-sched/strata/coordinator/tierd"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/testutil"
)

// The fair decoupled baseline on the real thing (issue 24): region-a has three
// hosts of 4 cpu (12 in all), region-b one of 16. Two shards of 6 cpu fit no
// host of region-a; its summed capacity has room for one. In decoupled mode
// (no hints) the regions report their capacity shape with every report, and
// the global tier keeps both shards in region-b, where they run.
func TestDecoupledGlobalKnowsTheRegionsCapacityShape(t *testing.T) {
	dir := t.TempDir()
	tier := func(tierName, instance string, parent []string) *tierd.Daemon {
		cfg := tierd.Config{Tier: tierName, Instance: instance, NodeID: instance + "-1", DataDir: filepath.Join(dir, instance),
			RaftAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", Bootstrap: true, Parent: parent,
			Interval: 200 * time.Millisecond, LeaseTTL: 3 * time.Second, Grace: 500 * time.Millisecond,
			Integration: tierd.IntegrationDecoupled}
		d, err := tierd.Start(cfg.Defaults(), io.Discard)
		if err != nil {
			t.Fatalf("%s: %v", instance, err)
		}
		t.Cleanup(func() { d.Close() })
		testutil.Until(t, instance+": leader", 10*time.Second, d.IsLeader)
		return d
	}
	global := tier(interfaces.TierGlobal, "global", nil)
	hosts := map[string]*hostd.Daemon{}
	for _, r := range []struct {
		name  string
		hosts int
		cpu   float64
	}{{"region-a", 3, 4}, {"region-b", 1, 16}} {
		rd := tier(interfaces.TierRegion, r.name, []string{global.GRPCAddr()})
		for h := 1; h <= r.hosts; h++ {
			name := fmt.Sprintf("%s-host-%d", r.name, h)
			if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
				t.Fatal(err)
			}
			drv, err := synthetic.New(synthetic.Config{Clock: hostagent.WallClock{}, Seed: uint64(h)})
			if err != nil {
				t.Fatal(err)
			}
			hd, err := hostd.Start(hostd.Config{Host: interfaces.ChildID(name), Parents: []string{rd.GRPCAddr()},
				DataDir: filepath.Join(dir, name), Capacity: interfaces.Load{CPU: r.cpu, Mem: 32 << 30, Tasks: 100}, Driver: drv}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { hd.Close() })
			hosts[name] = hd
		}
	}
	a := adminClient(t, global.GRPCAddr())
	if _, err := a.SubmitJob(context.Background(), &wire.SubmitJobRequest{Job: &wire.JobSpec{Id: "big", Parallelism: 2,
		ShardTemplate: &wire.Shard{Load: &wire.Load{Cpu: 6, Tasks: 1}}}}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "both shards run on region-b's host", 30*time.Second, func() error {
		on := hosts["region-b-host-1"].Agent().Running()
		if len(on) != 2 {
			return fmt.Errorf("region-b-host-1 runs %v", on)
		}
		for name, h := range hosts {
			if name != "region-b-host-1" && len(h.Agent().Running()) > 0 {
				return fmt.Errorf("%s runs %v", name, h.Agent().Running())
			}
		}
		return nil
	})
}
