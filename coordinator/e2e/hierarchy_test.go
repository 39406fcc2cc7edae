package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/hostagent/ledger"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/testutil"
)

var strataBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "strata-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	strataBin, err = BuildStrata(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// placement asks every region's leader where its shards run: shard → host.
func placement(ctx context.Context, c *Cluster) (map[interfaces.ShardID]string, error) {
	return placementVia(ctx, c.Regions)
}

// allPlaced checks that each of n shards is placed on a live host, and none on
// the hosts in avoid.
func allPlaced(ctx context.Context, c *Cluster, n int, avoid ...string) error {
	p, err := placement(ctx, c)
	if err != nil {
		return err
	}
	bad := map[string]bool{}
	for _, h := range avoid {
		bad[h] = true
	}
	onAvoided := 0
	for _, h := range p {
		if bad[h] {
			onAvoided++
		}
	}
	if onAvoided > 0 {
		return fmt.Errorf("%d shards still on %v", onAvoided, avoid)
	}
	if len(p) != n {
		return fmt.Errorf("%d of %d shards placed on hosts", len(p), n)
	}
	return nil
}

var eventually = testutil.Eventually

func TestMultiProcessHierarchy(t *testing.T) {
	spec := Spec{Replicas: 3, Regions: 2, HostsPerRegion: 3, HostCPU: 32,
		Timing: Timing{Interval: 300 * time.Millisecond, LeaseTTL: 2 * time.Second, Grace: 100 * time.Millisecond, ReportInterval: 500 * time.Millisecond}}
	dir := workDir(t)
	c := startCluster(t, dir, spec)
	ctx := context.Background()

	// 1,000 shards submitted to any global replica are all owned by hosts.
	const n = 1000
	a, done, err := Admin(c.Global[1]) // a follower most likely: writes are forwarded
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	eventually(t, "job submitted", 20*time.Second, func() error {
		_, err := a.SubmitJob(ctx, &wire.SubmitJobRequest{Job: &wire.JobSpec{Id: "e2e", Parallelism: n,
			ShardTemplate: &wire.Shard{Load: &wire.Load{Cpu: 0.1, Mem: 64 << 20, Tasks: 1}, StateBytes: 1 << 20}}})
		if err != nil && wire.FromStatus(err) != nil && isConflict(err) {
			return nil // an earlier attempt landed
		}
		return err
	})
	took := eventually(t, "all shards owned", 60*time.Second, func() error { return allPlaced(ctx, c, n) })
	t.Logf("1000 shards owned by hosts %v after submission", took.Round(time.Millisecond))

	// Bad input is refused with the right code and changes nothing.
	if _, err := a.SubmitJob(ctx, &wire.SubmitJobRequest{Job: &wire.JobSpec{Id: "bad", Parallelism: 2, ShardTemplate: &wire.Shard{Load: &wire.Load{Cpu: -1}}}}); !isInvalid(err) {
		t.Errorf("negative load: got %v, want InvalidArgument", err)
	}
	if _, err := a.Explain(ctx, &wire.ExplainRequest{Shard: "no-such-shard"}); !isNotFound(err) {
		t.Errorf("unknown shard: got %v, want NotFound", err)
	}

	// kill -9 of a host: its shards are owned elsewhere after its lease.
	victim := "region-1-host-1"
	c.Hosts[victim].Kill()
	killed := time.Now()
	took = eventually(t, "shards of the killed host re-placed", 60*time.Second, func() error { return allPlaced(ctx, c, n, victim) })
	t.Logf("host kill -9 → all its shards owned elsewhere after %v (lease %v + grace %v + interval %v)",
		time.Since(killed).Round(time.Millisecond), spec.Timing.LeaseTTL, spec.Timing.Grace, spec.Timing.Interval)
	_ = took
	// The host comes back: it resumes nothing it no longer owns.
	if err := c.Hosts[victim].Start(c.Bin); err != nil {
		t.Fatal(err)
	}

	// kill -9 of a region leader: a new leader continues and no shard is lost.
	leader, err := Leader(ctx, c.Regions["region-2"])
	if err != nil {
		t.Fatal(err)
	}
	leader.Kill()
	killed = time.Now()
	eventually(t, "new region-2 leader", 30*time.Second, func() error {
		l, err := Leader(ctx, c.Regions["region-2"])
		if err != nil {
			return err
		}
		if l == leader {
			return fmt.Errorf("old leader still reported")
		}
		return nil
	})
	eventually(t, "no shard lost after the region leader's death", 60*time.Second, func() error { return allPlaced(ctx, c, n) })
	t.Logf("region leader kill -9 → all shards owned again after %v", time.Since(killed).Round(time.Millisecond))
	if err := leader.Start(c.Bin); err != nil {
		t.Fatal(err)
	}

	// A drained host ends empty.
	drained := "region-2-host-2"
	var ra wire.AdminClient
	eventually(t, "drain accepted", 30*time.Second, func() error {
		r2, err := Leader(ctx, c.Regions["region-2"])
		if err != nil {
			return err
		}
		a, rdone, err := Admin(r2)
		if err != nil {
			return err
		}
		t.Cleanup(rdone)
		ra = a
		_, err = ra.Drain(ctx, &wire.DrainRequest{Child: drained})
		return err // a leader election may still be settling
	})
	if _, err := ra.Drain(ctx, &wire.DrainRequest{Child: "no-such-host"}); !isNotFound(err) {
		t.Errorf("drain of an unknown host: got %v, want NotFound", err)
	}
	eventually(t, "drained host empty", 60*time.Second, func() error { return allPlaced(ctx, c, n, drained) })
	// Draining takes capacity from region-2, so the global tier may still be
	// moving shards between regions: a shard the new region has just assigned
	// starts on its host some tens of milliseconds later. Sample the ledgers
	// only once the placement has held still for a second.
	eventually(t, "placement settled", 60*time.Second, func() error {
		before, err := placement(ctx, c)
		if err != nil {
			return err
		}
		time.Sleep(time.Second)
		if err := allPlaced(ctx, c, n, drained); err != nil {
			return err
		}
		after, err := placement(ctx, c)
		if err != nil {
			return err
		}
		if !maps.Equal(before, after) {
			return fmt.Errorf("placement still changing")
		}
		return nil
	})

	// The ledgers of what the hosts actually ran: never two hosts at once, and
	// every shard running now.
	checkAt := time.Now().UnixNano()
	time.Sleep(500 * time.Millisecond)
	c.Stop()
	res, err := ledger.Check(c.LedgerPaths()...)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range res.Violations {
		t.Errorf("ledger: %s", v)
	}
	runningAt := map[interfaces.ShardID]int{}
	for _, iv := range res.Intervals {
		if iv.Start <= checkAt && checkAt < iv.End {
			runningAt[iv.Shard]++
		}
	}
	if len(runningAt) != n {
		t.Errorf("ledger: %d shards running at the end, want %d", len(runningAt), n)
	}
	for s, k := range runningAt {
		if k > 1 {
			t.Errorf("ledger: shard %s ran on %d hosts at once", s, k)
		}
	}
	t.Logf("ledger: %d events, %d intervals, %d violations", res.Events, len(res.Intervals), len(res.Violations))
}

// workDir is a directory for a cluster's data and logs: removed when the test
// passes, kept (and named) when it fails.
func workDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "strata-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("data and logs kept under %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}
