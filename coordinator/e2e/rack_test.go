package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/hostagent/ledger"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

// placementVia asks the leader of every group (the regions, or the racks) where
// its shards run: shard → child.
func placementVia(ctx context.Context, groups map[string][]*Proc) (map[interfaces.ShardID]string, error) {
	out := map[interfaces.ShardID]string{}
	for name, group := range groups {
		l, err := Leader(ctx, group)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		a, done, err := Admin(l)
		if err != nil {
			return nil, err
		}
		resp, err := a.ListShards(ctx, &wire.ListShardsRequest{})
		done()
		if err != nil {
			return nil, err
		}
		for _, s := range resp.Shards {
			if len(s.Placement) == 0 || s.Placement[0].InFlight {
				continue
			}
			id := interfaces.ShardID(s.Shard.GetId())
			if prev, dup := out[id]; dup {
				return nil, fmt.Errorf("shard %s placed under two parents (%s, %s)", id, prev, s.Placement[0].Child)
			}
			out[id] = s.Placement[0].Child
		}
	}
	return out, nil
}

// regionChildren returns the region's children as its leader sees them.
func regionChildren(ctx context.Context, group []*Proc) ([]*wire.ChildStatus, error) {
	l, err := Leader(ctx, group)
	if err != nil {
		return nil, err
	}
	a, done, err := Admin(l)
	if err != nil {
		return nil, err
	}
	defer done()
	st, err := a.Status(ctx, &wire.StatusRequest{})
	if err != nil {
		return nil, err
	}
	return st.Tiers[0].Instances[0].Children, nil
}

// TestRackTier runs the chain global → region → rack → host as processes: the
// region spreads each job over its racks ("spread"), each rack balances its
// hosts ("local"); draining a rack moves its shards to the other, undraining it
// brings load back.
func TestRackTier(t *testing.T) {
	spec := Spec{Replicas: 1, Regions: 1, HostsPerRegion: 2, HostCPU: 16, RacksPerRegion: 2, RackReplicas: 1, RegionPolicy: "spread",
		Timing: Timing{Interval: 300 * time.Millisecond, LeaseTTL: 2 * time.Second, Grace: 500 * time.Millisecond, ReportInterval: 500 * time.Millisecond}}
	c := startCluster(t, workDir(t), spec)
	ctx := context.Background()
	a := admin(t, c.Global[0])
	jobs := map[string]int{"a": 40, "b": 20}
	for job, n := range jobs {
		job, n := job, n
		eventually(t, "submit "+job, 20*time.Second, func() error {
			_, err := a.SubmitJob(ctx, &wire.SubmitJobRequest{Job: &wire.JobSpec{Id: job, Parallelism: int64(n), ShardTemplate: &wire.Shard{Load: &wire.Load{Cpu: 0.2, Tasks: 1}}}})
			if isConflict(err) {
				return nil
			}
			return err
		})
	}
	allOnHosts := func(avoidRack string) error {
		p, err := placementVia(ctx, c.Racks)
		if err != nil {
			return err
		}
		if len(p) != 60 {
			return fmt.Errorf("%d of 60 shards on hosts", len(p))
		}
		for s, h := range p {
			if avoidRack != "" && strings.HasPrefix(h, avoidRack+"-") {
				return fmt.Errorf("shard %s still on %s", s, h)
			}
		}
		return nil
	}
	eventually(t, "all shards on hosts under racks", 60*time.Second, func() error { return allOnHosts("") })

	// The region's children are the racks, and every job is spread over them.
	children, err := regionChildren(ctx, c.Regions["region-1"])
	if err != nil {
		t.Fatal(err)
	}
	if len(children) != 2 {
		t.Fatalf("region has %d children, want the 2 racks", len(children))
	}
	for _, ch := range children {
		if ch.Child.GetTier() != "rack" || ch.Shards == 0 || ch.Address == "" {
			t.Errorf("region child %s: tier %q, %d shards, address %q", ch.Child.GetId(), ch.Child.GetTier(), ch.Shards, ch.Address)
		}
	}
	rl, _ := Leader(ctx, c.Regions["region-1"])
	ra := admin(t, rl)
	shards, err := ra.ListShards(ctx, &wire.ListShardsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	perRack := map[string]map[string]int{}
	for _, s := range shards.Shards {
		if len(s.Placement) == 0 {
			continue
		}
		job := s.Shard.GetJob()
		if perRack[job] == nil {
			perRack[job] = map[string]int{}
		}
		perRack[job][s.Placement[0].Child]++
	}
	for job, n := range jobs {
		for rack, k := range perRack[job] {
			if k > (n+1)/2 {
				t.Errorf("job %s has %d of its %d shards on %s: not spread", job, k, n, rack)
			}
		}
	}

	// strata status walks the tree down to the racks and their hosts (a host may
	// still be reconnecting after a lease hiccup under load: ask until it shows).
	eventually(t, "strata status shows the rack tier", 30*time.Second, func() error {
		out, err := exec.Command(strataBin, "status", "--addr", c.Global[0].GRPC, "--tls", c.OperatorTLS).CombinedOutput()
		if err != nil {
			return fmt.Errorf("strata status: %v\n%s", err, out)
		}
		for _, want := range []string{`region-1-rack-1\s+rack\s+active`, `region-1-rack-2\s+rack\s+active`, `region-1-rack-2-host-1\s+host\s+active`} {
			if !regexp.MustCompile(want).Match(out) {
				return fmt.Errorf("strata status lacks %q:\n%s", want, out)
			}
		}
		return nil
	})

	// Rebalance: drain a rack, then undrain it.
	rack := "region-1-rack-1"
	if _, err := ra.Drain(ctx, &wire.DrainRequest{Child: rack}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "drained rack empty", 60*time.Second, func() error { return allOnHosts(rack) })
	if _, err := ra.Undrain(ctx, &wire.UndrainRequest{Child: rack}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "load back on the undrained rack", 60*time.Second, func() error {
		children, err := regionChildren(ctx, c.Regions["region-1"])
		if err != nil {
			return err
		}
		for _, ch := range children {
			if ch.Shards == 0 {
				return fmt.Errorf("%s has no shards", ch.Child.GetId())
			}
		}
		return allOnHosts("")
	})
	// What the hosts actually ran: never two at once.
	c.Stop()
	res, err := ledger.Check(c.LedgerPaths()...)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Err(); err != nil {
		t.Errorf("ownership ledger: %v", err)
	}
}
