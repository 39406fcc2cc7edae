package raftnode_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/coordinator/raftnode"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/internal/testutil"
)

// tcpCluster starts n tier replicas in this process, each with its own bbolt log
// in a temporary directory and a real TCP transport on 127.0.0.1.
func tcpCluster(tb testing.TB, n int) []*raftnode.Tier {
	tb.Helper()
	var tiers []*raftnode.Tier
	for i := range n {
		t, err := raftnode.StartTier(raftnode.Config{ID: fmt.Sprintf("n%d", i), Dir: tb.TempDir(),
			RaftBind: "127.0.0.1:0", AdminBind: "127.0.0.1:0", RawWrites: true}, fsm.Options{})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = t.Shutdown() })
		tiers = append(tiers, t)
	}
	if err := tiers[0].Bootstrap(); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := tiers[0].WaitLeader(ctx); err != nil {
		tb.Fatal(err)
	}
	for _, t := range tiers[1:] {
		if err := t.Join(ctx, tiers[0].AdminAddr()); err != nil {
			tb.Fatal(err)
		}
	}
	return tiers
}

func leaderOf(tb testing.TB, tiers []*raftnode.Tier) *raftnode.Tier {
	tb.Helper()
	var leader *raftnode.Tier
	testutil.Until(tb, "a leader", 20*time.Second, func() bool {
		for _, t := range tiers {
			if t.IsLeader() {
				leader = t
				return true
			}
		}
		return false
	})
	return leader
}

// BenchmarkCommitMoves measures the commit path of a tier's control round on a
// 3-replica group over TCP with bbolt logs: W concurrent submitters each verify
// a plan of K moves of their own shards against the leader's FSM
// (FSM.VerifyPlan, back and forth between two children with the epoch
// compare-and-set) and commit the accepted moves in one ApplyPlan entry, as
// coordinator/tierd does. Reported: committed moves per second and the p50/p99
// latency from verify to commit of a plan.
func BenchmarkCommitMoves(b *testing.B) {
	for _, tc := range []struct{ workers, perPlan int }{{1, 1}, {8, 16}, {16, 8}, {4, 32}, {8, 32}, {16, 16}, {32, 8}, {64, 16}, {4, 256}} {
		b.Run(fmt.Sprintf("workers=%d/moves_per_plan=%d", tc.workers, tc.perPlan), func(b *testing.B) {
			benchCommit(b, tc.workers, tc.perPlan)
		})
	}
}

func benchCommit(b *testing.B, workers, perPlan int) {
	tiers := tcpCluster(b, 3)
	l := leaderOf(b, tiers)
	ctx := context.Background()
	for _, id := range []interfaces.ChildID{"c0", "c1"} {
		r, err := l.Exec(ctx, &fsm.PutChild{Child: interfaces.Child{ID: id, Tier: "host", Capacity: interfaces.Load{CPU: 1e12}}})
		if err != nil || r.Err() != nil {
			b.Fatal(err, r)
		}
	}
	nShards := workers * perPlan
	specs := make([]interfaces.Shard, nShards)
	place := make([]interfaces.Move, nShards)
	for i := range specs {
		specs[i] = interfaces.Shard{ID: interfaces.ShardID(fmt.Sprintf("s%d", i)), Job: "j", Load: interfaces.Load{CPU: 1}}
		place[i] = interfaces.Move{Shard: specs[i].ID, To: "c0"}
	}
	if r, err := l.Exec(ctx, &fsm.PutShards{Shards: specs}); err != nil || r.Err() != nil {
		b.Fatal(err, r)
	}
	if r, err := l.Exec(ctx, &fsm.ApplyPlan{Tier: "bench", Moves: place}); err != nil || r.Err() != nil {
		b.Fatal(err, r)
	}

	type shard struct {
		id    interfaces.ShardID
		owner interfaces.ChildID
		epoch interfaces.Epoch
	}
	var mu sync.Mutex
	var lat []time.Duration
	committed := 0
	plans := b.N
	var next int
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := range workers {
		mine := make([]shard, perPlan)
		for k := range mine {
			mine[k] = shard{id: specs[w*perPlan+k].ID, owner: "c0", epoch: 1}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			moves := make([]interfaces.Move, perPlan)
			for {
				mu.Lock()
				if next >= plans {
					mu.Unlock()
					return
				}
				next++
				mu.Unlock()
				for k, s := range mine {
					to := interfaces.ChildID("c1")
					if s.owner == "c1" {
						to = "c0"
					}
					moves[k] = interfaces.Move{Shard: s.id, From: s.owner, To: to, Epoch: s.epoch, Reason: "bench"}
				}
				t0 := time.Now()
				v := l.FSM.VerifyPlan(moves)
				if len(v.Accepted) != perPlan {
					b.Errorf("verified %d of %d moves: %+v", len(v.Accepted), perPlan, v.Rejected)
					return
				}
				res, err := l.Exec(ctx, &fsm.ApplyPlan{Tier: "bench", Moves: v.Accepted})
				d := time.Since(t0)
				if err == nil {
					err = res.Err()
				}
				if err != nil {
					b.Error(err)
					return
				}
				for k, op := range res.Ops {
					mine[k].owner, mine[k].epoch = v.Accepted[k].To, op.Epoch
				}
				mu.Lock()
				lat = append(lat, d)
				committed += perPlan
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if len(lat) == 0 {
		return
	}
	b.ReportMetric(float64(committed)/elapsed.Seconds(), "moves/s")
	reportPercentiles(b, lat, 0.50, 0.99)
	b.ReportMetric(0, "ns/op")
}

// reportPercentiles reports the latencies' percentiles in ms as pNN-ms.
func reportPercentiles(b *testing.B, lat []time.Duration, ps ...float64) {
	slices.Sort(lat)
	for _, p := range ps {
		v := lat[min(len(lat)-1, int(p*float64(len(lat))))]
		b.ReportMetric(float64(v.Microseconds())/1000, fmt.Sprintf("p%02.0f-ms", 100*p))
	}
}

// BenchmarkDiskFsync is the reference for the commit figures: the latency of
// appending 4 KiB to a file in the test's temporary directory (the same disk
// as the Raft logs) and calling fsync, one op per append.
func BenchmarkDiskFsync(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "probe"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	reportPercentiles(b, lat, 0.50, 0.90, 0.99)
}
