package stream_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/sdk/stream"
	"github.com/strata-sched/strata/sdk/stream/natstest"
)

// clock records when each shard processed each record (the neighbours'
// output timestamps).
type clock struct {
	mu sync.Mutex
	at map[interfaces.ShardID][]time.Time
}

func (c *clock) tick(id interfaces.ShardID) {
	c.mu.Lock()
	c.at[id] = append(c.at[id], time.Now())
	c.mu.Unlock()
}

// maxGap is the longest time between two records of shard processed
// within [from, to].
func (c *clock) maxGap(id interfaces.ShardID, from, to time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var g time.Duration
	ts := c.at[id]
	for i := 1; i < len(ts); i++ {
		if ts[i].After(from) && ts[i-1].Before(to) {
			g = max(g, ts[i].Sub(ts[i-1]))
		}
	}
	return g
}

// ballastOp counts records and carries size bytes of state.
type ballastOp struct {
	id      interfaces.ShardID
	c       *clock
	count   uint64
	ballast []byte
}

func (o *ballastOp) Process(r stream.Record, emit func(uint64, []byte)) error {
	o.count++
	o.c.tick(o.id)
	if o.count%20 == 0 {
		emit(o.count/20, nil)
	}
	return nil
}

func (o *ballastOp) Snapshot() ([]byte, error) {
	b := make([]byte, 8, 8+len(o.ballast))
	binary.BigEndian.PutUint64(b, o.count)
	return append(b, o.ballast...), nil
}

func pctl(v []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[max(0, min(len(s)-1, int(p*float64(len(s))+0.999999)-1))]
}

// BenchmarkMovePause moves shard 0 of a 4-partition job back and forth
// between two runners on a real nats-server while a producer publishes 200
// records/s to each partition; shards 1 and 2 run on the first runner, 3 on
// the second, and stay. Per state size (the operator's checkpointed bytes)
// and mode — cold: the old owner writes its final checkpoint at the drop
// and the new one loads it; prepared: the new owner restores the latest
// periodic checkpoint ahead (Runner.Prepare, the warm-up phase) and the old
// one skips the final upload (FinalCheckpointMax), so the new owner only
// replays the records since — it reports the pause of the moved shard (the
// old owner's last record to the new owner's first), the worker-side time
// of the drop + add, and the longest gap between two records of any
// neighbour during the moves against the same before them.
//
//	go test -run '^$' -bench BenchmarkMovePause -benchtime 10x ./sdk/stream
func BenchmarkMovePause(b *testing.B) {
	for _, mib := range []int{0, 1, 4, 16, 64} {
		for _, mode := range []string{"cold", "prepared"} {
			b.Run(fmt.Sprintf("state=%dMiB/%s", mib, mode), func(b *testing.B) { benchMove(b, mib<<20, mode == "prepared") })
		}
	}
}

func benchMove(b *testing.B, size int, prepared bool) {
	srv, err := natstest.Start(b.TempDir(), 0)
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Stop()
	nc, err := nats.Connect(srv.URL)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc, jetstream.WithDefaultTimeout(30*time.Second)) // a 64 MiB object on a loaded machine
	ctx := context.Background()
	n := stream.Names{Job: "mv"}
	clk := &clock{at: map[interfaces.ShardID][]time.Time{}}
	var evMu sync.Mutex
	firsts, stops := map[interfaces.Epoch]time.Time{}, map[interfaces.Epoch]time.Time{}
	onEvent := func(e stream.Event) {
		if e.Shard != "mv/0" {
			return
		}
		evMu.Lock()
		defer evMu.Unlock()
		switch e.Kind {
		case "first":
			firsts[e.Epoch] = e.At
		case "stopped":
			stops[e.Epoch] = e.At
		}
	}
	factory := func(id interfaces.ShardID, state []byte) (stream.Operator, error) {
		o := &ballastOp{id: id, c: clk}
		if state == nil {
			if id == "mv/0" {
				o.ballast = make([]byte, size)
			}
			return o, nil
		}
		o.count, o.ballast = binary.BigEndian.Uint64(state), state[8:]
		return o, nil
	}
	cfg := stream.Config{JS: js, Names: n, New: factory, CheckpointEvery: 500 * time.Millisecond, OnEvent: onEvent, Logf: b.Logf}
	if prepared {
		cfg.FinalCheckpointMax = stream.InlineMax
	}
	var rs [2]*stream.Runner
	for i := range rs {
		if rs[i], err = stream.NewRunner(ctx, cfg); err != nil {
			b.Fatal(err)
		}
		defer rs[i].Close()
	}
	stop := make(chan struct{})
	var pwg sync.WaitGroup
	pwg.Add(1)
	go func() { // 4 partitions × 200 records/s
		defer pwg.Done()
		tk := time.NewTicker(5 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
			}
			for p := 0; p < 4; p++ {
				_, _ = js.PublishMsgAsync(n.InputMsg(p, time.Now(), []byte("x")))
			}
		}
	}()
	defer func() { close(stop); pwg.Wait() }()
	shard := func(p int) interfaces.Shard {
		return interfaces.Shard{ID: interfaces.ShardID(fmt.Sprintf("mv/%d", p)), Job: "mv"}
	}
	for p, r := range []int{0, 0, 0, 1} {
		if err := rs[r].OnAdd(ctx, shard(p), 1); err != nil {
			b.Fatal(err)
		}
	}
	time.Sleep(1500 * time.Millisecond) // a periodic checkpoint of shard 0 is written
	base := time.Now()
	time.Sleep(time.Second)
	var baseGap time.Duration
	for p := 1; p < 4; p++ {
		baseGap = max(baseGap, clk.maxGap(shard(p).ID, base, time.Now()))
	}
	var pauses, handoffs []time.Duration
	var neighbourGap time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		from, to := rs[i%2], rs[(i+1)%2]
		epoch := interfaces.Epoch(i + 2)
		if prepared {
			if err := to.Prepare(ctx, "mv/0"); err != nil {
				b.Fatal(err)
			}
		}
		t0 := time.Now()
		if err := from.OnDrop(ctx, "mv/0", epoch-1); err != nil {
			b.Fatal(err)
		}
		if err := to.OnAdd(ctx, shard(0), epoch); err != nil {
			b.Fatal(err)
		}
		handoffs = append(handoffs, time.Since(t0))
		var first, stopped time.Time
		for k := 0; k < 2000; k++ {
			evMu.Lock()
			first, stopped = firsts[epoch], stops[epoch-1]
			evMu.Unlock()
			if !first.IsZero() {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		if first.IsZero() || stopped.IsZero() {
			b.Fatalf("move %d: no first record (%v) or stop (%v)", i, first, stopped)
		}
		pauses = append(pauses, first.Sub(stopped))
		time.Sleep(700 * time.Millisecond) // a periodic checkpoint under the new owner
		for p := 1; p < 4; p++ {
			neighbourGap = max(neighbourGap, clk.maxGap(shard(p).ID, t0, first))
		}
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	b.ReportMetric(ms(pctl(pauses, 0.5)), "pause-p50-ms")
	b.ReportMetric(ms(pctl(pauses, 0.99)), "pause-p99-ms")
	b.ReportMetric(ms(pctl(handoffs, 0.5)), "handoff-p50-ms")
	b.ReportMetric(ms(neighbourGap), "neighbour-gap-max-ms")
	b.ReportMetric(ms(baseGap), "steady-gap-max-ms")
}
