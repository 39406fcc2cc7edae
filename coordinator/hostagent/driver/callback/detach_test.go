package callback_test

// A worker that detaches may still run its shards until it notices: they are
// neither placed elsewhere nor reported stopped before AckTimeout has passed
// (or it attaches again), and a drop never overtakes the add of a placement.
// Both tests are a review's probes, which failed before.

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strata-sched/strata/coordinator/hostagent"
	"github.com/strata-sched/strata/coordinator/hostagent/driver/callback"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/testutil"
	"github.com/strata-sched/strata/sdk/worker"
)

// owners counts, across workers, who runs each shard right now.
type owners struct {
	mu      sync.Mutex
	by      map[interfaces.ShardID]map[string]bool
	overlap []string
}

func (o *owners) h(name string, dropDelay time.Duration) worker.Handler {
	return worker.Funcs{
		Add: func(_ context.Context, s interfaces.Shard, e interfaces.Epoch) error {
			o.mu.Lock()
			defer o.mu.Unlock()
			if o.by[s.ID] == nil {
				o.by[s.ID] = map[string]bool{}
			}
			for w := range o.by[s.ID] {
				o.overlap = append(o.overlap, string(s.ID)+" on "+w+" and "+name)
			}
			o.by[s.ID][name] = true
			return nil
		},
		Drop: func(_ context.Context, s interfaces.ShardID, e interfaces.Epoch) error {
			time.Sleep(dropDelay)
			o.mu.Lock()
			defer o.mu.Unlock()
			delete(o.by[s], name)
			return nil
		},
	}
}

// proxy forwards TCP to backend; cut() closes every connection.
type proxy struct {
	mu    sync.Mutex
	conns []net.Conn
	addr  string
}

func newProxy(t *testing.T, backend string) *proxy {
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	p := &proxy{addr: lis.Addr().String()}
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", backend)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, b)
			p.mu.Unlock()
			go func() { io.Copy(b, c); b.Close() }()
			go func() { io.Copy(c, b); c.Close() }()
		}
	}()
	return p
}

// proxiedWorker starts a callback driver (AckTimeout 2s) and one worker,
// named name for the owners and connected under id through a proxy that can
// cut its connection; the worker takes dropDelay to drop a shard. It returns
// the driver, the owners, the proxy and the driver's own address.
func proxiedWorker(t *testing.T, id, name string, dropDelay time.Duration) (*callback.Driver, *owners, *proxy, string) {
	t.Helper()
	ctx := context.Background()
	d, err := callback.New(callback.Config{Clock: hostagent.WallClock{}, AckTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv, addr := serve(t, d, "127.0.0.1:0")
	t.Cleanup(srv.Stop)
	o := &owners{by: map[interfaces.ShardID]map[string]bool{}}
	px := newProxy(t, addr)
	w, err := worker.Connect(ctx, px.addr, o.h(name, dropDelay), worker.Options{WorkerID: id, MinBackoff: time.Minute, MaxBackoff: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := d.WaitWorkers(wctx, 1); err != nil {
		t.Fatal(err)
	}
	return d, o, px, addr
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestDetachedShardsWaitBeforeTheyMove: w1's connection is cut while it runs
// three shards, each of which takes it 300ms to drop; they move to w2 only
// after AckTimeout, never running on both (they used to move at once).
func TestDetachedShardsWaitBeforeTheyMove(t *testing.T) {
	ctx := context.Background()
	d, o, px, addr := proxiedWorker(t, "w1", "w1", 300*time.Millisecond)
	for _, s := range []string{"s1", "s2", "s3"} {
		if err := d.Start(ctx, spec(s), 1); err != nil {
			t.Fatal(err)
		}
	}
	w2, err := worker.Connect(ctx, addr, o.h("w2", 0), worker.Options{WorkerID: "w2"})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := d.WaitWorkers(wctx, 2); err != nil {
		t.Fatal(err)
	}
	px.cut()
	testutil.Until(t, "the shards on w2", 15*time.Second, func() bool { return len(d.Workers()["w2"]) == 3 })
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.overlap) > 0 {
		t.Fatalf("shards on two workers at once: %v", o.overlap)
	}
}

// TestNoOrphanWhenAWorkerLeavesDuringAStart: a worker that hangs up on its
// first command makes the start fail; the agent then stops the shard while
// the driver re-places it. The shard must end up on no worker (it ran on w2
// with nothing tracking it in 1 of 30 runs before).
func TestNoOrphanWhenAWorkerLeavesDuringAStart(t *testing.T) {
	for i := 0; i < 10; i++ {
		ctx := context.Background()
		d, err := callback.New(callback.Config{Clock: hostagent.WallClock{}, AckTimeout: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		srv, addr := serve(t, d, "127.0.0.1:0")
		o := &owners{by: map[interfaces.ShardID]map[string]bool{}}
		w2, err := worker.Connect(ctx, addr, o.h("w2", 0), worker.Options{WorkerID: "w2"})
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := d.WaitWorkers(wctx, 1); err != nil {
			t.Fatal(err)
		}
		// a0 sorts before w2, so it gets the shard; it hangs up on it.
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		sctx, scancel := context.WithCancel(ctx)
		st, err := wire.NewWorkerClient(cc).Connect(sctx)
		if err != nil {
			t.Fatal(err)
		}
		_ = st.Send(&wire.WorkerMessage{Msg: &wire.WorkerMessage_Hello{Hello: &wire.WorkerHello{WorkerId: "a0"}}})
		_, _ = st.Header()
		go func() { _, _ = st.Recv(); scancel() }()
		_ = d.Start(ctx, spec("s1"), 1)
		_ = d.Stop("s1") // what the agent's executor does after a failed start
		time.Sleep(300 * time.Millisecond)
		o.mu.Lock()
		on := len(o.by["s1"])
		o.mu.Unlock()
		cancel()
		w2.Close()
		cc.Close()
		srv.Stop()
		if on > 0 {
			t.Fatalf("run %d: s1 runs on w2 after its start failed and Stop returned (driver knows %v)", i, d.Workers())
		}
	}
}

// A Stop can wait for a re-placement's add, then for the drop, then out a
// detach: the stop budget the host announces is three ack timeouts, and the
// timeout is bounded so that the budget stays within the parent's limit.
func TestStopBudgetCoversTheLongestStop(t *testing.T) {
	d, err := callback.New(callback.Config{Clock: hostagent.WallClock{}, AckTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.StopBudget(); got != 6*time.Second {
		t.Errorf("stop budget %v, want 3 × 2s", got)
	}
	if _, err := callback.New(callback.Config{Clock: hostagent.WallClock{}, AckTimeout: callback.MaxAckTimeout + time.Second}); err == nil {
		t.Error("an ack timeout above MaxAckTimeout was accepted")
	}
}
