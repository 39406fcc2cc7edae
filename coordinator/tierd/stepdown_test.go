package tierd

import (
	"fmt"
	"testing"
	"time"

	"github.com/strata-sched/strata/internal/testutil"
)

// A leader whose children all go quiet while its followers still hear it
// (a leader partitioned from its children, issue 20) hands its leadership to a
// follower, so the children, cycling through the replicas, find a leader
// before their leases end. Quiet is forced here: the fake children stop
// reporting on a live stream, as an iptables DROP leaves it.
func TestLeaderCutOffFromItsChildrenStepsDown(t *testing.T) {
	ds, L, kids := groupWithChildren(t, 3)
	for _, k := range kids {
		k.report.Store(false)
	}
	quiet := time.Now()
	testutil.Until(t, "another replica leading", 10*time.Second, func() bool {
		for _, d := range ds {
			if d != L && d.IsLeader() {
				return true
			}
		}
		return false
	})
	t.Logf("leadership moved %v after the children went quiet (step_down_after %v)", time.Since(quiet).Round(time.Millisecond), L.cfg.StepDownAfter)
}

// One quiet child of three is that child's trouble (a host down or cut off),
// not the leader's: the leader stays.
func TestLeaderKeepsLeadingWhenOneChildGoesQuiet(t *testing.T) {
	_, L, kids := groupWithChildren(t, 3)
	kids[0].report.Store(false)
	// Ten silence limits: the watch has looked many times.
	time.Sleep(10 * L.cfg.StepDownAfter)
	if !L.IsLeader() {
		t.Fatalf("the leader stepped down for one quiet child of three")
	}
}

// groupWithChildren starts a 3-replica tier with a short lease and n fake
// child tiers reporting to its leader every 100 ms, and waits until each has
// had two grants.
func groupWithChildren(t *testing.T, n int) ([]*Daemon, *Daemon, []*fakeChild) {
	ds := startGroup(t, 3, func(c *Config) {
		c.Policy, c.LeaseTTL, c.ReportInterval, c.Interval = "greedy", 2*time.Second, 100*time.Millisecond, 100*time.Millisecond
	})
	L := leaderOf(t, ds)
	kids := make([]*fakeChild, n)
	for i := range kids {
		kids[i] = &fakeChild{id: fmt.Sprintf("r%d", i+1)}
		connectChild(t, kids[i], L.GRPCAddr(), "L")
		t.Cleanup(kids[i].cancel)
	}
	testutil.Until(t, "grants to every child", 5*time.Second, func() bool {
		for _, k := range kids {
			if len(k.records("grant")) < 2 {
				return false
			}
		}
		return true
	})
	return ds, L, kids
}
