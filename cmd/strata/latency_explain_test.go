package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/devcluster"
	"github.com/strata-sched/strata/coordinator/hostagent/driver/synthetic"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/internal/testutil"
)

// strata explain names the latency goal (issue 24): one region of two 8-cpu
// hosts executing their shards' work, host-2 with 20× the item service time;
// a job of 8 shards with a 50 ms SLO, placed 4 + 4 by cpu. The region moves
// the slow host's shards, and strata explain shows the move's goal,
// latency_slo, with its reason.
func TestExplainNamesTheLatencyGoal(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster with executing hosts")
	}
	c, err := devcluster.Start(devcluster.Options{Dir: t.TempDir(), Regions: 1, HostsPerRegion: 2, Interval: 200 * time.Millisecond, LeaseTTL: 3 * time.Second,
		HostCapacity: interfaces.Load{CPU: 8, Mem: 64 << 30, Tasks: 100},
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
	t.Cleanup(func() { c.Close() })
	job := filepath.Join(t.TempDir(), "q.yaml")
	if err := os.WriteFile(job, []byte("name: q\nparallelism: 8\nload: {cpu: 0.8, tasks: 1}\ninput_rate: 100\nlatency_slo: 50ms\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := c.Global.GRPCAddr()
	if code, _, errOut := runCLI("job", "submit", "--addr", addr, job); code != 0 {
		t.Fatalf("submit: %s", errOut)
	}
	var shown string
	testutil.Eventually(t, "an explained move by latency_slo", 40*time.Second, func() error {
		for i := 0; i < 8; i++ {
			code, out, _ := runCLI("explain", fmt.Sprintf("q/%d", i), "--addr", addr)
			if code == 0 && strings.Contains(out, "latency_slo") && strings.Contains(out, "improves latency_slo") {
				shown = out
				return nil
			}
		}
		return fmt.Errorf("no shard's explain names latency_slo yet")
	})
	t.Logf("strata explain:\n%s", shown)
}
