package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: beat DIR")
		os.Exit(2)
	}
	host, shard, epoch := os.Getenv("STRATA_HOST"), os.Getenv("STRATA_SHARD_ID"), os.Getenv("STRATA_SHARD_EPOCH")
	if host == "" || shard == "" || epoch == "" {
		fmt.Fprintln(os.Stderr, "beat: STRATA_HOST, STRATA_SHARD_ID and STRATA_SHARD_EPOCH are required")
		os.Exit(2)
	}
	f, err := os.OpenFile(filepath.Join(os.Args[1], host+".beats"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "beat:", err)
		os.Exit(1)
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT)
	tick := time.NewTicker(100 * time.Millisecond)
	pid := os.Getpid()
	for {
		// One write(2) per line (< PIPE_BUF): lines of concurrent workers
		// never interleave.
		if _, err := fmt.Fprintf(f, "%d %s %s %d\n", time.Now().UnixNano(), shard, epoch, pid); err != nil {
			os.Exit(1)
		}
		select {
		case <-term:
			os.Exit(0)
		case <-tick.C:
		}
	}
}
