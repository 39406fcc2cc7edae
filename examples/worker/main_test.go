package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/strata-sched/strata/coordinator/hostagent"
	"github.com/strata-sched/strata/coordinator/hostagent/driver/callback"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/testutil"
)

func TestExampleWorkerRunsShards(t *testing.T) {
	d, _ := callback.New(callback.Config{Clock: hostagent.WallClock{}})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	wire.RegisterWorkerServer(srv, d)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	ctx, cancel := context.WithCancel(context.Background())
	out := &testutil.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--addr", lis.Addr().String(), "--id", "ex1", "--report", "20ms"}, out)
	}()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := d.WaitWorkers(wctx, 1); err != nil {
		t.Fatal(err)
	}
	sp := interfaces.Shard{ID: "s1", Job: "clicks", Load: interfaces.Load{CPU: 1.5}, InputRate: 300}
	if err := d.Start(ctx, sp, 2); err != nil {
		t.Fatal(err)
	}
	for i := 0; d.Measure()["s1"].Load.CPU != 1.5; i++ {
		if i > 1000 {
			t.Fatal("no load report from the example worker")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := d.Stop("s1"); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if !strings.Contains(got, "add  s1 (job clicks) epoch 2") || !strings.Contains(got, "drop s1 epoch 2") {
		t.Fatalf("output:\n%s", got)
	}
}

func TestExampleWorkerFlags(t *testing.T) {
	for _, args := range [][]string{{"--report", "0s"}, {"extra"}, {"--nope"}, {"--id", "bad id"}, {"--emit", "0s"}} {
		if err := run(context.Background(), args, &bytes.Buffer{}); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
}

// An owner that runs on after a newer one started (here: the new owner's
// write lands in the sink while this worker still runs the shard under the
// old epoch) is refused by the sink and stops writing; the sink's output has
// no old-epoch record after the new owner's.
func TestExampleWorkerFencedBySink(t *testing.T) {
	d, _ := callback.New(callback.Config{Clock: hostagent.WallClock{}})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	wire.RegisterWorkerServer(srv, d)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	out := &testutil.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--addr", lis.Addr().String(), "--id", "ex1", "--sink", dir, "--emit", "10ms"}, out)
	}()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := d.WaitWorkers(wctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx, interfaces.Shard{ID: "job/0", Job: "job"}, 2); err != nil {
		t.Fatal(err)
	}
	outFile := filepath.Join(dir, "job%2F0.out")
	testutil.Until(t, "the worker's records in the sink", 10*time.Second, func() bool {
		b, _ := os.ReadFile(outFile)
		return strings.Contains(string(b), "2 record 2\n")
	})
	if err := (epochSink{dir: dir}).Write("job/0", 3, "the new owner"); err != nil {
		t.Fatal(err)
	}
	testutil.Until(t, "the old owner fenced", 10*time.Second, func() bool {
		return strings.Contains(out.String(), "fenced job/0 epoch 2")
	})
	b, _ := os.ReadFile(outFile)
	_, after, _ := strings.Cut(string(b), "3 the new owner\n")
	if after != "" {
		t.Fatalf("records after the new owner's: %q", after)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
