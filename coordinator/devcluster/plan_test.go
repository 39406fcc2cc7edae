package devcluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strata-sched/strata/interfaces/wire"
)

// A what-if plan commits nothing; applied, it does exactly what it said; a plan
// made on an older state is refused.
func TestPlanThenApply(t *testing.T) {
	c, err := Start(Options{Dir: t.TempDir(), Regions: 1, HostsPerRegion: 3, Interval: 200 * time.Millisecond, LeaseTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	a := admin(t, c.Global.GRPCAddr())
	if _, err := a.SubmitJob(ctx, &wire.SubmitJobRequest{Job: &wire.JobSpec{Id: "p", Parallelism: 30, ShardTemplate: &wire.Shard{Load: &wire.Load{Cpu: 0.5, Tasks: 1}}}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "placed", 30*time.Second, func() error { return allRunningOnce(c, 30) })
	if err := c.Settle(1500*time.Millisecond, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	ra := admin(t, c.Regions["region-1"].GRPCAddr())
	host := "region-1-host-1"
	on := func() int { return len(c.Hosts[host].Agent().Running()) }
	before := on()
	if before == 0 {
		t.Fatalf("%s runs nothing to plan about", host)
	}

	if _, err := ra.Plan(ctx, &wire.AdminPlanRequest{DrainChildren: []string{"nope"}}); status.Code(err) != codes.NotFound {
		t.Errorf("plan draining an unknown host: got %v, want NotFound", err)
	}
	if _, err := ra.Plan(ctx, &wire.AdminPlanRequest{Policy: "no-such-policy"}); status.Code(err) != codes.NotFound {
		t.Errorf("plan with an unknown policy: got %v, want NotFound", err)
	}
	var plan *wire.AdminPlanResponse
	waitFor(t, "a plan on a settled state", 20*time.Second, func() error {
		plan, err = ra.Plan(ctx, &wire.AdminPlanRequest{DrainChildren: []string{host}})
		if err != nil {
			return err
		}
		moving := 0
		for _, m := range plan.Plan.GetMoves() {
			if m.GetFrom() == host {
				moving++
			}
		}
		if moving != before {
			return fmt.Errorf("plan moves %d of the %d shards off %s", moving, before, host)
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond)
	if on() != before {
		t.Fatalf("a plan moved shards: %d → %d", before, on())
	}
	if _, err := ra.ApplyPlan(ctx, &wire.ApplyPlanRequest{Token: "bogus"}); status.Code(err) != codes.NotFound {
		t.Errorf("unknown token: got %v, want NotFound", err)
	}
	// The state may still move (a late report); retry with fresh plans until one applies.
	var applied *wire.ApplyPlanResponse
	waitFor(t, "plan applied", 20*time.Second, func() error {
		resp, err := ra.ApplyPlan(ctx, &wire.ApplyPlanRequest{Token: plan.Token})
		if status.Code(err) == codes.FailedPrecondition {
			plan, _ = ra.Plan(ctx, &wire.AdminPlanRequest{DrainChildren: []string{host}})
		}
		applied = resp
		return err
	})
	// The drain and every move of the plan committed together, none refused.
	if applied.GetMovesRefused() != 0 || applied.GetMovesCommitted() != int64(len(plan.GetPlan().GetMoves())) {
		t.Errorf("apply: %d committed, %d refused, of %d planned moves", applied.GetMovesCommitted(), applied.GetMovesRefused(), len(plan.GetPlan().GetMoves()))
	}
	waitFor(t, "planned host empty", 30*time.Second, func() error {
		if n := on(); n != 0 {
			return fmt.Errorf("%s still runs %d", host, n)
		}
		return allRunningOnce(c, 30)
	})
	// A token is used once; an old one is refused.
	if _, err := ra.ApplyPlan(ctx, &wire.ApplyPlanRequest{Token: plan.Token}); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "was used already: applied at") {
		t.Errorf("reused token: got %v, want FailedPrecondition saying it was applied", err)
	}
	old, err := ra.Plan(ctx, &wire.AdminPlanRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ra.Undrain(ctx, &wire.UndrainRequest{Child: host}); err != nil {
		t.Fatal(err)
	}
	if _, err := ra.ApplyPlan(ctx, &wire.ApplyPlanRequest{Token: old.Token}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("plan made before a change: got %v, want FailedPrecondition", err)
	}
	if err := c.CloseAndCheckLedger(); err != nil {
		t.Error(err)
	}
}
