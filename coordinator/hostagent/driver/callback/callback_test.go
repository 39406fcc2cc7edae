package callback_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/strata-sched/strata/coordinator/hostagent"
	"github.com/strata-sched/strata/coordinator/hostagent/driver/callback"
	"github.com/strata-sched/strata/coordinator/hostagent/ledger"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/testutil"
	"github.com/strata-sched/strata/sdk/worker"
)

// recorder is a worker's handler: it logs every callback and reports a fixed
// load per running shard.
type recorder struct {
	mu      sync.Mutex
	log     []string
	running map[interfaces.ShardID]interfaces.Epoch
	refuse  interfaces.ShardID
}

func newRecorder() *recorder { return &recorder{running: map[interfaces.ShardID]interfaces.Epoch{}} }

func (r *recorder) OnAdd(_ context.Context, s interfaces.Shard, e interfaces.Epoch) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.ID == r.refuse {
		return errors.New("no room for " + string(s.ID))
	}
	r.log = append(r.log, fmt.Sprintf("add %s@%d", s.ID, e))
	r.running[s.ID] = e
	return nil
}

func (r *recorder) OnDrop(_ context.Context, s interfaces.ShardID, e interfaces.Epoch) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, fmt.Sprintf("drop %s@%d", s, e))
	delete(r.running, s)
	return nil
}

func (r *recorder) Log() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.log, " ")
}

func (r *recorder) load() []interfaces.ShardLoad {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []interfaces.ShardLoad
	for id := range r.running {
		out = append(out, interfaces.ShardLoad{Shard: id, Load: interfaces.Load{CPU: 0.5, Mem: 1 << 20}, Rate: 100, InputRate: 100, LatencyP99: 7 * time.Millisecond})
	}
	return out
}

func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	testutil.Until(t, what, 10*time.Second, f)
}

func serve(t *testing.T, d *callback.Driver, addr string) (*grpc.Server, string) {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	wire.RegisterWorkerServer(srv, d)
	go func() { _ = srv.Serve(lis) }()
	return srv, lis.Addr().String()
}

func spec(id string) interfaces.Shard {
	return interfaces.Shard{ID: interfaces.ShardID(id), Job: "j", Load: interfaces.Load{CPU: 0.5}}
}

func TestAgentWithSDKWorkers(t *testing.T) {
	ctx := context.Background()
	clk := hostagent.WallClock{}
	d, err := callback.New(callback.Config{Clock: clk, AckTimeout: 5 * time.Second})
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

	r1 := newRecorder()
	w1, err := worker.Connect(ctx, addr, r1, worker.Options{WorkerID: "w1", Load: r1.load, LoadInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := d.WaitWorkers(wctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := a.LeaseGrant(ctx, time.Now(), time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"s1", "s2"} {
		if err := a.Assign(ctx, time.Now(), spec(id), 1); err != nil {
			t.Fatal(err)
		}
	}
	if got := r1.Log(); got != "add s1@1 add s2@1" {
		t.Fatalf("worker 1 saw %q", got)
	}
	// Loads reported by the worker reach the agent's report.
	var rep interfaces.Report
	eventually(t, "load reports", func() bool {
		rep = a.Report(time.Now())
		return rep.Used.CPU == 1
	})
	if rep.LatencyP99 != 7*time.Millisecond || rep.Throughput != 200 || len(rep.Shards) != 2 || rep.Headroom.CPU != 3 {
		t.Fatalf("report: %+v", rep)
	}

	if err := a.Revoke(ctx, time.Now(), "s1", 1); err != nil {
		t.Fatal(err)
	}
	if got := r1.Log(); got != "add s1@1 add s2@1 drop s1@1" {
		t.Fatalf("after revoke worker 1 saw %q", got)
	}

	// A second worker with the same id is refused.
	rdup := newRecorder()
	wdup, _ := worker.Connect(ctx, addr, rdup, worker.Options{WorkerID: "w1", MinBackoff: time.Second})
	eventually(t, "duplicate refused", func() bool { return wdup.LastError() != nil })
	if !strings.Contains(wdup.LastError().Error(), "already attached") {
		t.Fatalf("duplicate id: %v", wdup.LastError())
	}
	wdup.Close()

	// Worker 1 leaves: it drops s2 itself, and the driver re-places s2 on w2.
	r2 := newRecorder()
	w2, _ := worker.Connect(ctx, addr, r2, worker.Options{WorkerID: "w2"})
	if err := d.WaitWorkers(wctx, 2); err != nil {
		t.Fatal(err)
	}
	w1.Close()
	if got := r1.Log(); got != "add s1@1 add s2@1 drop s1@1 drop s2@1" {
		t.Fatalf("worker 1 on close saw %q", got)
	}
	eventually(t, "s2 re-placed on w2", func() bool { return r2.Log() == "add s2@1" })
	if ws := d.Workers(); len(ws) != 1 || fmt.Sprint(ws["w2"]) != "[s2]" {
		t.Fatalf("workers: %v", ws)
	}

	// A worker that refuses: the assign fails with its reason and is dropped.
	r2.mu.Lock()
	r2.refuse = "s3"
	r2.mu.Unlock()
	if err := a.Assign(ctx, time.Now(), spec("s3"), 1); err == nil || !strings.Contains(err.Error(), "no room for s3") {
		t.Fatalf("refused assign: %v", err)
	}
	// No worker: assigns fail clearly; s2 waits as pending.
	w2.Close()
	eventually(t, "w2 detached", func() bool { return len(d.Workers()) == 0 })
	if p := d.Pending(); fmt.Sprint(p) != "[s2]" {
		t.Fatalf("pending: %v", p)
	}
	if err := a.Assign(ctx, time.Now(), spec("s4"), 1); !errors.Is(err, callback.ErrNoWorker) {
		t.Fatalf("assign with no worker: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	res, err := ledger.Check(filepath.Join(dir, "h1.ledger"))
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() || len(res.Intervals) != 4 {
		t.Fatalf("ledger: %v; %d intervals", res.Err(), len(res.Intervals))
	}
}

// TestSDKReconnects: a worker started before the agent listens keeps retrying
// with backoff and attaches once the agent is up; when the agent goes away and
// comes back it drops its shards and attaches again.
func TestSDKReconnects(t *testing.T) {
	ctx := context.Background()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()

	r := newRecorder()
	w, err := worker.Connect(ctx, addr, r, worker.Options{WorkerID: "w", MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	eventually(t, "a failed attempt", func() bool { return w.LastError() != nil })

	d, _ := callback.New(callback.Config{Clock: hostagent.WallClock{}})
	srv, _ := serve(t, d, addr)
	eventually(t, "attach", func() bool { ok, n := w.Attached(); return ok && n == 1 })
	if err := d.Start(ctx, spec("s1"), 4); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	eventually(t, "drop on disconnect", func() bool { return r.Log() == "add s1@4 drop s1@4" })

	d2, _ := callback.New(callback.Config{Clock: hostagent.WallClock{}})
	srv2, _ := serve(t, d2, addr)
	defer srv2.Stop()
	eventually(t, "re-attach", func() bool { ok, n := w.Attached(); return ok && n == 2 })
	if len(w.Running()) != 0 {
		t.Fatal("shards kept across a reconnect")
	}
}

func TestSDKOptionsValidate(t *testing.T) {
	ctx := context.Background()
	h := worker.Funcs{}
	for field, c := range map[string]struct {
		addr string
		h    worker.Handler
		o    worker.Options
	}{
		"addr":        {"", h, worker.Options{}},
		"handler":     {"x:1", nil, worker.Options{}},
		"worker_id":   {"x:1", h, worker.Options{WorkerID: "bad id"}},
		"max_shards":  {"x:1", h, worker.Options{MaxShards: -1}},
		"max_backoff": {"x:1", h, worker.Options{MinBackoff: time.Second, MaxBackoff: time.Millisecond}},
	} {
		if _, err := worker.Connect(ctx, c.addr, c.h, c.o); !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v", field, err)
		}
	}
}
