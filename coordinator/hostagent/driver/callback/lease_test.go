package callback_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/hostagent"
	"github.com/strata-sched/strata/coordinator/hostagent/driver/callback"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/sdk/worker"
)

// A stream worker holds the host's lease itself: it drops its shards when the
// lease ends unrenewed although the agent never fences (its Run loop is not
// running — as if frozen) and the stream stays up. Before workers held the
// lease they ran on for as long as the stream did.
func TestSDKWorkerStopsAtTheLeaseEnd(t *testing.T) {
	ctx := context.Background()
	clk := hostagent.WallClock{}
	d, err := callback.New(callback.Config{Clock: clk, AckTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv, addr := serve(t, d, "127.0.0.1:0")
	defer srv.Stop()
	dir := t.TempDir()
	a, err := hostagent.Open(hostagent.Config{Host: "h1", StorePath: filepath.Join(dir, "h1.db"), LedgerPath: filepath.Join(dir, "h1.ledger"),
		Driver: d, Clock: clk, Capacity: interfaces.Load{CPU: 4}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	r := newRecorder()
	w, err := worker.Connect(ctx, addr, r, worker.Options{WorkerID: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := d.WaitWorkers(wctx, 1); err != nil {
		t.Fatal(err)
	}
	// ttl 2s: the agent's fence, and the worker's, 1.6s after the grant.
	if err := a.LeaseGrant(ctx, time.Now(), 2*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.Assign(ctx, time.Now(), spec("s1"), 6); err != nil {
		t.Fatal(err)
	}
	if end, ok := w.LeaseEnd(); !ok || time.Until(end) > 1600*time.Millisecond {
		t.Fatalf("the worker's lease ends at %v (%v), want within the 1.6s the agent has", end, ok)
	}
	eventually(t, "the worker dropped s1 at its lease's end", func() bool { return r.Log() == "add s1@6 drop s1@6" })
	if att, n := w.Attached(); !att || n != 1 {
		t.Fatalf("attached %v, %d times: the stream must have stayed up", att, n)
	}
	if len(w.Running()) != 0 {
		t.Fatalf("running after the lease's end: %v", w.Running())
	}
}

// Renewals move the worker's deadline: a worker renewed past the deadline it
// was added with keeps the shard; a renewal that ends the lease drops it, and
// an AddShard sent after the lease has ended is refused.
func TestSDKWorkerLeaseRenewals(t *testing.T) {
	ctx := context.Background()
	d, err := callback.New(callback.Config{Clock: hostagent.WallClock{}})
	if err != nil {
		t.Fatal(err)
	}
	srv, addr := serve(t, d, "127.0.0.1:0")
	defer srv.Stop()
	r := newRecorder()
	w, err := worker.Connect(ctx, addr, r, worker.Options{WorkerID: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := d.WaitWorkers(wctx, 1); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	lctx, lcancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer lcancel()
	if err := d.Start(lctx, spec("s1"), 2); err != nil {
		t.Fatal(err)
	}
	d.RenewLease(time.Hour)
	eventually(t, "the renewal reached the worker", func() bool {
		end, ok := w.LeaseEnd()
		return ok && time.Until(end) > time.Minute
	})
	time.Sleep(time.Until(start.Add(2 * time.Second)))
	if got := r.Log(); got != "add s1@2" {
		t.Fatalf("worker saw %q past the first deadline, though renewed", got)
	}
	d.RenewLease(0)
	eventually(t, "dropped at the ended lease", func() bool { return r.Log() == "add s1@2 drop s1@2" })
	if err := d.Stop("s1"); err != nil {
		t.Fatal(err) // not running there any more: the drop is acked
	}
	if err := d.Start(ctx, spec("s2"), 3); err == nil || !strings.Contains(err.Error(), "the host's lease has ended") {
		t.Fatalf("start with the lease ended: %v", err)
	}
}
