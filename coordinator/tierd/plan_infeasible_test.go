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
// shard with nowhere to go).
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
	if err == nil || !errors.Is(wire.FromStatus(err), interfaces.ErrConflict) || !strings.Contains(err.Error(), "1 shard could not be placed") {
		t.Fatalf("apply of an infeasible plan: %v; want ErrConflict saying 1 shard could not be placed", err)
	}
	if c, _ := d.Tier().FSM.Child("h1"); c.State != interfaces.ChildActive {
		t.Errorf("h1 is %v after a refused apply, want active", c.State)
	}
	if now := d.Tier().FSM.AppliedIndex(); now != before {
		t.Errorf("state index %d → %d: the refused apply committed something", before, now)
	}
}
