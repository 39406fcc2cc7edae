package tierd

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/testutil"
	"github.com/strata-sched/strata/tiers"
	"github.com/strata-sched/strata/tiers/control"
)

func init() {
	tiers.MustRegister("test-stubborn", func(interfaces.PolicyConfig) (interfaces.Policy, error) { return stubbornPolicy{}, nil })
}

// stubbornPolicy plans u → h1 (which the commit refuses: u is larger than
// h1) every round, unless the view's rules keep u off h1 — a policy whose
// capacity view disagrees with the commit's, as item 6's did.
type stubbornPolicy struct{}

func (stubbornPolicy) Name() string { return "test-stubborn" }

func (stubbornPolicy) Plan(_ context.Context, v *interfaces.View) (interfaces.Plan, error) {
	for _, k := range v.Constraints {
		if k.Kind == interfaces.ConstraintAllowed && slices.Contains(k.Shards, "u") && !slices.Contains(k.Children, "h1") {
			return interfaces.Plan{}, nil
		}
	}
	return interfaces.Plan{Moves: []interfaces.Move{{Shard: "u", To: "h1", Reason: "stubborn"}}}, nil
}

// The backstop of issue 20, item 6: a move the commit rejects for the same
// reason three rounds in a row is held by the controller (control.Backoff) —
// the next rounds' views keep the policy off it, Explain says so — for 60
// intervals, then planned again. Before, it was planned and rejected every
// round for ever (249 times in two minutes), and nothing said so. u is
// unplaced, so every round is an emergency round that solves.
func TestRejectedMoveIsHeldAfterThreeRounds(t *testing.T) {
	const interval = 50 * time.Millisecond
	d, err := Start(Config{
		Tier: interfaces.TierRegion, Instance: "r", NodeID: "n1", DataDir: t.TempDir(),
		RaftAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", Bootstrap: true, Parent: []string{"127.0.0.1:1"},
		Interval: interval, Policy: "test-stubborn",
		// h1 and h2 are records without sessions: a short silence limit
		// would leave them alone as unreachable (tiercore.Unreachable)
		// before the hold ends on the test's clock.
		LeaseTTL: time.Minute, StepDownAfter: 30 * time.Second,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	testutil.Until(t, "leader", 10*time.Second, func() bool { d.mu.Lock(); defer d.mu.Unlock(); return d.leader })
	for _, id := range []interfaces.ChildID{"h1", "h2"} {
		must(t, d, &fsm.PutChild{Child: interfaces.Child{ID: id, Tier: interfaces.TierHost, Capacity: interfaces.Load{CPU: 8}}})
	}
	must(t, d, &fsm.PutShards{Shards: []interfaces.Shard{{ID: "u", Job: "k", Load: interfaces.Load{CPU: 9}}}})
	ctl, err := control.New(d.controlConfig())
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * interval) }
	roundAt := func(t *testing.T, d *Daemon, now time.Time) (interfaces.Plan, int) {
		_, plan, rejected := controlRound(t, d, ctl, now)
		return plan, rejected
	}
	for i := 1; i <= 3; i++ {
		if plan, rejected := roundAt(t, d, at(i)); len(plan.Moves) != 1 || rejected != 1 {
			t.Fatalf("round %d: plan %v, %d rejected; want u → h1 planned and rejected", i, plan.Moves, rejected)
		}
	}
	if rej := d.LastRejections(); len(rej) != 1 || rej[0].Code != balancer.RejectCapacity {
		t.Fatalf("rejections %+v, want u's (capacity)", rej)
	}
	for i := 4; i <= 10; i++ {
		if plan, rejected := roundAt(t, d, at(i)); len(plan.Moves) != 0 || rejected != 0 {
			t.Fatalf("round %d: plan %v, %d rejected; want u → h1 held (not planned, nothing rejected)", i, plan.Moves, rejected)
		}
	}
	resp, err := d.Explain(context.Background(), &wire.ExplainRequest{Shard: "u"})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range resp.GetFindings() {
		found = found || (strings.Contains(f, "backoff") && strings.Contains(f, "h1") && strings.Contains(f, "3 times in a row") && strings.Contains(f, "capacity"))
	}
	if !found {
		t.Errorf("explain u: findings %q, want the hold with its reason", resp.GetFindings())
	}
	// The hold ends 60 intervals after the third rejection: planned again.
	if plan, rejected := roundAt(t, d, at(3+backoffHoldRounds)); len(plan.Moves) != 1 || rejected != 1 {
		t.Errorf("after the hold: plan %v, %d rejected; want u → h1 planned (and rejected) again", plan.Moves, rejected)
	}
}
