package worker

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

// scripted is a fake agent: it attaches the worker, sends its commands one at a
// time and records the acks.
type scripted struct {
	wire.UnimplementedWorkerServer
	cmds  []*wire.WorkerCommand
	mu    sync.Mutex
	hello *wire.WorkerHello
	acks  []*wire.WorkerAck
	done  chan struct{}
}

func (s *scripted) Connect(stream wire.Worker_ConnectServer) error {
	m, err := stream.Recv()
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.hello = m.GetHello()
	s.mu.Unlock()
	if err := stream.SendHeader(metadata.Pairs(AttachedHeader, "x")); err != nil {
		return err
	}
	for _, c := range s.cmds {
		if err := stream.Send(c); err != nil {
			return err
		}
		for {
			m, err := stream.Recv()
			if err != nil {
				return err
			}
			if a := m.GetAck(); a != nil {
				s.mu.Lock()
				s.acks = append(s.acks, a)
				s.mu.Unlock()
				break
			}
		}
	}
	close(s.done)
	<-stream.Context().Done()
	return nil
}

func add(id uint64, shard string, epoch uint64) *wire.WorkerCommand {
	return &wire.WorkerCommand{Id: id, Cmd: &wire.WorkerCommand_Add{Add: &wire.AddShard{Shard: &wire.Shard{Id: shard, Job: "j", Load: &wire.Load{}}, Epoch: epoch}}}
}

func drop(id uint64, shard string, epoch uint64) *wire.WorkerCommand {
	return &wire.WorkerCommand{Id: id, Cmd: &wire.WorkerCommand_Drop{Drop: &wire.DropShard{Shard: shard, Epoch: epoch}}}
}

func TestCommandsAndAcks(t *testing.T) {
	s := &scripted{done: make(chan struct{}), cmds: []*wire.WorkerCommand{
		add(1, "a", 2),
		add(2, "a", 2),       // repeat: ok, no second OnAdd
		add(3, "a", 1),       // stale
		add(4, "a", 3),       // newer epoch: drop @2 then add @3
		drop(5, "a", 2),      // stale drop
		add(6, "bad id!", 1), // invalid spec
		add(7, "b", 1),
		drop(8, "a", 3),
		drop(9, "zz", 1), // not running: ok
		{Id: 10},         // no command
	}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	wire.RegisterWorkerServer(srv, s)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	var mu sync.Mutex
	var calls []string
	h := Funcs{
		Add: func(_ context.Context, sh interfaces.Shard, e interfaces.Epoch) error {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, fmt.Sprintf("add %s@%d", sh.ID, e))
			return nil
		},
		Drop: func(_ context.Context, id interfaces.ShardID, e interfaces.Epoch) error {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, fmt.Sprintf("drop %s@%d", id, e))
			return nil
		},
	}
	c, err := Connect(context.Background(), lis.Addr().String(), h, Options{WorkerID: "w9", MaxShards: 3})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		t.Fatal("script did not finish")
	}
	if r := c.Running(); len(r) != 1 || r["b"] != 1 {
		t.Fatalf("running %v", r)
	}
	c.Close()
	mu.Lock()
	got := strings.Join(calls, " ")
	mu.Unlock()
	if want := "add a@2 drop a@2 add a@3 add b@1 drop a@3 drop b@1"; got != want {
		t.Fatalf("callbacks:\n got %s\nwant %s", got, want)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hello.WorkerId != "w9" || s.hello.MaxShards != 3 {
		t.Fatalf("hello %+v", s.hello)
	}
	wantOK := []bool{true, true, false, true, false, false, true, true, true, false}
	if len(s.acks) != len(wantOK) {
		t.Fatalf("%d acks, want %d", len(s.acks), len(wantOK))
	}
	for i, a := range s.acks {
		if a.CommandId != uint64(i+1) || a.Ok != wantOK[i] {
			t.Errorf("ack %d: %+v, want ok=%v", i+1, a, wantOK[i])
		}
	}
	if !strings.Contains(s.acks[2].Error, "held epoch 2, got 1") || !strings.Contains(s.acks[5].Error, "shard.id") {
		t.Fatalf("ack errors: %q / %q", s.acks[2].Error, s.acks[5].Error)
	}
}
