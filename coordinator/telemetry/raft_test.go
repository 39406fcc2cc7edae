package telemetry

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

type nopFSM struct{}

func (nopFSM) Apply(*raft.Log) any                 { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, io.EOF }
func (nopFSM) Restore(io.ReadCloser) error         { return nil }

// In a process that runs one daemon, hashicorp/raft's own metrics reach that
// daemon's registry, next to the per-replica state read at scrape time.
func TestRaftMetricsOfAOneDaemonProcess(t *testing.T) {
	OneDaemonProcess()
	m := NewMetrics(map[string]string{"tier": "global", "tier_instance": "global", "node": "n1"})
	defer m.Close()
	conf := raft.DefaultConfig()
	conf.LocalID = "n1"
	conf.HeartbeatTimeout, conf.ElectionTimeout, conf.LeaderLeaseTimeout = 50*time.Millisecond, 50*time.Millisecond, 50*time.Millisecond
	conf.CommitTimeout = 5 * time.Millisecond
	conf.Logger = hclog.NewNullLogger()
	store := raft.NewInmemStore()
	addr, tr := raft.NewInmemTransport("")
	r, err := raft.NewRaft(conf, nopFSM{}, store, store, raft.NewInmemSnapshotStore(), tr)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown()
	if err := r.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: "n1", Address: addr}}}).Error(); err != nil {
		t.Fatal(err)
	}
	m.RaftStats(r)
	deadline := time.Now().Add(10 * time.Second)
	for r.State() != raft.Leader {
		if time.Now().After(deadline) {
			t.Fatal("no leader after 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i := 0; i < 3; i++ {
		if err := r.Apply([]byte("x"), time.Second).Error(); err != nil {
			t.Fatal(err)
		}
	}
	out := scrape(t, m)
	for _, want := range []string{
		`strata_raft_commit_seconds_count{node="n1",tier="global",tier_instance="global"}`,
		`strata_raft_fsm_apply_seconds_count{`,
		`strata_raft_apply_total{node="n1",tier="global",tier_instance="global"} 3`,
		`strata_raft_transitions_total{node="n1",state="leader",tier="global",tier_instance="global"} 1`,
		`strata_raft_state{node="n1",state="Leader",tier="global",tier_instance="global"} 1`,
		`strata_raft_peers{node="n1",tier="global",tier_instance="global"} 1`,
		"go_goroutines", "process_",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
}
