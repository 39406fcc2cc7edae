package devcluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/hostagent/driver/synthetic"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/tiers/control"
)

// A host whose shards process markedly slower than the same job's shards on
// the other hosts (its synthetic driver reports a fifth of their rate) is found
// by the region's straggler policy: its shards of the job move away, each move
// explained with the evidence, and they stay away.
func TestStragglerHostLosesItsShards(t *testing.T) {
	c, err := Start(Options{Dir: t.TempDir(), Regions: 1, HostsPerRegion: 4, Interval: 200 * time.Millisecond, LeaseTTL: 3 * time.Second,
		HostCapacity:    interfaces.Load{CPU: 40, Mem: 64 << 30, Tasks: 100},
		ControlPolicies: []string{control.PolicyStraggler, control.PolicyDoctor},
		ControlPolicyConfig: map[string]control.PolicySettings{
			control.PolicyStraggler: {"window": "1s", "factor": "2", "min_peers": "2"},
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	a := admin(t, c.Global.GRPCAddr())
	const n = 16
	if _, err := a.SubmitJob(ctx, &wire.SubmitJobRequest{Job: &wire.JobSpec{Id: "etl", Parallelism: n,
		ShardTemplate: &wire.Shard{Load: &wire.Load{Cpu: 1, Tasks: 1}, InputRate: 100}}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "placed", 30*time.Second, func() error { return allRunningOnce(c, n) })
	if err := c.Settle(1500*time.Millisecond, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	// The slow host: the one running the most shards (placement may leave a
	// host that connected last empty when the load is this light).
	slow, before := "", []interfaces.ShardID(nil)
	for _, id := range []string{"region-1-host-1", "region-1-host-2", "region-1-host-3", "region-1-host-4"} {
		if r := c.Hosts[id].Agent().Running(); len(r) > len(before) {
			slow, before = id, r
		}
	}
	if len(before) == 0 {
		t.Fatal("no host runs a shard")
	}
	// The knob: on this host every shard of the job processes 20 records/s
	// instead of its input rate of 100.
	for i := 0; i < n; i++ {
		if err := c.Drivers[slow].SetProfile(interfaces.ShardID(fmt.Sprintf("etl/%d", i)), synthetic.Profile{Rate: 20}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the slow host's shards moved away", 30*time.Second, func() error {
		if now := c.Hosts[slow].Agent().Running(); len(now) > 0 {
			return fmt.Errorf("%s still runs %v", slow, now)
		}
		return allRunningOnce(c, n)
	})
	ra := admin(t, c.Regions["region-1"].GRPCAddr())
	ex, err := ra.Explain(ctx, &wire.ExplainRequest{Shard: string(before[0])})
	if err != nil {
		t.Fatal(err)
	}
	var off *wire.Move
	for _, e := range ex.History {
		if e.GetMove().GetFrom() == slow {
			off = e.GetMove()
		}
	}
	if off == nil {
		t.Fatalf("no move of %s off %s in its history: %v", before[0], slow, ex.History)
	}
	t.Logf("explain %s: %s (goal %s)", before[0], off.GetReason(), off.GetGoal())
	for _, want := range []string{"straggler: job etl on " + slow + " processes 20 records/s", "vs 100 on"} {
		if !strings.Contains(off.GetReason(), want) {
			t.Errorf("the move's reason %q lacks %q", off.GetReason(), want)
		}
	}
	if off.GetGoal() != "straggler" {
		t.Errorf("goal %q", off.GetGoal())
	}
	st, err := ra.Status(ctx, &wire.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	alerts := strings.Join(st.GetTiers()[0].GetInstances()[0].GetAlerts(), "\n")
	if !strings.Contains(alerts, "straggler: job etl on "+slow) {
		t.Errorf("status alerts lack the straggler: %q", alerts)
	}
	// They stay away (the rule holds for the cooldown), while the others
	// balance among themselves.
	time.Sleep(2 * time.Second)
	if now := c.Hosts[slow].Agent().Running(); len(now) > 0 {
		t.Errorf("shards came back to %s: %v", slow, now)
	}
	if err := c.CloseAndCheckLedger(); err != nil {
		t.Error(err)
	}
}

// A shard whose process fails on every host (each host's synthetic driver
// fails its next start) is moved from host to host, each failure counted by
// the region's doctor, then quarantined with the evidence: no host runs it, it
// is not bounced any more, strata shards/explain show the reason; released by
// an operator it is placed again.
func TestDoctorQuarantinesAShardFailingEverywhere(t *testing.T) {
	c, err := Start(Options{Dir: t.TempDir(), Regions: 1, HostsPerRegion: 3, Interval: 200 * time.Millisecond, LeaseTTL: 3 * time.Second, Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for h, drv := range c.Drivers {
		drv.FailNextStart(fmt.Errorf("worker exited with status 70 on %s", h))
	}
	a := admin(t, c.Global.GRPCAddr())
	if _, err := a.SubmitJob(ctx, &wire.SubmitJobRequest{Job: &wire.JobSpec{Id: "poison", Parallelism: 1,
		ShardTemplate: &wire.Shard{Load: &wire.Load{Cpu: 1, Tasks: 1}}}}); err != nil {
		t.Fatal(err)
	}
	ra := admin(t, c.Regions["region-1"].GRPCAddr())
	var reason string
	waitFor(t, "quarantined at the region", 30*time.Second, func() error {
		resp, err := ra.ListShards(ctx, &wire.ListShardsRequest{})
		if err != nil {
			return err
		}
		for _, s := range resp.GetShards() {
			if s.GetShard().GetId() == "poison/0" && s.GetQuarantined() != "" {
				reason = s.GetQuarantined()
				return nil
			}
		}
		return errors.New("not quarantined yet")
	})
	t.Logf("quarantined: %s", reason)
	for h := range c.Drivers {
		if !strings.Contains(reason, h+" at ") {
			t.Errorf("the reason %q does not name %s", reason, h)
		}
	}
	if !strings.Contains(reason, "failed on 3 distinct children") || !strings.Contains(reason, "worker exited with status 70") {
		t.Errorf("reason %q", reason)
	}
	ex, err := ra.Explain(ctx, &wire.ExplainRequest{Shard: "poison/0"})
	if err != nil {
		t.Fatal(err)
	}
	if ex.GetQuarantined() != reason || len(ex.GetPlacement()) != 0 {
		t.Errorf("explain: quarantined %q, placement %v", ex.GetQuarantined(), ex.GetPlacement())
	}
	last := ex.History[len(ex.History)-1]
	if last.GetMode() != "quarantine" || last.GetMove().GetReason() != reason {
		t.Errorf("last history entry %v", last)
	}
	// Not bounced forever: nobody runs it and its history stays as it is.
	events := len(ex.History)
	time.Sleep(2 * time.Second)
	for h, hd := range c.Hosts {
		if r := hd.Agent().Running(); len(r) > 0 {
			t.Errorf("%s runs %v", h, r)
		}
	}
	ex, _ = ra.Explain(ctx, &wire.ExplainRequest{Shard: "poison/0"})
	if len(ex.History) != events {
		t.Errorf("the quarantined shard's history grew from %d to %d events: %v", events, len(ex.History), ex.History[events:])
	}
	// Released (the hosts' failures were one-offs), it runs again.
	if _, err := ra.ReleaseShard(ctx, &wire.ReleaseShardRequest{Shard: "poison/0", Reason: "fixed the worker"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "running after the release", 30*time.Second, func() error { return allRunningOnce(c, 1) })
	if _, err := ra.ReleaseShard(ctx, &wire.ReleaseShardRequest{Shard: "poison/0"}); err == nil {
		t.Error("releasing a shard that is not quarantined succeeded")
	}
	if err := c.CloseAndCheckLedger(); err != nil {
		t.Error(err)
	}
}

// Autoscale in mode apply at the global tier: a job whose input (2 × 100
// records/s) needs 5 shards at 40 records/s each grows by one shard per
// cooldown up to its max_shards (4), and every shard runs once.
func TestAutoscaleAppliesBoundedSteps(t *testing.T) {
	c, err := Start(Options{Dir: t.TempDir(), Regions: 1, HostsPerRegion: 2, Interval: 200 * time.Millisecond, LeaseTTL: 3 * time.Second,
		ControlPolicies: []string{control.PolicyAutoscale},
		ControlPolicyConfig: map[string]control.PolicySettings{
			control.PolicyAutoscale: {"mode": "apply", "rate_per_shard": "40", "window": "0s", "cooldown": "1s", "max_step": "1", "max_shards": "4"},
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	a := admin(t, c.Global.GRPCAddr())
	if _, err := a.SubmitJob(ctx, &wire.SubmitJobRequest{Job: &wire.JobSpec{Id: "grow", Parallelism: 2,
		ShardTemplate: &wire.Shard{Load: &wire.Load{Cpu: 1, Tasks: 1}, InputRate: 100}}}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var sizes []int
	waitFor(t, "grown to 4 shards, all running", 30*time.Second, func() error {
		jobs, err := a.ListJobs(ctx, &wire.ListJobsRequest{})
		if err != nil {
			return err
		}
		n := int(jobs.GetJobs()[0].GetShards())
		if len(sizes) == 0 || sizes[len(sizes)-1] != n {
			sizes = append(sizes, n)
		}
		if n != 4 {
			return fmt.Errorf("%d shards", n)
		}
		return allRunningOnce(c, 4)
	})
	t.Logf("shard counts seen: %v in %v", sizes, time.Since(start).Round(10*time.Millisecond))
	for i := 1; i < len(sizes); i++ {
		if sizes[i]-sizes[i-1] > 1 || sizes[i] < sizes[i-1] {
			t.Errorf("a step larger than max_step 1: %v", sizes)
		}
	}
	st, err := a.Status(ctx, &wire.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("global findings: %v", st.GetTiers()[0].GetInstances()[0].GetFindings())
	time.Sleep(1500 * time.Millisecond)
	jobs, _ := a.ListJobs(ctx, &wire.ListJobsRequest{})
	if n := jobs.GetJobs()[0].GetShards(); n != 4 {
		t.Errorf("max_shards 4 not kept: %d shards", n)
	}
	if err := c.CloseAndCheckLedger(); err != nil {
		t.Error(err)
	}
}
