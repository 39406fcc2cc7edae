package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/sdk/worker"
)

// shards is the example's state: the shards it runs, with their specs.
type shards struct {
	mu  sync.Mutex
	run map[interfaces.ShardID]interfaces.Shard
	out io.Writer
	// With a sink, every shard writes a record to it every emit, under its
	// epoch: the fencing token the sink checks.
	sink  *epochSink
	emit  time.Duration
	stops map[interfaces.ShardID]chan struct{}
}

func (s *shards) OnAdd(_ context.Context, spec interfaces.Shard, epoch interfaces.Epoch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.run[spec.ID] = spec
	fmt.Fprintf(s.out, "add  %s (job %s) epoch %d\n", spec.ID, spec.Job, epoch)
	if s.sink != nil {
		stop := make(chan struct{})
		s.stops[spec.ID] = stop
		go s.produce(spec.ID, epoch, stop)
	}
	return nil
}

func (s *shards) OnDrop(_ context.Context, id interfaces.ShardID, epoch interfaces.Epoch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.run, id)
	if stop, ok := s.stops[id]; ok {
		close(stop)
		delete(s.stops, id)
	}
	fmt.Fprintf(s.out, "drop %s epoch %d\n", id, epoch)
	return nil
}

// produce writes a record of shard to the sink every s.emit until stop is
// closed, or until the sink refuses its epoch: another owner of the shard,
// under a newer epoch, has written, so this one must not write any more.
func (s *shards) produce(id interfaces.ShardID, epoch interfaces.Epoch, stop <-chan struct{}) {
	t := time.NewTicker(s.emit)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		err := s.sink.Write(id, epoch, fmt.Sprintf("record %d", n))
		switch {
		case errors.Is(err, ErrFenced):
			s.mu.Lock()
			fmt.Fprintf(s.out, "fenced %s epoch %d: %v; no more writes\n", id, epoch, err)
			s.mu.Unlock()
			return
		case err != nil:
			s.mu.Lock()
			fmt.Fprintf(s.out, "sink %s epoch %d: %v\n", id, epoch, err)
			s.mu.Unlock()
		}
	}
}

// load reports each shard's spec load as if it were measured: a real worker
// would report what it observes (CPU, records processed, p99 latency).
func (s *shards) load() []interfaces.ShardLoad {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]interfaces.ShardLoad, 0, len(s.run))
	for id, sp := range s.run {
		out = append(out, interfaces.ShardLoad{Shard: id, Load: sp.Load, Rate: sp.InputRate, InputRate: sp.InputRate, LatencyP99: 5 * time.Millisecond})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Shard < out[j].Shard })
	return out
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(out)
	addr := fs.String("addr", "127.0.0.1:7422", "the host agent's local worker address")
	id := fs.String("id", "", "worker id (default <hostname>-<pid>)")
	maxShards := fs.Int("max-shards", 0, "how many shards to take at once (0 = no limit)")
	every := fs.Duration("report", time.Second, "load report interval")
	sinkDir := fs.String("sink", "", "a directory: every shard writes a record there every --emit, under its epoch, and stops when the sink has seen a newer epoch of it")
	emit := fs.Duration("emit", time.Second, "how often each shard writes to --sink")
	tlsDir := fs.String("tls", "", "directory with ca.pem, cert.pem and key.pem ('strata tls cert --role worker'): attach over mutual TLS (a host with a tls section requires it)")
	host := fs.String("host", "", "with --tls: the host agent's ID, which its certificate must name (default: any host of the CA)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if *every <= 0 {
		return fmt.Errorf("--report: must be > 0 (got %s)", *every)
	}
	if *emit <= 0 {
		return fmt.Errorf("--emit: must be > 0 (got %s)", *emit)
	}
	s := &shards{run: map[interfaces.ShardID]interfaces.Shard{}, out: out, emit: *emit, stops: map[interfaces.ShardID]chan struct{}{}}
	if *sinkDir != "" {
		s.sink = &epochSink{dir: *sinkDir}
	}
	logger := log.New(out, "", log.LstdFlags)
	var tls *worker.TLS
	if *tlsDir != "" {
		tls = &worker.TLS{CA: filepath.Join(*tlsDir, "ca.pem"), Cert: filepath.Join(*tlsDir, "cert.pem"), Key: filepath.Join(*tlsDir, "key.pem"), Host: *host}
	}
	c, err := worker.Connect(ctx, *addr, s, worker.Options{WorkerID: *id, MaxShards: *maxShards,
		Load: s.load, LoadInterval: *every, Logf: logger.Printf, TLS: tls})
	if err != nil {
		return err
	}
	<-c.Done()
	return nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(2)
	}
}
