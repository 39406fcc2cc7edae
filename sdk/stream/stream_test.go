package stream_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/internal/testutil"
	"github.com/strata-sched/strata/sdk/stream"
	"github.com/strata-sched/strata/sdk/stream/natstest"
)

// broker starts a real nats-server for the test and connects to it.
func broker(t *testing.T) jetstream.JetStream {
	t.Helper()
	s, err := natstest.Start(t.TempDir(), 8<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	nc, err := nats.Connect(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// summer adds the records' values (8-byte big-endian) and emits the running
// sum after every 10th record, under sequence count/10.
type summer struct {
	count, sum uint64
}

func (s *summer) Process(r stream.Record, emit func(uint64, []byte)) error {
	s.count++
	s.sum += binary.BigEndian.Uint64(r.Data)
	if s.count%10 == 0 {
		emit(s.count/10, []byte(fmt.Sprint(s.sum)))
	}
	return nil
}

func (s *summer) Snapshot() ([]byte, error) {
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b, s.count)
	binary.BigEndian.PutUint64(b[8:], s.sum)
	return b, nil
}

func newSummer(_ interfaces.ShardID, state []byte) (stream.Operator, error) {
	s := &summer{}
	if state != nil {
		if len(state) != 16 {
			return nil, fmt.Errorf("state of %d bytes", len(state))
		}
		s.count, s.sum = binary.BigEndian.Uint64(state), binary.BigEndian.Uint64(state[8:])
	}
	return s, nil
}

func publish(t *testing.T, js jetstream.JetStream, n stream.Names, p int, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		b := make([]byte, 8)
		binary.BigEndian.PutUint64(b, uint64(i))
		if _, err := js.PublishMsg(context.Background(), n.InputMsg(p, time.Now(), b)); err != nil {
			t.Fatal(err)
		}
	}
}

type events struct {
	mu sync.Mutex
	ev []stream.Event
}

func (e *events) add(ev stream.Event) { e.mu.Lock(); e.ev = append(e.ev, ev); e.mu.Unlock() }
func (e *events) has(kind string, shard interfaces.ShardID, epoch interfaces.Epoch) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, x := range e.ev {
		if x.Kind == kind && x.Shard == shard && x.Epoch == epoch {
			return true
		}
	}
	return false
}

func runner(t *testing.T, js jetstream.JetStream, n stream.Names, ev *events) *stream.Runner {
	t.Helper()
	r, err := stream.NewRunner(context.Background(), stream.Config{JS: js, Names: n, New: newSummer, CheckpointEvery: 20 * time.Millisecond, Batch: 16, OnEvent: ev.add})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// checkSums checks that partition p's sink holds the sums after every 10th
// of records 0..total-1, each once, in order.
func checkSums(t *testing.T, s *stream.Sink, p, total int) {
	t.Helper()
	all, err := s.ReadAll(context.Background(), p+1)
	if err != nil {
		t.Fatal(err)
	}
	var want uint64
	k := uint64(0)
	for _, e := range all[p] {
		if e.Fence {
			continue
		}
		k++
		if e.Seq != k {
			t.Fatalf("partition %d: output %d where %d was due (lost or duplicated)", p, e.Seq, k)
		}
		want = 0
		for i := uint64(0); i < 10*k; i++ {
			want += i
		}
		if string(e.Data) != fmt.Sprint(want) {
			t.Fatalf("partition %d output %d: sum %s, want %d", p, k, e.Data, want)
		}
	}
	if int(k) != total/10 {
		t.Fatalf("partition %d: %d outputs, want %d", p, k, total/10)
	}
}

// A shard moved between two runners (drop with its final checkpoint, then
// add under the next epoch) resumes at the exact offset with its state: the
// sink holds every output once. The runner reports its measured load.
func TestRunnerMoveCarriesState(t *testing.T) {
	js := broker(t)
	n := stream.Names{Job: "sum"}
	ev := &events{}
	a, b := runner(t, js, n, ev), runner(t, js, n, ev)
	ctx := context.Background()
	publish(t, js, n, 0, 0, 300)
	if err := a.OnAdd(ctx, interfaces.Shard{ID: "sum/0", Job: "sum"}, 1); err != nil {
		t.Fatal(err)
	}
	testutil.Until(t, "a processed some", 10*time.Second, func() bool { return a.Stats()["sum/0"].Processed >= 100 })
	loads := a.Load()
	if len(loads) != 1 || loads[0].Shard != "sum/0" || loads[0].Load.Tasks != 1 {
		t.Fatalf("load: %+v", loads)
	}
	if err := a.OnDrop(ctx, "sum/0", 1); err != nil {
		t.Fatal(err)
	}
	ck, ok, err := a.Checkpoints().Load(ctx, 0)
	if err != nil || !ok || ck.Epoch != 1 {
		t.Fatalf("checkpoint after the drop: %+v %v %v", ck, ok, err)
	}
	publish(t, js, n, 0, 300, 600)
	if err := b.OnAdd(ctx, interfaces.Shard{ID: "sum/0", Job: "sum"}, 2); err != nil {
		t.Fatal(err)
	}
	testutil.Until(t, "b processed the rest", 10*time.Second, func() bool {
		c, _, _ := b.Checkpoints().Load(ctx, 0)
		return c.Offset == 600 && c.Epoch == 2
	})
	if !ev.has("restored", "sum/0", 2) || !ev.has("first", "sum/0", 2) || !ev.has("stopped", "sum/0", 1) {
		t.Fatalf("events: %+v", ev.ev)
	}
	checkSums(t, b.Sink(), 0, 600)
}

// An owner that runs on after a newer one started (no drop: its host
// frozen, say) is refused by the sink at its next output and stops; the
// sink still holds every output once, and the new owner's restore from the
// old owner's last checkpoint re-emits only what the sink already holds.
func TestRunnerStaleOwnerFenced(t *testing.T) {
	js := broker(t)
	n := stream.Names{Job: "sum"}
	ev := &events{}
	a, b := runner(t, js, n, ev), runner(t, js, n, ev)
	ctx := context.Background()
	publish(t, js, n, 0, 0, 200)
	if err := a.OnAdd(ctx, interfaces.Shard{ID: "sum/0", Job: "sum"}, 3); err != nil {
		t.Fatal(err)
	}
	testutil.Until(t, "a processed all", 10*time.Second, func() bool { return a.Stats()["sum/0"].Processed == 200 })
	if err := b.OnAdd(ctx, interfaces.Shard{ID: "sum/0", Job: "sum"}, 4); err != nil {
		t.Fatal(err)
	}
	publish(t, js, n, 0, 200, 400)
	testutil.Until(t, "a fenced", 10*time.Second, func() bool { return ev.has("fenced", "sum/0", 3) })
	testutil.Until(t, "b processed all", 10*time.Second, func() bool {
		c, _, _ := b.Checkpoints().Load(ctx, 0)
		return c.Offset == 400 && c.Epoch == 4
	})
	checkSums(t, b.Sink(), 0, 400)
	// A stale add is refused: the checkpoint has a newer epoch.
	if err := a.OnDrop(ctx, "sum/0", 3); err != nil {
		t.Fatal(err)
	}
	err := a.OnAdd(ctx, interfaces.Shard{ID: "sum/0", Job: "sum"}, 3)
	if !errors.Is(err, stream.ErrFenced) && !errors.Is(err, interfaces.ErrStaleEpoch) {
		t.Fatalf("stale add: %v", err)
	}
}

// Checkpoints refuse an older epoch; a large state goes through the object
// store and comes back whole.
func TestCheckpointsFenceAndLargeState(t *testing.T) {
	js := broker(t)
	ctx := context.Background()
	c, err := stream.OpenCheckpoints(ctx, js, stream.Names{Job: "ck"})
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("state!"), 1<<20) // 6 MiB
	if err := c.Save(ctx, 3, stream.Checkpoint{Epoch: 5, Offset: 42, State: big}); err != nil {
		t.Fatal(err)
	}
	if err := c.Save(ctx, 3, stream.Checkpoint{Epoch: 4, Offset: 50, State: []byte("old")}); !errors.Is(err, stream.ErrFenced) {
		t.Fatalf("older epoch: %v", err)
	}
	ck, ok, err := c.Load(ctx, 3)
	if err != nil || !ok || ck.Epoch != 5 || ck.Offset != 42 || !bytes.Equal(ck.State, big) {
		t.Fatalf("load: epoch %d offset %d %d bytes ok %v err %v", ck.Epoch, ck.Offset, len(ck.State), ok, err)
	}
	if err := c.Save(ctx, 3, stream.Checkpoint{Epoch: 6, Offset: 60, State: []byte("small")}); err != nil {
		t.Fatal(err)
	}
	if ck, _, _ := c.Load(ctx, 3); string(ck.State) != "small" || ck.Offset != 60 {
		t.Fatalf("load after a small save: %+v", ck)
	}
	if _, ok, err := c.Load(ctx, 9); ok || err != nil {
		t.Fatalf("no checkpoint: ok %v err %v", ok, err)
	}
}

// The sink refuses an older epoch once a newer one wrote or fenced, and
// skips an output it holds.
func TestSinkFencesAndDeduplicates(t *testing.T) {
	js := broker(t)
	ctx := context.Background()
	s, err := stream.OpenSink(ctx, js, stream.Names{Job: "out"})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		epoch interfaces.Epoch
		seq   uint64
		want  error
	}{
		{1, 1, nil}, {1, 2, nil}, {1, 2, stream.ErrDuplicate}, {2, 2, stream.ErrDuplicate}, {2, 3, nil}, {1, 4, stream.ErrFenced},
	} {
		if err := s.Write(ctx, 0, w.epoch, w.seq, []byte("x")); !errors.Is(err, w.want) || (w.want == nil && err != nil) {
			t.Fatalf("write %d@%d: %v, want %v", w.seq, w.epoch, err, w.want)
		}
	}
	if err := s.Fence(ctx, 0, 7); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, 0, 6, 9, nil); !errors.Is(err, stream.ErrFenced) {
		t.Fatalf("write under 6 after a fence of 7: %v", err)
	}
	if seq, ep, err := s.Last(ctx, 0); err != nil || seq != 3 || ep != 7 {
		t.Fatalf("last: %d %d %v", seq, ep, err)
	}
	if err := s.Write(ctx, 0, 7, 0, nil); err == nil {
		t.Fatal("seq 0 accepted")
	}
}

func TestNamesRefuseBadInput(t *testing.T) {
	if err := stream.CheckJob("job", "a.b"); err == nil {
		t.Error("job a.b accepted")
	}
	n := stream.Names{Job: "j"}
	for _, id := range []interfaces.ShardID{"k/1", "j/x", "j", "j/-1"} {
		if _, err := n.Partition(id); err == nil {
			t.Errorf("shard %s accepted", id)
		}
	}
	if p, err := n.Partition("j/12"); err != nil || p != 12 {
		t.Errorf("j/12: %d %v", p, err)
	}
	if p, err := n.PartitionOfSubject(n.Subject(7)); err != nil || p != 7 {
		t.Errorf("subject: %d %v", p, err)
	}
}
