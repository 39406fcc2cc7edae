package tierd

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/internal/testutil"
)

// The daemon's FSM restores leanly (one state of peak memory), and a replica
// restarted on its data dir gets back exactly its state from its snapshot plus
// the log after it.
func TestRestartRestoresLeanSnapshotAndLog(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{
		Tier: "global", Instance: "global-x", NodeID: "n1", DataDir: dir,
		RaftAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", Bootstrap: true,
		Interval: time.Hour, // no control rounds: the test alone writes
	}
	startLeader := func(cfg Config) *Daemon {
		t.Helper()
		d, err := Start(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		led := false
		defer func() {
			if !led { // the wait failed the test: close before it ends
				d.Close()
			}
		}()
		testutil.Until(t, "the daemon leads", 10*time.Second, d.IsLeader)
		led = true
		return d
	}
	d := startLeader(cfg)
	if !d.Tier().Options.LeanRestore {
		d.Close()
		t.Fatal("the daemon's FSM does not restore leanly")
	}
	ctx := context.Background()
	exec := func(c fsm.Command) {
		t.Helper()
		r, err := d.Tier().Exec(ctx, c)
		if err == nil {
			err = r.Err()
		}
		if err != nil {
			d.Close()
			t.Fatal(err)
		}
	}
	exec(&fsm.PutChild{Child: interfaces.Child{ID: "h1", Tier: "host", Capacity: interfaces.Load{CPU: 100}}})
	var shards []interfaces.Shard
	for i := range 50 {
		shards = append(shards, interfaces.Shard{ID: interfaces.ShardID(fmt.Sprintf("s%02d", i)), Job: "j", Load: interfaces.Load{CPU: 1}})
	}
	exec(&fsm.PutShards{Shards: shards})
	if err := d.Tier().Raft().Snapshot().Error(); err != nil {
		d.Close()
		t.Fatal(err)
	}
	exec(&fsm.Assign{Shard: "s07", Child: "h1", Reason: "after the snapshot"})
	want := d.Tier().FSM.Hash()
	cfg.RaftAddr = d.Tier().RaftAddr()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	d = startLeader(cfg)
	defer d.Close()
	if err := d.Tier().Raft().Barrier(5 * time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	if got := d.Tier().FSM.Hash(); got != want {
		t.Fatalf("state after restart differs from before (hash %x, want %x)", got[:8], want[:8])
	}
	if st, ok := d.Tier().FSM.Shard("s07"); !ok || st.Owner != "h1" {
		t.Fatalf("s07 after restart: %+v %v, want on h1", st, ok)
	}
}
