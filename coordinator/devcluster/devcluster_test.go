package devcluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strata-sched/strata/coordinator/hostagent/ledger"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/testutil"
)

func admin(t *testing.T, addr string) wire.AdminClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return wire.NewAdminClient(cc)
}

// running returns, for every shard that runs on some host, the hosts it runs on.
func running(c *Cluster) map[interfaces.ShardID][]string {
	out := map[interfaces.ShardID][]string{}
	for name, h := range c.Hosts {
		for _, s := range h.Agent().Running() {
			out[s] = append(out[s], name)
		}
	}
	return out
}

var waitFor = testutil.Eventually

func allRunningOnce(c *Cluster, want int) error {
	r := running(c)
	for s, hosts := range r {
		if len(hosts) > 1 {
			return fmt.Errorf("shard %s runs on %v", s, hosts)
		}
	}
	if len(r) != want {
		return fmt.Errorf("%d of %d shards run", len(r), want)
	}
	return nil
}

func TestHierarchyPlacesDrainsAndRecovers(t *testing.T) {
	c, err := Start(Options{Dir: t.TempDir(), Log: testLog(t), Regions: 2, HostsPerRegion: 2, Interval: 200 * time.Millisecond, LeaseTTL: 2 * time.Second, Grace: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	a := admin(t, c.Global.GRPCAddr())

	const n = 60
	_, err = a.SubmitJob(ctx, &wire.SubmitJobRequest{Job: &wire.JobSpec{
		Id: "wordcount", Parallelism: n,
		ShardTemplate: &wire.Shard{Load: &wire.Load{Cpu: 0.25, Mem: 1 << 28, Tasks: 1}, StateBytes: 1 << 20},
	}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "all shards running exactly once", 30*time.Second, func() error {
		err := allRunningOnce(c, n)
		if err != nil {
			for name, r := range c.Regions {
				st, _ := admin(t, r.GRPCAddr()).ListShards(ctx, &wire.ListShardsRequest{})
				placed := 0
				for _, s := range st.GetShards() {
					if len(s.Placement) > 0 {
						placed++
					}
				}
				t.Logf("%s: %d shards, %d placed", name, len(st.GetShards()), placed)
			}
		}
		return err
	})

	// Both regions get work: the global tier balances its regions.
	waitFor(t, "both regions hold shards", 30*time.Second, func() error {
		st, err := a.Status(ctx, &wire.StatusRequest{})
		if err != nil {
			return err
		}
		for _, ch := range st.Tiers[0].Instances[0].Children {
			if ch.Shards == 0 {
				return fmt.Errorf("region %s has no shards", ch.Child.Id)
			}
			if ch.Address == "" {
				return fmt.Errorf("region %s has no address in status", ch.Child.Id)
			}
		}
		return allRunningOnce(c, n)
	})

	// Every daemon exports its metrics in the Prometheus format.
	waitFor(t, "metrics", 10*time.Second, func() error {
		for _, m := range []struct {
			addr  string
			names []string
		}{
			{c.Regions["region-1"].HTTPAddr(), []string{"strata_leader", "strata_shards_owned", "strata_moves_committed_total", "strata_sessions", "strata_solve_seconds", "strata_control_round_seconds"}},
			{c.Hosts["region-1-host-2"].HTTPAddr(), []string{"strata_host_shards_running", "strata_host_cpu_cores", "strata_host_mem_bytes"}},
		} {
			body, err := httpGet("http://" + m.addr + "/metrics")
			if err != nil {
				return err
			}
			for _, n := range m.names {
				if !strings.Contains(body, "\n"+n) {
					return fmt.Errorf("%s lacks %s", m.addr, n)
				}
			}
		}
		return nil
	})

	// Drain a host: it ends empty and everything still runs once.
	host := "region-1-host-1"
	ra := admin(t, c.Regions["region-1"].GRPCAddr())
	if _, err := ra.Drain(ctx, &wire.DrainRequest{Child: host}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "drained host empty", 30*time.Second, func() error {
		if k := len(c.Hosts[host].Agent().Running()); k != 0 {
			return fmt.Errorf("%s still runs %d shards", host, k)
		}
		return allRunningOnce(c, n)
	})

	// Lose a host (no goodbye): after its lease its shards run elsewhere.
	lost := "region-2-host-1"
	if err := c.Hosts[lost].Close(); err != nil {
		t.Fatal(err)
	}
	delete(c.Hosts, lost)
	waitFor(t, "shards of the lost host re-placed", 30*time.Second, func() error { return allRunningOnce(c, n) })

	// Unknown things are errors, not crashes.
	if _, err := ra.Drain(ctx, &wire.DrainRequest{Child: "no-such-host"}); err == nil {
		t.Error("drain of an unknown host succeeded")
	}
	if _, err := a.Explain(ctx, &wire.ExplainRequest{Shard: "nope"}); err == nil {
		t.Error("explain of an unknown shard succeeded")
	}
	ex, err := ra.Explain(ctx, &wire.ExplainRequest{Shard: "wordcount/0"})
	if err == nil && len(ex.History) == 0 {
		t.Error("explain returned no history")
	}

	// The ledgers agree: never two hosts at once.
	if err := c.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	rep, err := ledger.Check(c.LedgerPaths()...)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Err(); err != nil {
		t.Errorf("ownership ledger: %v", err)
	}
	t.Logf("ledger: %d events over %d hosts, %d violations", rep.Events, len(rep.Hosts), len(rep.Violations))
}

// testLog returns the daemons' log destination: a file named by
// STRATA_TEST_LOG, or nothing.
func testLog(t *testing.T) io.Writer {
	p := os.Getenv("STRATA_TEST_LOG")
	if p == "" {
		return nil
	}
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func httpGet(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
