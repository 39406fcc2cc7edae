package callback_test

// A worker id does not tell two processes apart: a detached worker's shards go
// back at once only to the same incarnation (WorkerHello.incarnation) of it;
// any other attach under that id waits out AckTimeout first.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/strata-sched/strata/coordinator/hostagent"
	"github.com/strata-sched/strata/coordinator/hostagent/driver/callback"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/testutil"
	"github.com/strata-sched/strata/sdk/worker"
)

// TestDuplicateWorkerIDWaitsOutTheDetach: two processes share the worker id
// "pod-1" (the SDK's <hostname>-<pid> in two containers of a pod, each pid 1).
// B is refused while A is attached; when A's stream breaks, B attaches under
// the same id, and gets A's shard only after AckTimeout, when A has dropped
// it. A review's probe: the attach used to end the wait, and the shard ran on
// both processes at once.
func TestDuplicateWorkerIDWaitsOutTheDetach(t *testing.T) {
	ctx := context.Background()
	d, o, px, addr := proxiedWorker(t, "pod-1", "procA", 500*time.Millisecond)
	if err := d.Start(ctx, spec("s1"), 1); err != nil {
		t.Fatal(err)
	}
	b, err := worker.Connect(ctx, addr, o.h("procB", 0), worker.Options{WorkerID: "pod-1", MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	time.Sleep(200 * time.Millisecond) // B is refused (AlreadyExists) and retries
	if _, n := b.Attached(); n != 0 {
		t.Fatalf("B attached under A's id while A was attached")
	}
	cut := time.Now()
	px.cut()
	testutil.Until(t, "s1 on procB", 10*time.Second, func() bool { return len(b.Running()) == 1 })
	if took := time.Since(cut); took < 2*time.Second {
		t.Errorf("s1 went to procB %v after A's stream broke, before the ack timeout (2s)", took)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.overlap) > 0 {
		t.Fatalf("shard on two worker processes at once: %v", o.overlap)
	}
}

// rawWorker attaches with a hand-made hello and acks every command.
type rawWorker struct {
	cancel context.CancelFunc
	cc     *grpc.ClientConn
	mu     sync.Mutex
	adds   []string
	ended  chan error
}

func attachRaw(t *testing.T, addr string, hello *wire.WorkerHello) *rawWorker {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	st, err := wire.NewWorkerClient(cc).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&wire.WorkerMessage{Msg: &wire.WorkerMessage_Hello{Hello: hello}}); err != nil {
		t.Fatal(err)
	}
	r := &rawWorker{cancel: cancel, cc: cc, ended: make(chan error, 1)}
	if md, err := st.Header(); err != nil || len(md.Get(callback.AttachedHeader)) == 0 {
		_, err := st.Recv()
		r.ended <- err
		return r
	}
	go func() {
		for {
			cmd, err := st.Recv()
			if err != nil {
				r.ended <- err
				return
			}
			if a := cmd.GetAdd(); a != nil {
				r.mu.Lock()
				r.adds = append(r.adds, a.Shard.Id)
				r.mu.Unlock()
			}
			if err := st.Send(&wire.WorkerMessage{Msg: &wire.WorkerMessage_Ack{Ack: &wire.WorkerAck{CommandId: cmd.Id, Ok: true}}}); err != nil {
				r.ended <- err
				return
			}
		}
	}()
	return r
}

func (r *rawWorker) close() { r.cancel(); r.cc.Close() }

func (r *rawWorker) added() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.adds)
}

// TestReattachOfTheSameIncarnationOnly: a worker that comes back with the
// incarnation it had gets its shard back at once; one that comes back with
// another incarnation, or with none (a worker older than the field), waits
// out the ack timeout.
func TestReattachOfTheSameIncarnationOnly(t *testing.T) {
	const ackTimeout = 1500 * time.Millisecond
	for _, c := range []struct {
		name       string
		first, now string
		atOnce     bool
	}{
		{"same incarnation", "inc-1", "inc-1", true},
		{"another incarnation", "inc-1", "inc-2", false},
		{"no incarnation", "", "", false},
		{"incarnation then none", "inc-1", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := callback.New(callback.Config{Clock: hostagent.WallClock{}, AckTimeout: ackTimeout})
			if err != nil {
				t.Fatal(err)
			}
			srv, addr := serve(t, d, "127.0.0.1:0")
			defer srv.Stop()
			w1 := attachRaw(t, addr, &wire.WorkerHello{WorkerId: "w", Incarnation: c.first})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := d.WaitWorkers(ctx, 1); err != nil {
				t.Fatal(err)
			}
			if err := d.Start(ctx, spec("s1"), 1); err != nil {
				t.Fatal(err)
			}
			w1.close()
			testutil.Until(t, "w detached", 5*time.Second, func() bool { _, ok := d.Workers()["w"]; return !ok })
			gone := time.Now()
			w2 := attachRaw(t, addr, &wire.WorkerHello{WorkerId: "w", Incarnation: c.now})
			defer w2.close()
			testutil.Until(t, "s1 on w again", 10*time.Second, func() bool { return w2.added() == 1 })
			took := time.Since(gone)
			if c.atOnce && took > ackTimeout/2 {
				t.Errorf("the same incarnation got s1 back after %v, want at once", took)
			}
			if !c.atOnce && took < ackTimeout-100*time.Millisecond {
				t.Errorf("s1 went back to worker id w under incarnation %q (was %q) after %v, before the ack timeout %v", c.now, c.first, took, ackTimeout)
			}
		})
	}
}

func TestBadIncarnationIsRefused(t *testing.T) {
	d, err := callback.New(callback.Config{Clock: hostagent.WallClock{}})
	if err != nil {
		t.Fatal(err)
	}
	srv, addr := serve(t, d, "127.0.0.1:0")
	defer srv.Stop()
	for _, inc := range []string{"not ok!", strings.Repeat("a", callback.MaxIncarnation+1)} {
		w := attachRaw(t, addr, &wire.WorkerHello{WorkerId: "w", Incarnation: inc})
		var err error
		select {
		case err = <-w.ended:
		case <-time.After(5 * time.Second):
			err = errors.New("attached")
		}
		w.close()
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "hello.incarnation") {
			t.Errorf("incarnation %q: want InvalidArgument naming hello.incarnation, got %v", inc, err)
		}
	}
}
