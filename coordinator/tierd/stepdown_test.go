package tierd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
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

// A child that has gone quiet but still holds its lease (a region cut off from
// the global tier) is left alone by the round: nothing new is placed on it,
// nothing is moved off it, and its shards stay. Before, the leader placed and
// moved shards onto the quiet child; the source stopped them and the Assign
// never arrived (chaos, partition-region-from-global: shards stopped on the
// reachable region for the rest of the partition).
func TestQuietChildIsLeftAlone(t *testing.T) {
	ds := startGroup(t, 1, func(c *Config) {
		c.Policy, c.LeaseTTL, c.ReportInterval, c.Interval = "greedy", 20*time.Second, 100*time.Millisecond, 100*time.Millisecond
	})
	L := leaderOf(t, ds)
	r1, r2, r1held := twoChildrenWithShards(t, L)
	r1.report.Store(false)
	// Past the silence limit: r1 is quiet, its 20 s lease far from over.
	time.Sleep(3 * L.cfg.StepDownAfter)
	submit(t, L, "b", 8)
	testutil.Until(t, "job b placed", 10*time.Second, func() bool {
		n := 0
		for _, a := range L.Tier().FSM.Assignments() {
			if jobOf(a.Shard) == "b" {
				n++
			}
		}
		return n == 8
	})
	for _, a := range L.Tier().FSM.Assignments() {
		if a.Child == "r1" && jobOf(a.Shard) == "b" {
			t.Errorf("shard %s of the new job placed on the quiet child r1", a.Shard)
		}
	}
	for s := range r1held {
		if st, _ := L.Tier().FSM.Shard(interfaces.ShardID(s)); st.Owner != "r1" || st.InFlight != nil {
			t.Errorf("r1's shard %s: owner %s, in flight %v; want it left on r1", s, st.Owner, st.InFlight)
		}
	}
	if len(r2.heldShards()) == 0 {
		t.Fatal("r2 holds nothing")
	}
}

func jobOf(s interfaces.ShardID) string {
	if i := strings.LastIndexByte(string(s), '/'); i >= 0 {
		return string(s[:i])
	}
	return string(s)
}

// A replica Raft has just made leader answers no Admin call from its state
// machine until it has applied its log (trackLeadership's barrier): a
// DeleteJob it answered NotFound from a state that did not hold the job yet
// was taken for done by the client, and the job's shard ran for good.
func TestJustElectedLeaderAnswersNothingFromItsState(t *testing.T) {
	// A control interval of an hour: the loop runs only when poked, so
	// nothing finishes a barrier behind the test's back.
	ds := startGroup(t, 1, func(c *Config) { c.Policy, c.Interval = "greedy", time.Hour })
	testutil.Until(t, "Raft leader", 10*time.Second, func() bool { return ds[0].IsLeader() })
	ds[0].poke()
	L := leaderOf(t, ds)
	submit(t, L, "j", 2)
	testutil.Until(t, "job j committed", 10*time.Second, func() bool { _, ok := L.Tier().FSM.Shard("j/1"); return ok })
	time.Sleep(100 * time.Millisecond) // the round submit poked has run
	// Raft leads; the daemon has not finished its barrier (as in the moments
	// after an election).
	L.mu.Lock()
	L.leader = false
	L.mu.Unlock()
	a := wire.NewAdminClient(dial(t, L.GRPCAddr()))
	_, err := a.DeleteJob(context.Background(), &wire.DeleteJobRequest{Job: "j"})
	if !errors.Is(wire.FromStatus(err), interfaces.ErrNotLeader) {
		t.Fatalf("DeleteJob before the barrier: %v, want a not-leader error (retry)", err)
	}
	L.poke()
	testutil.Until(t, "the barrier done", 10*time.Second, func() bool { return L.applied() })
	if _, err := a.DeleteJob(context.Background(), &wire.DeleteJobRequest{Job: "j"}); err != nil {
		t.Fatalf("DeleteJob after the barrier: %v", err)
	}
}

// A leader cut off from its children that Raft elects again (it still reaches
// its followers) steps down again: in its new term it has heard from nobody,
// but it remembers whom it lost (chaos soak: global-1 lost its leadership
// to an election 1 s into the cut-off, won it back and led on, cut off, for
// the rest of the fault; the regions reached a leader 17 s after it began).
func TestReelectedCutOffLeaderStepsDownAgain(t *testing.T) {
	ds, L, kids := groupWithChildren(t, 3)
	for _, k := range kids {
		k.report.Store(false)
	}
	// As after losing an election: a new term, nothing heard in it.
	L.stepDown()
	L.mu.Lock()
	L.leader, L.leaderSince = true, time.Now()
	L.mu.Unlock()
	quiet := time.Now()
	testutil.Until(t, "another replica leading", 10*time.Second, func() bool {
		for _, d := range ds {
			if d != L && d.IsLeader() {
				return true
			}
		}
		return false
	})
	t.Logf("leadership moved %v after the new term began", time.Since(quiet).Round(time.Millisecond))
}
