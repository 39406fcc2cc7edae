package raftnode_test

import (
	"context"
	"errors"
	"fmt"
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

// gatedFSM holds back applies while its gate is shut, so that a test can keep the
// applier's rounds in flight (proposed, committed or not, but not applied).
type gatedFSM struct {
	*fsm.FSM
	mu   sync.Mutex
	gate chan struct{} // nil when open
}

func (g *gatedFSM) wait() {
	g.mu.Lock()
	ch := g.gate
	g.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

func (g *gatedFSM) shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gate == nil {
		g.gate = make(chan struct{})
	}
}

func (g *gatedFSM) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gate != nil {
		close(g.gate)
		g.gate = nil
	}
}

func (g *gatedFSM) Apply(l *raft.Log) any { g.wait(); return g.FSM.Apply(l) }

func (g *gatedFSM) ApplyBatch(logs []*raft.Log) []any { g.wait(); return g.FSM.ApplyBatch(logs) }

// pipeCluster is tierCluster's tier (c0 cpu 1000, c1 cpu 10, n shards of cpu 1
// on c0) on replicas whose FSMs can be gated.
func pipeCluster(t *testing.T, shards int, opts ...raftest.Option) (*raftest.Cluster, func(i int) *raftnode.Tier) {
	t.Helper()
	c := raftest.New(t, 3, func() raft.FSM { return &gatedFSM{FSM: fsm.New()} }, opts...)
	tier := func(i int) *raftnode.Tier { return raftnode.NewTier(c.Node(i), c.FSM(i).(*gatedFSM).FSM) }
	l := tier(c.MustLeader())
	for _, ch := range []interfaces.Child{
		{ID: "c0", Tier: "host", Capacity: interfaces.Load{CPU: 1000}},
		{ID: "c1", Tier: "host", Capacity: interfaces.Load{CPU: 10}},
	} {
		mustOK(t, l, &fsm.PutChild{Child: ch})
	}
	var specs []interfaces.Shard
	var place []interfaces.Move
	for i := range shards {
		id := interfaces.ShardID(fmt.Sprintf("s%d", i))
		specs = append(specs, interfaces.Shard{ID: id, Job: "j", Load: interfaces.Load{CPU: 1}})
		place = append(place, interfaces.Move{Shard: id, To: "c0"})
	}
	mustOK(t, l, &fsm.PutShards{Shards: specs})
	mustOK(t, l, &fsm.ApplyPlan{Tier: "host", Moves: place})
	return c, tier
}

func toC1(from, to int) []interfaces.Move {
	var ms []interfaces.Move
	for i := from; i < to; i++ {
		ms = append(ms, interfaces.Move{Shard: interfaces.ShardID(fmt.Sprintf("s%d", i)), From: "c0", To: "c1", Epoch: 1, Reason: "test"})
	}
	return ms
}

type submitted struct {
	res *raftnode.PlanResult
	err error
}

func submitAsync(a *raftnode.Applier, moves []interfaces.Move) <-chan submitted {
	ch := make(chan submitted, 1)
	go func() {
		res, err := a.Submit(context.Background(), interfaces.Plan{Moves: moves})
		ch <- submitted{res, err}
	}()
	return ch
}

// waitLastIndex waits until the replica's log reaches index (an entry proposed).
func waitLastIndex(t *testing.T, rf *raft.Raft, index uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for rf.LastIndex() < index {
		if time.Now().After(deadline) {
			t.Fatalf("log stuck at %d, want %d", rf.LastIndex(), index)
		}
		time.Sleep(time.Millisecond)
	}
}

func usedCPU(t *testing.T, l *raftnode.Tier, id interfaces.ChildID) float64 {
	t.Helper()
	var used float64
	if err := l.Read(context.Background(), raftnode.ReadLinearizable, func(f *fsm.FSM) error {
		for _, u := range f.Children() {
			if u.Child.ID == id {
				used = u.Used.CPU
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return used
}

func codes(rs []balancer.Rejection) map[interfaces.ShardID]balancer.RejectCode {
	m := map[interfaces.ShardID]balancer.RejectCode{}
	for _, r := range rs {
		m[r.Move.Shard] = r.Code
	}
	return m
}

// Two rounds in flight at once: the second is verified while the first is
// proposed but not applied. It must neither move a shard the first one moves (from
// the same owner and epoch, or chained on the first landing) nor count on room in
// c1 that the first round's moves take.
func TestApplierPipelinedRoundsNeverDoubleMoveOrOverfill(t *testing.T) {
	c, tier := pipeCluster(t, 20)
	li := c.MustLeader()
	l := tier(li)
	a := raftnode.NewApplier(l, raftnode.ApplierConfig{Tier: "host", Depth: 4, MinPipelined: 1})
	defer a.Close()
	// A first round makes the applier current (its barrier) before the gate shuts.
	if r := <-submitAsync(a, toC1(19, 20)); r.err != nil || len(r.res.Committed) != 1 {
		t.Fatalf("warm-up: %+v %v", r.res, r.err)
	}
	g := c.FSM(li).(*gatedFSM)
	g.shut()
	defer g.open()
	rf := l.Raft()
	base := rf.LastIndex()
	p1 := submitAsync(a, toC1(0, 6)) // c1: 1 + 6 = 7 of 10
	waitLastIndex(t, rf, base+1)
	p2moves := append([]interfaces.Move{
		{Shard: "s0", From: "c0", To: "c1", Epoch: 1, Reason: "again"},   // the same move as p1's
		{Shard: "s1", From: "c1", To: "c0", Epoch: 2, Reason: "chained"}, // assumes p1 landed
	}, toC1(6, 10)...) // 4 more cpu into c1: only 3 fit while p1 is pending
	p2 := submitAsync(a, p2moves)
	waitLastIndex(t, rf, base+2)
	g.open()

	r1, r2 := <-p1, <-p2
	if r1.err != nil || len(r1.res.Committed) != 6 {
		t.Fatalf("first round: %+v %v, want 6 committed", r1.res, r1.err)
	}
	if r2.err != nil {
		t.Fatal(r2.err)
	}
	got := codes(r2.res.Rejected)
	want := map[interfaces.ShardID]balancer.RejectCode{"s0": balancer.RejectInFlight, "s1": balancer.RejectInFlight, "s9": balancer.RejectCapacity}
	if len(got) != len(want) || len(r2.res.Committed) != 3 {
		t.Fatalf("second round: committed %+v, rejected %+v; want s6..s8 committed and rejections %v", r2.res.Committed, r2.res.Rejected, want)
	}
	for s, code := range want {
		if got[s] != code {
			t.Errorf("second round: %s rejected as %v, want %v", s, got[s], code)
		}
	}
	if len(r2.res.Indexes) != 1 || len(r1.res.Indexes) != 1 || r2.res.Indexes[0] <= r1.res.Indexes[0] {
		t.Errorf("entries: first %v, second %v; want one each, in order", r1.res.Indexes, r2.res.Indexes)
	}
	if u := usedCPU(t, l, "c1"); u != 10 {
		t.Fatalf("c1 uses %v cpu, want exactly its capacity 10", u)
	}
	s0, _, err := l.Assignment(context.Background(), raftnode.ReadLinearizable, "s0")
	if err != nil || s0.Child != "c1" || s0.Epoch != 2 {
		t.Fatalf("s0 = %+v %v, want on c1 at epoch 2 (moved once)", s0, err)
	}
	c.MustEnsureSame()
}

// Rounds in flight when the leader loses its quorum fail with an unknown outcome;
// none of their moves may linger as pending (or be taken as done) once the
// replica leads again: the same moves then commit in full, and c1's capacity
// holds.
func TestApplierPipelinedRoundsLostWithLeadership(t *testing.T) {
	tmo := raftest.FastTimeouts()
	tmo.Heartbeat, tmo.Election, tmo.LeaderLease = time.Second, time.Second, time.Second
	c, tier := pipeCluster(t, 20, raftest.WithTimeouts(tmo))
	li := c.MustLeader()
	l := tier(li)
	a := raftnode.NewApplier(l, raftnode.ApplierConfig{Tier: "host", Depth: 4, MinPipelined: 1})
	defer a.Close()
	if r := <-submitAsync(a, toC1(19, 20)); r.err != nil || len(r.res.Committed) != 1 {
		t.Fatalf("warm-up: %+v %v", r.res, r.err)
	}
	rf := l.Raft()
	base := rf.LastIndex()
	c.Disconnect(li)
	p1 := submitAsync(a, toC1(0, 6))
	waitLastIndex(t, rf, base+1)
	p2 := submitAsync(a, append(toC1(6, 10), interfaces.Move{Shard: "s0", From: "c0", To: "c1", Epoch: 1}))
	waitLastIndex(t, rf, base+2)
	for i, p := range []<-chan submitted{p1, p2} {
		r := <-p
		if r.err == nil || !errors.Is(r.err, raftnode.ErrIndeterminate) && !errors.Is(r.err, interfaces.ErrNotLeader) {
			t.Fatalf("round %d on a leader cut off: %+v %v, want an error (indeterminate or not leader)", i+1, r.res, r.err)
		}
	}
	// The other two elect a leader of a later term, whose log lacks the lost
	// entries: they are dropped from the cut-off replica's log when it rejoins.
	// (Healed before that, the cut-off replica could win again and commit them:
	// hence "indeterminate".)
	if ni, err := c.Leader(20 * time.Second); err != nil || ni == li {
		t.Fatalf("leader while %d is cut off: %d %v", li, ni, err)
	}
	c.Heal()
	// Lead again.
	deadline := time.Now().Add(20 * time.Second)
	for !l.IsLeader() {
		if time.Now().After(deadline) {
			t.Fatal("the first leader did not lead again")
		}
		if ni, err := c.Leader(5 * time.Second); err == nil && ni != li {
			_ = c.Node(ni).Raft().LeadershipTransferToServer(raft.ServerID(l.ID()), raft.ServerAddress(l.RaftAddr())).Error()
		}
		time.Sleep(20 * time.Millisecond)
	}
	r1 := <-submitAsync(a, toC1(0, 6))
	if r1.err != nil || len(r1.res.Committed) != 6 {
		t.Fatalf("the lost moves again: %+v %v, want all 6 committed", r1.res, r1.err)
	}
	r2 := <-submitAsync(a, toC1(6, 10))
	if r2.err != nil || len(r2.res.Committed) != 3 || len(r2.res.Rejected) != 1 || r2.res.Rejected[0].Code != balancer.RejectCapacity {
		t.Fatalf("4 more into c1 with 3 cpu free: %+v %v, want 3 committed and 1 capacity rejection", r2.res, r2.err)
	}
	if u := usedCPU(t, l, "c1"); u != 10 {
		t.Fatalf("c1 uses %v cpu, want exactly its capacity 10", u)
	}
	c.MustEnsureSame()
}
