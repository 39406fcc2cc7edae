package exec

import (
	"testing"
	"time"

	"github.com/strata-sched/strata/interfaces"
	"pgregory.net/rapid"
)

type itemKey struct {
	shard interfaces.ShardID
	seq   uint64
}

// TestPropertyNoLossNoDuplicateShardOrder drives a core with random shards,
// rate and cost changes, removals and advances under both disciplines and
// checks, from the trace and the stats:
//   - no work lost or duplicated: per shard, arrived = completed + running +
//     queued + dropped; every item starts once, completes at most once and
//     only after it started, and Stats agree with the trace;
//   - per-shard FIFO: a shard's items start in arrival order with seq 0, 1, …
//     (under LLF too);
//   - work conservation: after each step, a host with queued items has every
//     core busy, and never more busy cores than it has;
//   - latency ≥ the item's service time, and misses are latency > SLO.
func TestPropertyNoLossNoDuplicateShardOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cores := rapid.IntRange(1, 4).Draw(t, "cores")
		disc := rapid.SampledFrom([]Discipline{LLF, FIFO}).Draw(t, "discipline")
		arr := rapid.SampledFrom([]Arrivals{Poisson, Deterministic}).Draw(t, "arrivals")
		maxQ := rapid.SampledFrom([]int{5, 1000, 0}).Draw(t, "max_queued")
		started := map[itemKey]bool{}
		completed := map[itemKey]bool{}
		nextStart := map[interfaces.ShardID]uint64{}
		lastArrival := map[interfaces.ShardID]int64{}
		starts := map[interfaces.ShardID]uint64{}
		completes := map[interfaces.ShardID]uint64{}
		misses := map[interfaces.ShardID]uint64{}
		params := map[interfaces.ShardID]Params{}
		var c *Core
		cfg := Config{Cores: cores, Discipline: disc, Arrivals: arr, MaxQueued: maxQ,
			Seed: rapid.Uint64().Draw(t, "seed"), Window: time.Second,
			Trace: func(e Event) {
				k := itemKey{e.Shard, e.Seq}
				switch e.Kind {
				case EvStart:
					if started[k] {
						t.Fatalf("item %v started twice", k)
					}
					if e.Seq != nextStart[e.Shard] {
						t.Fatalf("shard %s started seq %d, want %d (FIFO within a shard)", e.Shard, e.Seq, nextStart[e.Shard])
					}
					if e.Arrival < lastArrival[e.Shard] || e.Arrival > e.At {
						t.Fatalf("shard %s started an item of arrival %d after one of %d (at %d)", e.Shard, e.Arrival, lastArrival[e.Shard], e.At)
					}
					nextStart[e.Shard]++
					lastArrival[e.Shard] = e.Arrival
					started[k] = true
					starts[e.Shard]++
				case EvComplete:
					if !started[k] || completed[k] {
						t.Fatalf("item %v completed without a start or twice", k)
					}
					completed[k] = true
					completes[e.Shard]++
					p := params[e.Shard]
					if lat := e.At - e.Arrival; lat < 1 {
						t.Fatalf("item %v latency %d", k, lat)
					} else if lat > int64(p.SLO) {
						misses[e.Shard]++
					}
				}
			}}
		c, err := New(cfg, t0)
		if err != nil {
			t.Fatal(err)
		}
		now := t0
		ids := []interfaces.ShardID{"a", "b", "c", "d", "e"}
		gone := map[interfaces.ShardID]bool{}
		drawParams := func() Params {
			return Params{
				Rate: float64(rapid.IntRange(0, 400).Draw(t, "rate")),
				Cost: time.Duration(rapid.IntRange(1, 20000).Draw(t, "cost_us")) * time.Microsecond,
				SLO:  time.Duration(rapid.IntRange(1, 200).Draw(t, "slo_ms")) * time.Millisecond,
			}
		}
		steps := rapid.IntRange(1, 40).Draw(t, "steps")
		for range steps {
			now = now.Add(time.Duration(rapid.IntRange(0, 300).Draw(t, "dt_ms")) * time.Millisecond)
			id := rapid.SampledFrom(ids).Draw(t, "id")
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0:
				if _, ok := c.shards[id]; !ok && !gone[id] {
					p := drawParams()
					params[id] = p
					if err := c.Add(now, id, p); err != nil {
						t.Fatal(err)
					}
				}
			case 1:
				if _, ok := c.shards[id]; ok {
					// Params change after the advance: completions before now are
					// judged by the old SLO.
					c.Advance(now)
					p := drawParams()
					params[id] = p
					if err := c.Update(now, id, p); err != nil {
						t.Fatal(err)
					}
				}
			case 2:
				if _, ok := c.shards[id]; ok {
					fin, err := c.Remove(now, id)
					if err != nil {
						t.Fatal(err)
					}
					check(t, id, fin, starts, completes, misses)
					gone[id] = true
				}
			default:
				c.Advance(now)
			}
			queued := 0
			for sid := range c.shards {
				st, _ := c.Stats(sid)
				check(t, sid, st, starts, completes, misses)
				queued += st.Queued
			}
			if c.Busy() > cores || (queued > 0 && c.Busy() != cores) {
				t.Fatalf("busy %d of %d cores with %d items queued", c.Busy(), cores, queued)
			}
			if queued != c.queued {
				t.Fatalf("host counts %d queued, shards hold %d", c.queued, queued)
			}
			if maxQ > 0 && queued > maxQ {
				t.Fatalf("%d queued > max %d", queued, maxQ)
			}
		}
	})
}

func check(t *rapid.T, id interfaces.ShardID, st Stats, starts, completes, misses map[interfaces.ShardID]uint64) {
	if st.Arrived != st.Completed+uint64(st.Running)+uint64(st.Queued)+st.Dropped {
		t.Fatalf("shard %s: arrived %d ≠ completed %d + running %d + queued %d + dropped %d", id, st.Arrived, st.Completed, st.Running, st.Queued, st.Dropped)
	}
	if st.Completed != completes[id] || uint64(st.Running) != starts[id]-completes[id] || st.Missed != misses[id] {
		t.Fatalf("shard %s: stats %+v disagree with the trace: started %d completed %d missed %d", id, st, starts[id], completes[id], misses[id])
	}
}
