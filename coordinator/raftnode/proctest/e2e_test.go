package proctest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/raftnode"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/internal/testutil"
)

// setupTier registers children c0, c1 and shards s0..s{n-1}.
func setupTier(t *testing.T, c *Cluster, n int) {
	t.Helper()
	for _, id := range []interfaces.ChildID{"c0", "c1"} {
		var res raftnode.ResultJSONValue
		req := raftnode.ChildrenRequest{Children: []interfaces.Child{{ID: id, Tier: "host", Capacity: interfaces.Load{CPU: 1e6}}}}
		if err := c.Write(10*time.Second, "/v1/tier/children", req, &res); err != nil {
			t.Fatal(err)
		}
	}
	var specs []interfaces.Shard
	for i := range n {
		specs = append(specs, interfaces.Shard{ID: shardID(i), Job: "j", Load: interfaces.Load{CPU: 1}})
	}
	var res raftnode.ResultJSONValue
	if err := c.Write(10*time.Second, "/v1/tier/shards", raftnode.ShardsRequest{Shards: specs}, &res); err != nil {
		t.Fatal(err)
	}
	for _, op := range res.Ops {
		if op.Error != "" {
			t.Fatalf("put shard %s: %s", op.ID, op.Error)
		}
	}
}

func shardID(i int) interfaces.ShardID { return interfaces.ShardID(fmt.Sprintf("s%d", i)) }

func childOf(i int) interfaces.ChildID { return interfaces.ChildID(fmt.Sprintf("c%d", i%2)) }

func TestCrashDurabilityKillAllThree(t *testing.T) {
	c := Start(t, 3)
	const n = 20
	setupTier(t, c, n)
	want := map[interfaces.ShardID]interfaces.Assignment{}
	for i := range n {
		var e raftnode.EpochResponse
		if err := c.Write(10*time.Second, "/v1/tier/assign", raftnode.AssignRequest{Shard: shardID(i), Child: childOf(i)}, &e); err != nil {
			t.Fatalf("assign %s: %v", shardID(i), err)
		}
		want[shardID(i)] = interfaces.Assignment{Shard: shardID(i), Child: childOf(i), Epoch: e.Epoch}
	}
	// Moves sent to a follower are forwarded to the leader.
	li, err := c.Leader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	fol := c.Procs[(li+1)%3]
	for i := range 5 {
		m := interfaces.Move{Shard: shardID(i), From: childOf(i), To: childOf(i + 1), Epoch: want[shardID(i)].Epoch}
		var e raftnode.EpochResponse
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := fol.Client.Call(ctx, "POST", "/v1/tier/move", m, &e)
		cancel()
		if err != nil {
			t.Fatalf("move via follower %s: %v", fol.ID, err)
		}
		want[shardID(i)] = interfaces.Assignment{Shard: shardID(i), Child: childOf(i + 1), Epoch: e.Epoch}
	}
	before, err := c.EnsureSame(20 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	checkAssignments(t, before.Assignments, want)

	c.KillAll() // kill -9 of every process
	for i := range c.Procs {
		if err := c.Restart(i); err != nil {
			t.Fatal(err)
		}
	}
	after, err := c.EnsureSame(30 * time.Second)
	if err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if after.Digest != before.Digest {
		t.Fatalf("state digest after kill -9 and restart %s, before %s", after.Digest, before.Digest)
	}
	checkAssignments(t, after.Assignments, want)
	// The restarted group takes writes.
	var e raftnode.EpochResponse
	m := interfaces.Move{Shard: shardID(10), From: childOf(10), To: childOf(11), Epoch: want[shardID(10)].Epoch}
	if err := c.Write(10*time.Second, "/v1/tier/move", m, &e); err != nil || e.Epoch != m.Epoch+1 {
		t.Fatalf("move after restart: epoch %d, err %v", e.Epoch, err)
	}
}

func checkAssignments(t *testing.T, got []interfaces.Assignment, want map[interfaces.ShardID]interfaces.Assignment) {
	t.Helper()
	have := map[interfaces.ShardID]interfaces.Assignment{}
	for _, a := range got {
		have[a.Shard] = a
	}
	for id, w := range want {
		if have[id] != w {
			t.Errorf("shard %s: have %+v, want %+v", id, have[id], w)
		}
	}
}

// TestAckedWritesSurviveLeaderKillAndPartitions streams assigns from two writers
// while the leader is killed (-9) and restarted, a follower is cut off (minority
// partition) and then the leader is cut off (the majority elects a new one). Every
// acknowledged write must be in the final state of every replica, and the
// replicas must converge.
func TestAckedWritesSurviveLeaderKillAndPartitions(t *testing.T) {
	c := Start(t, 3)
	const perWriter = 400
	setupTier(t, c, 2*perWriter)

	var mu sync.Mutex
	acked := map[interfaces.ShardID]interfaces.Assignment{}
	unknown := map[interfaces.ShardID]interfaces.ChildID{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range perWriter {
				select {
				case <-stop:
					return
				default:
				}
				i := w*perWriter + k
				var e raftnode.EpochResponse
				err := c.Write(3*time.Second, "/v1/tier/assign", raftnode.AssignRequest{Shard: shardID(i), Child: childOf(i)}, &e)
				mu.Lock()
				if err == nil {
					acked[shardID(i)] = interfaces.Assignment{Shard: shardID(i), Child: childOf(i), Epoch: e.Epoch}
				} else {
					unknown[shardID(i)] = childOf(i)
				}
				mu.Unlock()
			}
		}()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	progress := func(phase string) {
		t.Helper()
		start := count()
		testutil.Eventually(t, phase+": 5 more writes acknowledged", 15*time.Second, func() error {
			if n := count() - start; n < 5 {
				return fmt.Errorf("%d writes acknowledged since the phase began", n)
			}
			return nil
		})
	}

	progress("start")
	li, err := c.Leader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.Kill(li)
	progress("after leader kill")
	if err := c.Restart(li); err != nil {
		t.Fatal(err)
	}
	progress("after restart")

	li, err = c.Leader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Partition((li + 1) % 3); err != nil { // minority: a follower alone
		t.Fatal(err)
	}
	progress("follower cut off")
	if err := c.Heal(); err != nil {
		t.Fatal(err)
	}
	li, err = c.Leader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Partition(li); err != nil { // the leader alone: the majority moves on
		t.Fatal(err)
	}
	progress("leader cut off")
	if err := c.Heal(); err != nil {
		t.Fatal(err)
	}
	progress("healed")
	close(stop)
	wg.Wait()

	final, err := c.EnsureSame(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	have := map[interfaces.ShardID]interfaces.Assignment{}
	for _, a := range final.Assignments {
		have[a.Shard] = a
	}
	lost := 0
	for id, w := range acked {
		if have[id] != w {
			lost++
			t.Errorf("acknowledged assign of %s lost or changed: have %+v, want %+v", id, have[id], w)
		}
	}
	for id, ch := range unknown {
		if a, ok := have[id]; ok && (a.Child != ch || a.Epoch != 1) {
			t.Errorf("unacknowledged assign of %s landed wrongly: %+v", id, a)
		}
	}
	for id := range have {
		_, a := acked[id]
		_, u := unknown[id]
		if !a && !u {
			t.Errorf("shard %s is assigned although nobody assigned it", id)
		}
	}
	t.Logf("acknowledged %d writes, %d with unknown outcome (%d of those landed), lost %d", len(acked), len(unknown), len(have)-len(acked), lost)
}

// TestPartitionBlocksBothDirections checks the test-mode stream layer: a replica
// whose peers are blocked loses leadership or followers, and writes to the
// isolated replica fail with not-leader.
func TestPartitionBlocksBothDirections(t *testing.T) {
	c := Start(t, 3)
	li, err := c.Leader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Partition(li); err != nil {
		t.Fatal(err)
	}
	// The old leader steps down (lease) and the others elect a new leader.
	testutil.Eventually(t, fmt.Sprintf("isolated leader %d stepped down", li), 10*time.Second, func() error {
		ctx, cancel := ctxT(time.Second)
		st, err := c.Procs[li].Client.Status(ctx)
		cancel()
		if err != nil {
			return err
		}
		if st.State == "Leader" {
			return fmt.Errorf("%d still leads", li)
		}
		return nil
	})
	ctx, cancel := ctxT(5 * time.Second)
	defer cancel()
	err = c.Procs[li].Client.Call(ctx, "POST", "/v1/tier/children", raftnode.ChildrenRequest{Children: []interfaces.Child{{ID: "cx", Tier: "host", Capacity: interfaces.Load{CPU: 1}}}}, nil)
	if !errors.Is(err, interfaces.ErrNotLeader) {
		t.Fatalf("write on the isolated replica: %v, want not leader", err)
	}
	var blocked raftnode.BlockRequest
	if err := c.Procs[li].Client.Call(ctx, "GET", "/v1/test/block", nil, &blocked); err != nil || len(blocked.Peers) != 2 {
		t.Fatalf("blocked list of the isolated replica: %+v %v, want 2 peers", blocked, err)
	}
	if err := c.Heal(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EnsureSame(20 * time.Second); err != nil {
		t.Fatal(err)
	}
}
