package hostagent_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/hostagent"
	"github.com/strata-sched/strata/coordinator/hostagent/driver/execdriver"
	"github.com/strata-sched/strata/coordinator/hostagent/ledger"
	"github.com/strata-sched/strata/interfaces"
)

// TestAgentWithExecDriver runs real processes through the agent on the wall
// clock: revoke kills the shard's process, the lease expiry (driven by Run)
// kills the rest, and the ledger is clean and shows every stop after its start.
func TestAgentWithExecDriver(t *testing.T) {
	dir := t.TempDir()
	clk := hostagent.WallClock{}
	d, err := execdriver.New(execdriver.Config{Supervisor: execSup,
		Command:     []string{"sh", "-c", `echo "$STRATA_SHARD_EPOCH" > "$OUT/$STRATA_SHARD_ID"; exec sleep 60`},
		Env:         []string{"OUT=" + dir},
		StopTimeout: 2 * time.Second,
		Clock:       clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	a, err := hostagent.Open(hostagent.Config{Host: "h1", StorePath: filepath.Join(dir, "h1.db"), LedgerPath: filepath.Join(dir, "h1.ledger"),
		Driver: d, Clock: clk, Capacity: interfaces.Load{CPU: 2}, TickInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, nil) }()

	// ttl 1.5s → margin 300ms → fence 1.2s after the grant.
	if err := a.LeaseGrant(ctx, time.Now(), 1500*time.Millisecond, nil); err != nil {
		t.Fatal(err)
	}
	pids := map[string]int{}
	for _, id := range []string{"p1", "p2"} {
		if err := a.Assign(ctx, time.Now(), interfaces.Shard{ID: interfaces.ShardID(id), Job: "j"}, 3); err != nil {
			t.Fatal(err)
		}
		pid, ok := d.Pid(interfaces.ShardID(id))
		if !ok {
			t.Fatalf("%s has no process", id)
		}
		pids[id] = pid
	}
	if err := a.Revoke(ctx, time.Now(), "p1", 3); err != nil {
		t.Fatal(err)
	}
	if syscall.Kill(pids["p1"], 0) == nil {
		t.Fatal("revoked shard's process still alive")
	}
	for i := 0; len(a.Running()) > 0; i++ {
		if i > 500 {
			t.Fatal("agent did not fence")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if syscall.Kill(pids["p2"], 0) == nil {
		t.Fatal("fenced shard's process still alive")
	}
	cancel()
	<-done
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "p2"))
	if strings.TrimSpace(string(b)) != "3" {
		t.Fatalf("p2 saw epoch %q", b)
	}
	res, err := ledger.Check(filepath.Join(dir, "h1.ledger"))
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() || len(res.Intervals) != 2 || len(res.Running) != 0 {
		t.Fatalf("ledger: %v, %+v", res.Err(), res.Intervals)
	}
}
