package tierd

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/tiers/control"
)

// controlRound runs one round at now as round does (runRound: the core round
// on the replica's state) with the test's own controller ctl. The background
// loop decides nothing here (the region has no lease from its parent).
func controlRound(t *testing.T, d *Daemon, ctl *control.Controller, now time.Time) (control.Decision, interfaces.Plan, int) {
	t.Helper()
	r, err := d.newRound(ctl)
	if err != nil {
		t.Fatal(err)
	}
	out := d.runRound(context.Background(), r, now)
	if out.SolveErr != nil {
		t.Fatalf("round (%s): the solve failed: %v", out.Decision.Mode, out.SolveErr)
	}
	if out.CommitErr != nil || out.ObserveErr != nil {
		t.Fatalf("round (%s): commit %v, controller %v", out.Decision.Mode, out.CommitErr, out.ObserveErr)
	}
	return out.Decision, out.Plan, len(out.Rejected)
}

// Issue 20, item 5: a shard pinned to a child the tier does not have — the
// job-file help's "pinned: region-1", at a region whose hosts are not called
// that — made every solve of the tier fail, so the tier placed nothing,
// failover included, until the job was deleted. Now the shard is infeasible
// with the reason (in the what-if plan and in Explain), a shard placed before
// with such a pin stays where it runs, and the tier's other shards move off a
// failed host in the emergency round.
func TestPinToAMissingChildStopsNothing(t *testing.T) {
	d, _ := revokeRegion(t, "h1", "h2", "h3")
	ctx := context.Background()
	must(t, d, &fsm.PutShards{Shards: []interfaces.Shard{
		{ID: "a", Job: "k", Load: interfaces.Load{CPU: 1}},
		{ID: "b", Job: "k", Load: interfaces.Load{CPU: 1}},
		{ID: "p", Job: "pinned", Load: interfaces.Load{CPU: 1}, Constraints: interfaces.ShardConstraints{Pinned: "region-1"}},
		{ID: "q", Job: "pinned", Load: interfaces.Load{CPU: 1}, Constraints: interfaces.ShardConstraints{Allowed: []interfaces.ChildID{"gone-1", "gone-2"}}},
	}})
	must(t, d, &fsm.ApplyPlan{Tier: "region", Moves: []interfaces.Move{{Shard: "j/0", To: "h1"}, {Shard: "a", To: "h1"}, {Shard: "b", To: "h1"}, {Shard: "q", To: "h2"}}})

	// The what-if plan: p infeasible, with the constraint and the child.
	resp, err := d.Plan(ctx, &wire.AdminPlanRequest{})
	if err != nil {
		t.Fatalf("plan: %v (one shard's pin stops the tier)", err)
	}
	var why string
	for _, inf := range resp.GetPlan().GetInfeasible() {
		if inf.GetShard() == "p" {
			why = inf.GetExcluded()["h2"]
		}
	}
	if !strings.Contains(why, "pin") || !strings.Contains(why, `"region-1"`) || !strings.Contains(why, "not a child of this tier") {
		t.Fatalf("plan: p excluded from h2 for %q, want the pin to region-1 named (infeasible %v)", why, resp.GetPlan().GetInfeasible())
	}

	ctl, err := control.New(d.controlConfig())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	controlRound(t, d, ctl, now)
	got, err := d.Explain(ctx, &wire.ExplainRequest{Shard: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if f := strings.Join(got.GetFindings(), "\n"); !strings.Contains(f, "infeasible") || !strings.Contains(f, `"region-1"`) {
		t.Errorf("explain p: findings %q, want why it is unplaced", got.GetFindings())
	}

	// h1 fails: its shards are re-placed in the emergency round(s).
	must(t, d, &fsm.PutChild{Child: interfaces.Child{ID: "h1", Tier: interfaces.TierHost, Capacity: interfaces.Load{CPU: 8}, State: interfaces.ChildFailed}})
	for i := 1; i <= 3; i++ {
		controlRound(t, d, ctl, now.Add(time.Duration(i)*time.Second))
	}
	for _, id := range []interfaces.ShardID{"j/0", "a", "b"} {
		st, _ := d.Tier().FSM.Shard(id)
		on := st.Owner
		if st.InFlight != nil {
			on = st.InFlight.To
		}
		if on == "" || on == "h1" {
			t.Errorf("%s still on %q after the emergency rounds: failover stopped by p's pin", id, on)
		}
	}
	if st, _ := d.Tier().FSM.Shard("p"); st.Owner != "" {
		t.Errorf("p placed on %q despite its pin to region-1", st.Owner)
	}
	if st, _ := d.Tier().FSM.Shard("q"); st.Owner != "h2" {
		t.Errorf("q on %q: a running shard with an unresolvable allowed list was moved", st.Owner)
	}
}

// The job-file help's own example, "pinned: region-1" (constraints apply at
// every tier): at region-1 itself the pin is its parent's, kept when the
// global tier placed the shard there; within region-1 it binds nothing
// (interfaces.ShardConstraints.Within). The region places the shard on a
// host, and the commit verifies the move on the same rules. Without Within
// region-1 looked for a host called "region-1" and never placed the shard.
func TestPinToThisInstanceBindsOnlyTheParent(t *testing.T) {
	d, _ := revokeRegion(t, "h1", "h2")
	self := interfaces.ChildID(d.cfg.Instance)
	must(t, d, &fsm.PutShards{Shards: []interfaces.Shard{
		{ID: "p", Job: "pinned", Load: interfaces.Load{CPU: 1}, Constraints: interfaces.ShardConstraints{Pinned: self}},
		{ID: "q", Job: "pinned", Load: interfaces.Load{CPU: 1}, Constraints: interfaces.ShardConstraints{Allowed: []interfaces.ChildID{"region-0", self}}},
	}})
	ctl, err := control.New(d.controlConfig())
	if err != nil {
		t.Fatal(err)
	}
	_, plan, rejected := controlRound(t, d, ctl, time.Now())
	if len(plan.Infeasible) != 0 || rejected != 0 {
		t.Fatalf("plan %+v, %d rejected (%+v): want p and q placed", plan, rejected, d.LastRejections())
	}
	for _, id := range []interfaces.ShardID{"p", "q"} {
		if st, _ := d.Tier().FSM.Shard(id); st.Owner != "h1" && st.Owner != "h2" {
			t.Errorf("%s on %q, want a host", id, st.Owner)
		}
	}
	if st, _ := d.Tier().FSM.Shard("p"); st.Spec.Constraints.Pinned != self {
		t.Errorf("p's spec lost its pin (%+v): the state keeps the parent's rules", st.Spec.Constraints)
	}
}
