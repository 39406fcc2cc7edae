package raftnode_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/strata-sched/strata/balancer"
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

func TestApplierCommitsAcceptedRejectsRest(t *testing.T) {
	c, tier := tierCluster(t, 12)
	l := tier(c.MustLeader())
	a := raftnode.NewApplier(l, raftnode.ApplierConfig{Tier: "host"})
	defer a.Close()
	mv := func(s, from, to string, e interfaces.Epoch) interfaces.Move {
		return interfaces.Move{Shard: interfaces.ShardID(s), From: interfaces.ChildID(from), To: interfaces.ChildID(to), Epoch: e, Reason: "test"}
	}
	plan := interfaces.Plan{Tier: "host", Moves: []interfaces.Move{
		mv("s0", "c0", "c1", 1),   // ok
		mv("s1", "c0", "c1", 7),   // stale epoch
		mv("s2", "c0", "c2", 1),   // target draining
		mv("s0", "c0", "c1", 1),   // duplicate in plan
		mv("nope", "c0", "c1", 1), // unknown shard
		mv("s3", "c0", "c1", 1),   // ok
	}}
	res, err := a.Submit(context.Background(), plan)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Committed) != 2 || res.Committed[0].Move.Shard != "s0" || res.Committed[1].Move.Shard != "s3" {
		t.Fatalf("committed = %+v, want s0 and s3", res.Committed)
	}
	for _, cm := range res.Committed {
		if cm.Epoch != 2 {
			t.Errorf("shard %s: new epoch %d, want 2", cm.Move.Shard, cm.Epoch)
		}
	}
	want := []balancer.RejectCode{balancer.RejectStaleEpoch, balancer.RejectTargetInactive, balancer.RejectDuplicate, balancer.RejectUnknownShard}
	if len(res.Rejected) != len(want) {
		t.Fatalf("rejected = %+v, want codes %v", res.Rejected, want)
	}
	for i, r := range res.Rejected {
		if r.Code != want[i] || r.Reason == "" {
			t.Errorf("rejection %d = %v %q, want %v with a reason", i, r.Code, r.Reason, want[i])
		}
	}
	if len(res.Indexes) != 1 {
		t.Errorf("indexes = %v, want one entry", res.Indexes)
	}
	// Capacity: c1 holds 2 of 10 cpu; moving 9 more must be cut at 8.
	var moves []interfaces.Move
	for i := 4; i < 13 && i < 12; i++ {
		moves = append(moves, mv(fmt.Sprintf("s%d", i), "c0", "c1", 1))
	}
	res, err = a.Submit(context.Background(), interfaces.Plan{Moves: moves})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Committed) != 8 {
		t.Fatalf("committed %d moves into c1 with 8 cpu free, want 8 (rejected %+v)", len(res.Committed), res.Rejected)
	}
	for _, r := range res.Rejected {
		if r.Code != balancer.RejectCapacity {
			t.Errorf("rejection %v, want capacity", r)
		}
	}
	// Every replica holds the result.
	c.MustEnsureSame()
	got, found, err := l.Assignment(context.Background(), raftnode.ReadLinearizable, "s3")
	if err != nil || !found || got.Child != "c1" || got.Epoch != 2 {
		t.Fatalf("s3 = %+v found=%v err=%v, want c1 epoch 2", got, found, err)
	}
}

func TestApplierSplitsLargePlansAndGroupsConcurrentOnes(t *testing.T) {
	c, tier := tierCluster(t, 40)
	l := tier(c.MustLeader())
	a := raftnode.NewApplier(l, raftnode.ApplierConfig{Tier: "host", MaxBatch: 4})
	defer a.Close()
	var moves []interfaces.Move
	for i := range 10 {
		moves = append(moves, interfaces.Move{Shard: interfaces.ShardID(fmt.Sprintf("s%d", i)), From: "c0", To: "c2x", Epoch: 1})
	}
	// c2x does not exist: all rejected, nothing committed, no entry.
	res, err := a.Submit(context.Background(), interfaces.Plan{Moves: moves})
	if err != nil || len(res.Committed) != 0 || len(res.Rejected) != 10 || len(res.Indexes) != 0 {
		t.Fatalf("all-rejected plan: %+v %v", res, err)
	}
	for i := range moves {
		moves[i].To = "c1"
	}
	res, err = a.Submit(context.Background(), interfaces.Plan{Moves: moves})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Committed) != 10 || len(res.Indexes) != 3 {
		t.Fatalf("10 moves with MaxBatch 4: committed %d in entries %v, want 10 in 3", len(res.Committed), res.Indexes)
	}
	// Concurrent single-move plans of distinct shards back to c0: all commit.
	var wg sync.WaitGroup
	errs := make(chan error, 30)
	for i := 10; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := interfaces.Move{Shard: interfaces.ShardID(fmt.Sprintf("s%d", i)), From: "c0", To: "c1", Epoch: 1}
			r, err := a.Submit(context.Background(), interfaces.Plan{Moves: []interfaces.Move{m}})
			switch {
			case err != nil:
				errs <- err
			case len(r.Committed) == 1:
				errs <- nil
			case len(r.Rejected) == 1 && r.Rejected[0].Code == balancer.RejectCapacity:
				errs <- nil // c1 is full: fine, but it must be the reason
			default:
				errs <- fmt.Errorf("shard %s: %+v", m.Shard, r)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	// c1 (capacity 10) must never be over capacity, whatever the grouping.
	var used float64
	_ = l.Read(context.Background(), raftnode.ReadLinearizable, func(f *fsm.FSM) error {
		for _, u := range f.Children() {
			if u.Child.ID == "c1" {
				used = u.Used.CPU
			}
		}
		return nil
	})
	if used != 10 {
		t.Fatalf("c1 uses %v cpu after filling it with concurrent plans, want exactly its capacity 10", used)
	}
	c.MustEnsureSame()
}

func TestApplierRefusesMalformedPlanAlone(t *testing.T) {
	c, tier := tierCluster(t, 2)
	a := raftnode.NewApplier(tier(c.MustLeader()), raftnode.ApplierConfig{Tier: "host"})
	defer a.Close()
	bad := interfaces.Plan{Moves: []interfaces.Move{{Shard: "s0", From: "c0", To: "c1", Epoch: 1, Delta: math.NaN()}}}
	if _, err := a.Submit(context.Background(), bad); !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), "delta") {
		t.Fatalf("plan with a NaN delta: %v, want ErrInvalid naming the delta", err)
	}
	good := interfaces.Plan{Moves: []interfaces.Move{{Shard: "s1", From: "c0", To: "c1", Epoch: 1}}}
	if res, err := a.Submit(context.Background(), good); err != nil || len(res.Committed) != 1 {
		t.Fatalf("good plan after a bad one: %+v %v", res, err)
	}
}

func TestApplierOnFollowerSaysNotLeader(t *testing.T) {
	c, tier := tierCluster(t, 2)
	f := tier((c.MustLeader() + 1) % 3)
	a := raftnode.NewApplier(f, raftnode.ApplierConfig{})
	defer a.Close()
	_, err := a.Submit(context.Background(), interfaces.Plan{Moves: []interfaces.Move{{Shard: "s0", From: "c0", To: "c1", Epoch: 1}}})
	var nl *raftnode.NotLeaderError
	if !errors.Is(err, interfaces.ErrNotLeader) || !errors.As(err, &nl) || nl.LeaderID == "" {
		t.Fatalf("submit on follower: %v, want not leader naming the leader", err)
	}
	a.Close()
	if _, err := a.Submit(context.Background(), interfaces.Plan{Moves: []interfaces.Move{{Shard: "s0"}}}); err == nil {
		t.Fatal("submit after close succeeded")
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
