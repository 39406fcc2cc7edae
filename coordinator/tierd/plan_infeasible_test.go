package tierd

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

// TestApplyPlanRefusesAnInfeasiblePlan: a plan that drains the only host
// cannot place its shard; it still gets a token (the answer is worth seeing),
// but applying it is refused with ErrConflict naming how many shards could not
// be placed, and nothing is committed (it used to drain the host and leave the
// shard with nowhere to go). A shard that was unplaced before and fits nowhere
// does not make a plan unappliable: it is not the plan's doing.
func TestApplyPlanRefusesAnInfeasiblePlan(t *testing.T) {
	d, _ := revokeRegion(t, "h1")
	ctx := context.Background()
	must(t, d, &fsm.Assign{Shard: "j/0", Child: "h1"})
	resp, err := d.Plan(ctx, &wire.AdminPlanRequest{DrainChildren: []string{"h1"}})
	if err != nil {
		t.Fatal(err)
	}
	if st := resp.GetPlan().GetStatus(); st != wire.PlanStatus_PLAN_STATUS_INFEASIBLE || len(resp.GetPlan().GetInfeasible()) != 1 {
		t.Fatalf("plan draining the only host: status %v, %d infeasible; want infeasible, 1", st, len(resp.GetPlan().GetInfeasible()))
	}
	before := d.Tier().FSM.AppliedIndex()
	_, err = d.ApplyPlan(ctx, &wire.ApplyPlanRequest{Token: resp.GetToken()})
	if err == nil || !errors.Is(wire.FromStatus(err), interfaces.ErrConflict) || !strings.Contains(err.Error(), "1 shard placed now could not be placed elsewhere") {
		t.Fatalf("apply of an infeasible plan: %v; want ErrConflict saying 1 shard could not be placed", err)
	}
	if c, _ := d.Tier().FSM.Child("h1"); c.State != interfaces.ChildActive {
		t.Errorf("h1 is %v after a refused apply, want active", c.State)
	}
	if now := d.Tier().FSM.AppliedIndex(); now != before {
		t.Errorf("state index %d → %d: the refused apply committed something", before, now)
	}
	if resp.GetStranded() != 1 {
		t.Errorf("stranded %d, want 1", resp.GetStranded())
	}
}

func TestApplyPlanWithAnUnplaceableShardOfBefore(t *testing.T) {
	d, _ := revokeRegion(t, "h1", "h2")
	ctx := context.Background()
	must(t, d, &fsm.Assign{Shard: "j/0", Child: "h1"})
	must(t, d, &fsm.PutShards{Shards: []interfaces.Shard{{ID: "big", Job: "k", Load: interfaces.Load{CPU: 100}}}}) // larger than any host
	resp, err := d.Plan(ctx, &wire.AdminPlanRequest{DrainChildren: []string{"h1"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetPlan().GetInfeasible()) != 1 || resp.GetStranded() != 0 {
		t.Fatalf("plan: %d infeasible, %d stranded; want big infeasible, none stranded", len(resp.GetPlan().GetInfeasible()), resp.GetStranded())
	}
	if _, err := d.ApplyPlan(ctx, &wire.ApplyPlanRequest{Token: resp.GetToken()}); err != nil {
		t.Fatalf("a drain that strands nothing was refused: %v", err)
	}
	if c, _ := d.Tier().FSM.Child("h1"); c.State != interfaces.ChildDraining {
		t.Errorf("h1 is %v after the apply, want draining", c.State)
	}
}
