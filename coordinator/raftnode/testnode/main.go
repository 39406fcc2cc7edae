package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/coordinator/raftnode"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("testnode", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		id        = fs.String("id", "", "server ID (required)")
		dir       = fs.String("dir", "", "data directory (required)")
		raftAddr  = fs.String("raft-addr", "127.0.0.1:0", "Raft TCP address")
		adminAddr = fs.String("admin-addr", "127.0.0.1:0", "admin HTTP address")
		bootstrap = fs.Bool("bootstrap", false, "start a new group with this replica (no-op on existing state)")
		join      = fs.String("join", "", "admin address of a member to join through (skipped on existing state)")
		testMode  = fs.Bool("test-mode", false, "serve /v1/test/* (blocked peers)")
		logLevel  = fs.String("log-level", "warn", "raft log level")
		heartbeat = fs.Duration("heartbeat", 0, "heartbeat timeout (0: LAN default)")
		election  = fs.Duration("election", 0, "election timeout (0: LAN default)")
		lease     = fs.Duration("lease", 0, "leader lease timeout (0: LAN default)")
	)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "testnode: unexpected arguments %v\n", fs.Args())
		return 2
	}
	cfg := raftnode.Config{ID: *id, Dir: *dir, RaftBind: *raftAddr, AdminBind: *adminAddr, TestMode: *testMode, RawWrites: true,
		LogOutput: stderr, LogLevel: *logLevel}
	cfg.Timeouts.Heartbeat, cfg.Timeouts.Election, cfg.Timeouts.LeaderLease = *heartbeat, *election, *lease
	t, err := raftnode.StartTier(cfg, fsm.Options{})
	if err != nil {
		fmt.Fprintf(stderr, "testnode: %v\n", err)
		return 1
	}
	existing := t.Raft().LastIndex() > 0
	if *bootstrap {
		if err := t.Bootstrap(); err != nil {
			fmt.Fprintf(stderr, "testnode: %v\n", err)
			_ = t.Shutdown()
			return 1
		}
	}
	if *join != "" && !existing {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := t.Join(ctx, *join)
		cancel()
		if err != nil {
			fmt.Fprintf(stderr, "testnode: %v\n", err)
			_ = t.Shutdown()
			return 1
		}
	}
	st, _ := json.Marshal(t.Status())
	fmt.Fprintf(stdout, "READY %s\n", st)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	if err := t.Shutdown(); err != nil {
		fmt.Fprintf(stderr, "testnode: shutdown: %v\n", err)
		return 1
	}
	return 0
}
