package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-sched/strata/examples/clickcount"
	"github.com/strata-sched/strata/sdk/stream"
	"github.com/strata-sched/strata/sdk/worker"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "clickcount:", err)
		os.Exit(2)
	}
}

// errCheckFailed is check's verdict when the sink differs from the input.
var errCheckFailed = errors.New("the sink differs from the input")

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: clickcount worker|produce|check [flags]")
	}
	fs := flag.NewFlagSet("clickcount "+args[0], flag.ContinueOnError)
	fs.SetOutput(out)
	natsURL := fs.String("nats", nats.DefaultURL, "the NATS server (JetStream enabled)")
	job := fs.String("job", "clicks", "the job: its shards are <job>/<partition>")
	window := fs.Duration("window", time.Second, "the tumbling window")
	partitions := fs.Int("partitions", 8, "produce, check: the job's partitions (= its parallelism)")
	var sub func() error
	switch args[0] {
	case "worker":
		addr := fs.String("addr", "127.0.0.1:7422", "the host agent's callback address")
		id := fs.String("id", "", "worker id (default <hostname>-<pid>)")
		tlsDir := fs.String("tls", "", "directory with ca.pem, cert.pem and key.pem of a worker certificate: attach over mutual TLS")
		host := fs.String("host", "", "with --tls: the host agent's ID its certificate must name")
		stateBytes := fs.Int("state-bytes", 0, "ballast state per shard (bytes), carried by every checkpoint and move")
		ckEvery := fs.Duration("checkpoint", 500*time.Millisecond, "checkpoint interval")
		events := fs.String("events", "", "append each shard's restored/first/caughtup/stopped/fenced events to this file (JSON lines)")
		progress := fs.Duration("progress", 0, "with --events: also append each shard's processed count and lag this often")
		sub = func() error {
			return runWorker(ctx, out, *natsURL, *job, *window, *addr, *id, *tlsDir, *host, *stateBytes, *ckEvery, *events, *progress)
		}
	case "produce":
		rate := fs.Float64("rate", 1000, "clicks per second")
		keys := fs.Int("keys", 1000, "distinct keys")
		skew := fs.Float64("skew", 1.2, "Zipf exponent (> 1)")
		count := fs.Int("count", 0, "stop after this many clicks (0: --duration)")
		dur := fs.Duration("duration", 0, "stop after this long (0 with --count 0: until interrupted)")
		seed := fs.Uint64("seed", 1, "key draw seed")
		sub = func() error {
			js, done, err := connect(*natsURL)
			if err != nil {
				return err
			}
			defer done()
			pctx := ctx
			if *dur > 0 {
				var cancel context.CancelFunc
				pctx, cancel = context.WithTimeout(ctx, *dur)
				defer cancel()
			}
			p := clickcount.Producer{JS: js, Names: stream.Names{Job: *job}, Partitions: *partitions, Rate: *rate, Keys: *keys, Skew: *skew, Seed: *seed}
			n, err := p.Run(pctx, *count)
			fmt.Fprintf(out, "published %d clicks\n", n)
			return err
		}
	case "check":
		sub = func() error {
			js, done, err := connect(*natsURL)
			if err != nil {
				return err
			}
			defer done()
			n := stream.Names{Job: *job}
			want, clicks, err := clickcount.Expected(ctx, js, n, *window)
			if err != nil {
				return err
			}
			sink, err := stream.OpenSink(ctx, js, n)
			if err != nil {
				return err
			}
			v, err := clickcount.Compare(ctx, sink, *partitions, want, clicks)
			if err != nil {
				return err
			}
			fmt.Fprintln(out, v)
			for _, p := range v.Problems {
				fmt.Fprintln(out, "  ", p)
			}
			if !v.OK() {
				return errCheckFailed
			}
			return nil
		}
	default:
		return fmt.Errorf("unknown command %q (worker, produce or check)", args[0])
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if err := stream.CheckJob("--job", *job); err != nil {
		return err
	}
	if *window <= 0 {
		return fmt.Errorf("--window: must be > 0 (got %s)", *window)
	}
	if *partitions < 1 {
		return fmt.Errorf("--partitions: must be ≥ 1 (got %d)", *partitions)
	}
	return sub()
}

func connect(url string) (jetstream.JetStream, func(), error) {
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return nil, nil, fmt.Errorf("--nats %s: %w", url, err)
	}
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(30*time.Second)) // large checkpoints

	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return js, nc.Close, nil
}

func runWorker(ctx context.Context, out io.Writer, natsURL, job string, window time.Duration, addr, id, tlsDir, host string, stateBytes int, ckEvery time.Duration, events string, progress time.Duration) error {
	factory, err := clickcount.NewFactory(window, stateBytes)
	if err != nil {
		return fmt.Errorf("--window, --state-bytes: %w", err)
	}
	if ckEvery <= 0 {
		return fmt.Errorf("--checkpoint: must be > 0 (got %s)", ckEvery)
	}
	js, done, err := connect(natsURL)
	if err != nil {
		return err
	}
	defer done()
	logger := log.New(out, "", log.LstdFlags|log.Lmicroseconds)
	onEvent := func(stream.Event) {}
	var write func(EventLine)
	if events != "" {
		f, err := os.OpenFile(events, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("--events: %w", err)
		}
		defer f.Close()
		var mu sync.Mutex
		enc := json.NewEncoder(f)
		write = func(l EventLine) {
			mu.Lock()
			defer mu.Unlock()
			_ = enc.Encode(l)
		}
		onEvent = func(e stream.Event) {
			write(EventLine{Shard: string(e.Shard), Epoch: uint64(e.Epoch), Kind: e.Kind, At: e.At.UnixNano(), Offset: e.Offset, StateBytes: e.StateBytes, TookNanos: int64(e.Took)})
		}
	}
	r, err := stream.NewRunner(ctx, stream.Config{JS: js, Names: stream.Names{Job: job}, New: factory, CheckpointEvery: ckEvery, Logf: logger.Printf, OnEvent: onEvent})
	if err != nil {
		return err
	}
	var tls *worker.TLS
	if tlsDir != "" {
		tls = &worker.TLS{CA: filepath.Join(tlsDir, "ca.pem"), Cert: filepath.Join(tlsDir, "cert.pem"), Key: filepath.Join(tlsDir, "key.pem"), Host: host}
	}
	c, err := worker.Connect(ctx, addr, r, worker.Options{WorkerID: id, Load: r.Load, LoadInterval: 500 * time.Millisecond, Logf: logger.Printf, TLS: tls})
	if err != nil {
		return err
	}
	if write != nil && progress > 0 {
		go func() {
			t := time.NewTicker(progress)
			defer t.Stop()
			for {
				select {
				case <-c.Done():
					return
				case now := <-t.C:
					for id, st := range r.Stats() {
						write(EventLine{Shard: string(id), Kind: "progress", At: now.UnixNano(), Processed: st.Processed, Lag: st.Lag})
					}
				}
			}
		}()
	}
	<-c.Done()
	return r.Close()
}

// EventLine is one line of --events.
type EventLine struct {
	Shard      string `json:"shard"`
	Epoch      uint64 `json:"epoch"`
	Kind       string `json:"kind"`
	At         int64  `json:"at_unix_nano"`
	Offset     uint64 `json:"offset"`
	StateBytes int    `json:"state_bytes,omitempty"`
	TookNanos  int64  `json:"took_nanos,omitempty"`
	Processed  uint64 `json:"processed,omitempty"`
	Lag        uint64 `json:"lag,omitempty"`
}
