package hostagent_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/hostagent"
	"github.com/strata-sched/strata/coordinator/hostagent/driver/execdriver"
	"github.com/strata-sched/strata/coordinator/hostagent/ledger"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

// A worker that exits on its own after starting is dropped by the agent (the
// ledger records its stop) and the parent's re-sent assign is acked as a
// failure naming the exit status: evidence for the doctor. A healthy worker
// keeps running.
func TestExitedWorkerIsReportedAsAFailure(t *testing.T) {
	dir := t.TempDir()
	clk := hostagent.WallClock{}
	d, err := execdriver.New(execdriver.Config{Supervisor: execSup,
		Command: []string{"sh", "-c", `if [ "$STRATA_SHARD_ID" = bad ]; then sleep 0.2; exit 3; fi; exec sleep 60`},
		Clock:   clk, StopTimeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	ledgerPath := filepath.Join(dir, "h1.ledger")
	a, err := hostagent.Open(hostagent.Config{Host: "h1", StorePath: filepath.Join(dir, "h1.db"), LedgerPath: ledgerPath,
		Driver: d, Clock: clk, Capacity: interfaces.Load{CPU: 2}, TickInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, nil) }()
	if err := a.LeaseGrant(ctx, time.Now(), 30*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	for _, id := range []interfaces.ShardID{"bad", "good"} {
		if err := a.Assign(ctx, time.Now(), interfaces.Shard{ID: id, Job: "j"}, 4); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := a.Running()
		if len(r) == 1 && r[0] == "good" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("running %v: the exited worker was not dropped", r)
		}
		time.Sleep(20 * time.Millisecond)
	}
	out, err := a.HandleParent(ctx, time.Now(), wire.AssignToWire(interfaces.Shard{ID: "bad", Job: "j"}, 4))
	if err != nil {
		t.Fatal(err)
	}
	k := out.GetAck()
	if k.Ok || !k.Failed || !strings.Contains(k.Error, "exit status 3") {
		t.Fatalf("re-sent assign of the exited shard acked %+v", k)
	}
	if err := a.Assign(ctx, time.Now(), interfaces.Shard{ID: "bad", Job: "j"}, 5); errors.Is(err, hostagent.ErrShardFailed) {
		t.Errorf("a newer epoch is refused as the old failure: %v", err)
	}
	cancel()
	<-done
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	res, err := ledger.Check(ledgerPath)
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() || len(res.Running) != 0 {
		t.Errorf("ledger: %v, running at the end %v", res.Err(), res.Running)
	}
}
