package tierd_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strata-sched/strata/coordinator/hostagent"
	"github.com/strata-sched/strata/coordinator/hostagent/driver/synthetic"
	"github.com/strata-sched/strata/coordinator/hostd"
	"github.com/strata-sched/strata/coordinator/tierd"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/testutil"
)

// labelCluster is a global tier and two regions, both announcing disk=ssd, in
// one process: region-a has one ssd host of three, region-b three. Every tier
// runs integration mode `mode`.
type labelCluster struct {
	global  *tierd.Daemon
	regions map[string]*tierd.Daemon
	hosts   map[string]*hostd.Daemon
	host    map[string]string // host → region
}

func startLabelCluster(t *testing.T, mode string) *labelCluster {
	t.Helper()
	dir := t.TempDir()
	c := &labelCluster{regions: map[string]*tierd.Daemon{}, hosts: map[string]*hostd.Daemon{}, host: map[string]string{}}
	tier := func(tierName, instance string, parent []string) *tierd.Daemon {
		cfg := tierd.Config{Tier: tierName, Instance: instance, NodeID: instance + "-1", DataDir: filepath.Join(dir, instance),
			RaftAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", Bootstrap: true, Parent: parent,
			Interval: 200 * time.Millisecond, LeaseTTL: 3 * time.Second, Grace: 500 * time.Millisecond,
			Integration: mode}
		if tierName == interfaces.TierRegion {
			cfg.Labels = map[string]string{"disk": "ssd"}
		}
		d, err := tierd.Start(cfg.Defaults(), io.Discard)
		if err != nil {
			t.Fatalf("%s: %v", instance, err)
		}
		t.Cleanup(func() { d.Close() })
		testutil.Until(t, instance+": leader", 10*time.Second, d.IsLeader)
		return d
	}
	c.global = tier(interfaces.TierGlobal, "global", nil)
	for _, r := range []string{"region-a", "region-b"} {
		c.regions[r] = tier(interfaces.TierRegion, r, []string{c.global.GRPCAddr()})
		for h := 1; h <= 3; h++ {
			name := fmt.Sprintf("%s-host-%d", r, h)
			labels := map[string]string{}
			if r == "region-b" || h == 1 {
				labels["disk"] = "ssd"
			}
			if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
				t.Fatal(err)
			}
			drv, err := synthetic.New(synthetic.Config{Clock: hostagent.WallClock{}, Seed: uint64(h)})
			if err != nil {
				t.Fatal(err)
			}
			hd, err := hostd.Start(hostd.Config{Host: interfaces.ChildID(name), Parents: []string{c.regions[r].GRPCAddr()},
				DataDir: filepath.Join(dir, name), Capacity: interfaces.Load{CPU: 8, Mem: 32 << 30, Tasks: 100}, Driver: drv, Labels: labels}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { hd.Close() })
			c.hosts[name] = hd
			c.host[name] = r
		}
	}
	return c
}

func adminClient(t *testing.T, addr string) wire.AdminClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return wire.NewAdminClient(cc)
}

// running maps each running shard to the hosts that run it.
func (c *labelCluster) running() map[interfaces.ShardID][]string {
	out := map[interfaces.ShardID][]string{}
	for name, h := range c.hosts {
		for _, s := range h.Agent().Running() {
			out[s] = append(out[s], name)
		}
	}
	return out
}

const dbShards = 12

// waitRegions waits until the global tier sees both regions with their three
// hosts' capacity and the disk=ssd label: a job submitted earlier would all
// go to the first region that came up.
func waitRegions(t *testing.T, a wire.AdminClient) {
	t.Helper()
	waitUntil(t, "the global tier sees both regions whole", 20*time.Second, func() error {
		st, err := a.Status(context.Background(), &wire.StatusRequest{})
		if err != nil {
			return err
		}
		ok := 0
		for _, tier := range st.GetTiers() {
			for _, in := range tier.GetInstances() {
				for _, ch := range in.GetChildren() {
					if ch.GetChild().GetCapacity().GetCpu() == 24 && ch.GetChild().GetLabels()["disk"] == "ssd" {
						ok++
					}
				}
			}
		}
		if ok != 2 {
			return fmt.Errorf("%d of 2 regions whole", ok)
		}
		return nil
	})
}

// submitDB submits job db: 12 shards of 1.5 cpu that need disk=ssd (18 cpu;
// region-a's only ssd host has 8).
func submitDB(t *testing.T, a wire.AdminClient) {
	t.Helper()
	if _, err := a.SubmitJob(context.Background(), &wire.SubmitJobRequest{Job: &wire.JobSpec{Id: "db", Parallelism: dbShards,
		ShardTemplate: &wire.Shard{Load: &wire.Load{Cpu: 1.5, Tasks: 1}, Constraints: &wire.ShardConstraints{Labels: map[string]string{"disk": "ssd"}}}}}); err != nil {
		t.Fatal(err)
	}
}

// history returns the global tier's placement history of every db shard.
func history(t *testing.T, a wire.AdminClient) map[string]*wire.ExplainResponse {
	t.Helper()
	out := map[string]*wire.ExplainResponse{}
	for i := 0; i < dbShards; i++ {
		id := fmt.Sprintf("db/%d", i)
		ex, err := a.Explain(context.Background(), &wire.ExplainRequest{Shard: id})
		if err != nil {
			t.Fatal(err)
		}
		out[id] = ex
	}
	return out
}

// firstInA counts the shards whose first placement by the global tier was
// region-a, and lists the shards moved from region-a to region-b.
func firstInA(h map[string]*wire.ExplainResponse) (int, []string) {
	first := 0
	var moved []string
	for id, ex := range h {
		for k, e := range ex.GetHistory() {
			m := e.GetMove()
			if k == 0 && m.GetTo() == "region-a" {
				first++
			}
			if m.GetFrom() == "region-a" && m.GetTo() == "region-b" && (len(moved) == 0 || moved[len(moved)-1] != id) {
				moved = append(moved, id)
			}
		}
	}
	return first, moved
}

var waitUntil = testutil.Eventually

// A region that cannot spread what the global tier gives it: db's shards
// need disk=ssd, and region-a has one ssd host (8 cpu) for its half of 18 cpu.
// Collaborative: region-a asks to shed the shards it cannot place or keep
// below its 80% target, the global tier moves them to region-b, and the
// global tier's explanation of a moved shard says why. Decoupled: the global
// tier never moves a db shard between regions, and region-a's ssd host stays
// overloaded or shards stay unplaced.
func TestCollaborativeGlobalMovesWhatARegionCannotSpread(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 3 tier daemons and 6 hosts")
	}
	c := startLabelCluster(t, tierd.IntegrationCollaborative)
	a := adminClient(t, c.global.GRPCAddr())
	waitRegions(t, a)
	submitDB(t, a)
	ssd := "region-a-host-1"
	waitUntil(t, "every db shard running once, region-a's ssd host below its 80% target", 45*time.Second, func() error {
		r := c.running()
		for s, hs := range r {
			if len(hs) > 1 {
				return fmt.Errorf("%s runs on %v", s, hs)
			}
		}
		if len(r) != dbShards {
			return fmt.Errorf("%d of %d shards run", len(r), dbShards)
		}
		if n := len(c.hosts[ssd].Agent().Running()); float64(n)*1.5 > 0.8*8 {
			return fmt.Errorf("%s runs %d shards (%.1f of 8 cpu)", ssd, n, float64(n)*1.5)
		}
		return nil
	})
	h := history(t, a)
	first, moved := firstInA(h)
	// Precondition: the global tier first gave region-a a good share of them (at
	// least 4 of 12; how many depends on when region-b's first report lands).
	if first < 4 {
		t.Fatalf("precondition: the global tier first placed only %d db shards in region-a", first)
	}
	if len(moved) == 0 {
		t.Fatalf("no db shard moved from region-a to region-b (first placed in region-a: %d)", first)
	}
	// The shards region-a shed carry the reason in the global tier's
	// explanation (others may have moved for balance afterwards).
	explained := ""
	for _, id := range moved {
		text := strings.Join(h[id].GetFindings(), "\n")
		if strings.Contains(text, "cooperation") && strings.Contains(text, "region-a shed it") {
			explained = id
			t.Logf("first placed in region-a: %d; moved to region-b: %v\nexplain %s at the global tier:\n%s", first, moved, id, text)
			break
		}
	}
	if explained == "" {
		for _, id := range moved {
			t.Logf("explain %s: %q", id, h[id].GetFindings())
		}
		t.Fatalf("no shard moved from region-a to region-b (%v) is explained as shed by region-a", moved)
	}
}

func TestDecoupledGlobalLeavesWhatARegionCannotSpread(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 3 tier daemons and 6 hosts")
	}
	c := startLabelCluster(t, tierd.IntegrationDecoupled)
	a := adminClient(t, c.global.GRPCAddr())
	waitRegions(t, a)
	submitDB(t, a)
	ssd := "region-a-host-1"
	var first int
	waitUntil(t, "the global tier placed every db shard", 30*time.Second, func() error {
		first, _ = firstInA(history(t, a))
		placed := 0
		for _, ex := range history(t, a) {
			if len(ex.GetPlacement()) > 0 {
				placed++
			}
		}
		if placed != dbShards {
			return fmt.Errorf("%d of %d placed", placed, dbShards)
		}
		return nil
	})
	if first < 4 { // as in the collaborative test
		t.Fatalf("precondition: the global tier first placed only %d db shards in region-a", first)
	}
	// As long as the collaborative test allows itself, and then some.
	time.Sleep(15 * time.Second)
	_, moved := firstInA(history(t, a))
	if len(moved) > 0 {
		t.Fatalf("decoupled: the global tier moved %v from region-a to region-b", moved)
	}
	n := len(c.hosts[ssd].Agent().Running())
	if run := len(c.running()); float64(n)*1.5 <= 0.8*8 && run == dbShards {
		t.Fatalf("decoupled: %s runs %d shards and all %d run: region-a was not overloaded, the test proves nothing", ssd, n, run)
	}
	t.Logf("decoupled: first placed in region-a %d, %s runs %d (%.1f of 8 cpu), %d of %d shards run", first, ssd, n, float64(n)*1.5, len(c.running()), dbShards)
}
