package raftnode_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/coordinator/raftnode"
	"github.com/strata-sched/strata/coordinator/raftnode/raftest"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/internal/testutil"
)

// TestLaggingReplicaCatchesUpFromSnapshot cuts a follower off while the leader
// writes enough to snapshot and truncate its log, so the follower can only catch up
// through InstallSnapshot (FSM Restore); the replicas must then be equal.
func TestLaggingReplicaCatchesUpFromSnapshot(t *testing.T) {
	tmo := raftest.FastTimeouts()
	tmo.SnapshotThreshold, tmo.TrailingLogs, tmo.SnapshotInterval = 32, 8, 50*time.Millisecond
	c := raftest.New(t, 3, newFSM, raftest.WithTimeouts(tmo))
	li := c.MustLeader()
	l := raftnode.NewTier(c.Node(li), c.FSM(li).(*fsm.FSM))
	mustOK(t, l, &fsm.PutChild{Child: interfaces.Child{ID: "c0", Tier: "host", Capacity: interfaces.Load{CPU: 1e6}}})
	lag := (li + 1) % 3
	c.Kill(lag)
	lagLast, err := c.Stores(lag).Logs.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		mustOK(t, l, &fsm.PutShards{Shards: []interfaces.Shard{{ID: interfaces.ShardID(fmt.Sprintf("s%d", i)), Job: "j", Load: interfaces.Load{CPU: 1}}}})
	}
	// Wait until the leader has snapshotted past what the follower has.
	testutil.Eventually(t, "a leader snapshot past index 100", 10*time.Second, func() error {
		snaps, err := c.Stores(li).Snapshots.List()
		if err == nil && len(snaps) > 0 && snaps[0].Index > 100 {
			return nil
		}
		return fmt.Errorf("snapshots %v, err %v", snaps, err)
	})
	// The leader's log no longer holds what the follower misses: only a snapshot
	// can bring it up to date.
	testutil.Eventually(t, "the leader log truncated past the follower's last index", 10*time.Second, func() error {
		first, err := c.Stores(li).Logs.FirstIndex()
		if err == nil && first > lagLast+1 {
			return nil
		}
		return fmt.Errorf("leader log still starts at %d (err %v); the follower's last index is %d", first, err, lagLast)
	})
	if err := c.Restart(lag); err != nil {
		t.Fatal(err)
	}
	c.MustEnsureSame()
	var n int
	_ = raftnode.NewTier(c.Node(lag), c.FSM(lag).(*fsm.FSM)).Read(context.Background(), raftnode.ReadStale, func(f *fsm.FSM) error {
		n = f.Stats().Shards
		return nil
	})
	if n != 200 {
		t.Fatalf("caught-up replica holds %d shards, want 200", n)
	}
	if snaps, err := c.Stores(lag).Snapshots.List(); err != nil || len(snaps) == 0 {
		t.Fatalf("the caught-up replica has no snapshot (%v, %v)", snaps, err)
	}
}
