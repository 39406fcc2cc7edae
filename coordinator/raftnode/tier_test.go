package raftnode_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/coordinator/raftnode"
	"github.com/strata-sched/strata/coordinator/raftnode/raftest"
	"github.com/strata-sched/strata/interfaces"
)

func newFSM() raft.FSM { return fsm.New() }

// tierCluster is an in-memory group of 3 tier replicas with children c0, c1 (cpu 10
// each), c2 (draining) and shards s0..s{n-1} (cpu 1) placed on c0.
func tierCluster(t *testing.T, shards int) (*raftest.Cluster, func(i int) *raftnode.Tier) {
	t.Helper()
	c := raftest.New(t, 3, newFSM)
	tier := func(i int) *raftnode.Tier { return raftnode.NewTier(c.Node(i), c.FSM(i).(*fsm.FSM)) }
	l := tier(c.MustLeader())
	ctx := context.Background()
	children := []interfaces.Child{
		{ID: "c0", Tier: "host", Capacity: interfaces.Load{CPU: 1000}},
		{ID: "c1", Tier: "host", Capacity: interfaces.Load{CPU: 10}},
		{ID: "c2", Tier: "host", Capacity: interfaces.Load{CPU: 1000}, State: interfaces.ChildDraining},
	}
	for _, ch := range children {
		mustOK(t, l, &fsm.PutChild{Child: ch})
	}
	var specs []interfaces.Shard
	for i := range shards {
		specs = append(specs, interfaces.Shard{ID: interfaces.ShardID(fmt.Sprintf("s%d", i)), Job: "j", Load: interfaces.Load{CPU: 1}})
	}
	mustOK(t, l, &fsm.PutShards{Shards: specs})
	for i := range shards {
		if _, err := l.Assign(ctx, interfaces.ShardID(fmt.Sprintf("s%d", i)), "c0", "setup"); err != nil {
			t.Fatal(err)
		}
	}
	return c, tier
}

func mustOK(t *testing.T, tr *raftnode.Tier, cmd fsm.Command) {
	t.Helper()
	r, err := tr.Exec(context.Background(), cmd)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestTierWritesAndReadPaths(t *testing.T) {
	c, tier := tierCluster(t, 3)
	li := c.MustLeader()
	l, f := tier(li), tier((li+1)%3)
	ctx := context.Background()
	e, err := l.Move(ctx, interfaces.Move{Shard: "s0", From: "c0", To: "c1", Epoch: 1})
	if err != nil || e != 2 {
		t.Fatalf("move: epoch %d err %v, want 2", e, err)
	}
	if _, err := l.Move(ctx, interfaces.Move{Shard: "s0", From: "c1", To: "c0", Epoch: 1}); !errors.Is(err, interfaces.ErrStaleEpoch) {
		t.Fatalf("move with stale epoch: %v, want ErrStaleEpoch", err)
	}
	if _, err := l.Assign(ctx, "s0", "c0", ""); !errors.Is(err, interfaces.ErrConflict) {
		t.Fatalf("assign of a placed shard: %v, want ErrConflict", err)
	}
	if _, err := f.Move(ctx, interfaces.Move{Shard: "s1", From: "c0", To: "c1", Epoch: 1}); !errors.Is(err, interfaces.ErrNotLeader) {
		t.Fatalf("write on follower: %v, want ErrNotLeader", err)
	}
	if _, _, err := f.Assignment(ctx, raftnode.ReadLinearizable, "s0"); !errors.Is(err, interfaces.ErrNotLeader) {
		t.Fatalf("linearizable read on follower: %v, want ErrNotLeader", err)
	}
	if err := c.WaitApplied(l.Raft().LastIndex(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	a, found, err := f.Assignment(ctx, raftnode.ReadStale, "s0")
	if err != nil || !found || a.Child != "c1" || a.Epoch != 2 {
		t.Fatalf("stale read on caught-up follower: %+v %v %v", a, found, err)
	}
	if _, _, err := f.Assignment(ctx, "bogus", "s0"); !errors.Is(err, interfaces.ErrInvalid) {
		t.Fatalf("bad read mode: %v", err)
	}
	// A follower cut off from the leader refuses stale reads with a lag bound.
	c.Disconnect((li + 1) % 3)
	time.Sleep(300 * time.Millisecond)
	if err := f.ReadStale(100*time.Millisecond, func(raft.FSM) error { return nil }); !errors.Is(err, raftnode.ErrTooStale) {
		t.Fatalf("bounded stale read on a cut-off follower: %v, want ErrTooStale", err)
	}
}
