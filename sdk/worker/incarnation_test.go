package worker

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/testutil"
)

// hellos attaches every worker and ends its stream at once, recording the
// hellos: the SDK reconnects again and again.
type hellos struct {
	wire.UnimplementedWorkerServer
	mu  sync.Mutex
	got []*wire.WorkerHello
}

func (h *hellos) Connect(stream wire.Worker_ConnectServer) error {
	m, err := stream.Recv()
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.got = append(h.got, m.GetHello())
	h.mu.Unlock()
	return stream.SendHeader(metadata.Pairs(AttachedHeader, "x"))
}

// Every hello of a Conn carries its incarnation, also after a reconnect, and
// two Conns under one worker id have different ones: the agent tells them
// apart by it.
func TestHelloCarriesTheConnsIncarnation(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hellos{}
	srv := grpc.NewServer()
	wire.RegisterWorkerServer(srv, h)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	opts := Options{WorkerID: "pod-1", MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}
	a, err := Connect(context.Background(), lis.Addr().String(), Funcs{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Connect(context.Background(), lis.Addr().String(), Funcs{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if a.Incarnation() == "" || a.Incarnation() == b.Incarnation() || len(a.Incarnation()) > 64 {
		t.Fatalf("incarnations %q and %q: want two different, non-empty, at most 64 characters", a.Incarnation(), b.Incarnation())
	}
	count := func() map[string]int {
		h.mu.Lock()
		defer h.mu.Unlock()
		m := map[string]int{}
		for _, x := range h.got {
			m[x.Incarnation]++
		}
		return m
	}
	testutil.Until(t, "three hellos from each Conn", 10*time.Second, func() bool {
		m := count()
		return m[a.Incarnation()] >= 3 && m[b.Incarnation()] >= 3
	})
	if m := count(); len(m) != 2 {
		t.Fatalf("hellos carried %d incarnations, want 2: %v", len(m), m)
	}
}
