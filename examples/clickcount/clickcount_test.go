package clickcount_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-sched/strata/examples/clickcount"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/internal/testutil"
	"github.com/strata-sched/strata/sdk/stream"
	"github.com/strata-sched/strata/sdk/stream/natstest"
)

func rec(off uint64, ms int64, key string) stream.Record {
	return stream.Record{Offset: off, EventTime: time.UnixMilli(ms), Data: []byte(key)}
}

// Windows close in order when a later record arrives, carry their counts
// through a snapshot, drop late records, and never count the End key.
func TestWindowsCountAndClose(t *testing.T) {
	f, err := clickcount.NewFactory(time.Second, 10)
	if err != nil {
		t.Fatal(err)
	}
	op, _ := f("clicks/0", nil)
	var got []clickcount.Result
	var seqs []uint64
	emit := func(seq uint64, b []byte) {
		var r clickcount.Result
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		got, seqs = append(got, r), append(seqs, seq)
	}
	for i, r := range []stream.Record{rec(1, 100, "a"), rec(2, 900, "a"), rec(3, 950, "b"), rec(4, 1100, "a")} {
		if err := op.Process(r, emit); err != nil {
			t.Fatal(i, err)
		}
	}
	snap, err := op.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	op2, err := f("clicks/0", snap) // a move: the new owner restores
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []stream.Record{rec(5, 500, "late"), rec(6, 3500, clickcount.End)} {
		if err := op2.Process(r, emit); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 2 || got[0].Window != 0 || got[0].Counts["a"] != 2 || got[0].Counts["b"] != 1 || got[1].Window != 1 || got[1].Counts["a"] != 1 || len(got[1].Counts) != 1 {
		t.Fatalf("windows: %+v", got)
	}
	if seqs[0] != 1 || seqs[1] != 2 {
		t.Fatalf("sequences %v", seqs)
	}
	if err := op2.Process(stream.Record{Offset: 7, Data: []byte("x")}, emit); err == nil {
		t.Error("a record without event time was accepted")
	}
	if _, err := clickcount.NewFactory(0, 0); err == nil {
		t.Error("window 0 accepted")
	}
	if _, err := clickcount.NewFactory(time.Second, -1); err == nil {
		t.Error("negative state accepted")
	}
	if _, err := f("clicks/0", []byte("junk")); err == nil {
		t.Error("a corrupt state was restored")
	}
}

// The producer, two runners trading the shards (graceful moves and a stale
// owner fenced) and the checker, on a real nats-server: the sink holds
// exactly the input's counts.
func TestClickcountExactlyOnceAcrossMoves(t *testing.T) {
	s, err := natstest.Start(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	nc, err := nats.Connect(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	n := stream.Names{Job: "clicks"}
	f, _ := clickcount.NewFactory(100*time.Millisecond, 1000)
	mk := func() *stream.Runner {
		r, err := stream.NewRunner(ctx, stream.Config{JS: js, Names: n, New: f, CheckpointEvery: 30 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close() })
		return r
	}
	a, b := mk(), mk()
	const parts = 4
	shard := func(p int) interfaces.Shard {
		return interfaces.Shard{ID: interfaces.ShardID(fmt.Sprintf("clicks/%d", p)), Job: "clicks"}
	}
	for p := 0; p < parts; p++ {
		if err := a.OnAdd(ctx, shard(p), 1); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	var published int
	go func() {
		var err error
		published, err = clickcount.Producer{JS: js, Names: n, Partitions: parts, Rate: 2000, Keys: 50, Skew: 1.5, Seed: 3}.Run(ctx, 3000)
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	// Graceful moves of shards 0 and 1 to b.
	for p := 0; p < 2; p++ {
		if err := a.OnDrop(ctx, shard(p).ID, 1); err != nil {
			t.Fatal(err)
		}
		if err := b.OnAdd(ctx, shard(p), 2); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	// Shard 2 to b without a drop on a: a is fenced at its next output.
	if err := b.OnAdd(ctx, shard(2), 2); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var v clickcount.Verdict
	sink, _ := stream.OpenSink(ctx, js, n)
	testutil.Until(t, "the sink holds the input's counts", 20*time.Second, func() bool {
		want, clicks, err := clickcount.Expected(ctx, js, n, 100*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if v, err = clickcount.Compare(ctx, sink, parts, want, clicks); err != nil {
			t.Fatal(err)
		}
		return v.OK() || v.DuplicateClicks > 0
	})
	if !v.OK() || v.Clicks != published || published != 3000 {
		t.Fatalf("published %d: %s %v", published, v, v.Problems)
	}
	t.Logf("%s", v)
}
