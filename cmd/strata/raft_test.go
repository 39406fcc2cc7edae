package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/strata-sched/strata/coordinator/raftnode"
	"github.com/strata-sched/strata/internal/testutil"
)

// nopFSM is enough for membership commands: they never reach the FSM.
type nopFSM struct{}

func (nopFSM) Apply(*raft.Log) any                 { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error) { return nopSnap{}, nil }
func (nopFSM) Restore(r io.ReadCloser) error       { return r.Close() }

type nopSnap struct{}

func (nopSnap) Persist(s raft.SnapshotSink) error { return s.Close() }
func (nopSnap) Release()                          {}

func startRaftNode(t *testing.T, id string) *raftnode.Node {
	t.Helper()
	n, err := raftnode.New(raftnode.Config{ID: id, Dir: t.TempDir(), RaftBind: "127.0.0.1:0", AdminBind: "127.0.0.1:0"}, nopFSM{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Shutdown() })
	return n
}

func TestRaftCLIPeersJoinRemove(t *testing.T) {
	a := startRaftNode(t, "a")
	if err := a.Bootstrap(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := a.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	b := startRaftNode(t, "b")

	// A join naming a replica that does not answer is refused, naming the
	// address, and changes nothing.
	code, _, errOut := runCLI("raft", "join", "b", a.RaftAddr(), "--admin-addr", b.AdminAddr(), "--addr", a.AdminAddr())
	if code != 1 || !strings.Contains(errOut, "has raft address "+b.RaftAddr()+", not "+a.RaftAddr()) {
		t.Fatalf("join with b's admin address and a's raft address: exit %d, stderr %q", code, errOut)
	}
	if ps, err := a.Peers(); err != nil || len(ps) != 1 {
		t.Fatalf("peers after a refused join: %+v %v", ps, err)
	}

	code, out, errOut := runCLI("raft", "join", "b", b.RaftAddr(), "--admin-addr", b.AdminAddr(), "--addr", a.AdminAddr())
	if code != 0 {
		t.Fatalf("join: exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "joined b") {
		t.Errorf("join output %q lacks 'joined b'", out)
	}
	// Ask the follower: it answers from its own copy of the configuration.
	var peers raftnode.PeersResponse
	testutil.Eventually(t, "b sees both peers", 10*time.Second, func() error {
		code, out, errOut = runCLI("raft", "peers", "-o", "json", "--addr", b.AdminAddr())
		if code != 0 {
			t.Fatalf("peers: exit %d: %s", code, errOut)
		}
		if err := json.Unmarshal([]byte(out), &peers); err != nil {
			t.Fatalf("peers -o json is not JSON: %v\n%s", err, out)
		}
		if len(peers.Peers) != 2 {
			return fmt.Errorf("peers = %+v, want a (leader) and b", peers.Peers)
		}
		return nil
	})
	if len(peers.Peers) != 2 || peers.Peers[0].ID != "a" || !peers.Peers[0].Leader || peers.Peers[1].ID != "b" || peers.Peers[1].Leader {
		t.Fatalf("peers after join = %+v, want a (leader) and b", peers.Peers)
	}
	code, out, _ = runCLI("raft", "peers", "--addr", a.AdminAddr())
	if code != 0 || !strings.Contains(out, "SUFFRAGE") || !strings.Contains(out, b.RaftAddr()) {
		t.Errorf("peers table: exit %d, output %q", code, out)
	}

	// Removal sent to the follower is forwarded to the leader.
	code, out, errOut = runCLI("raft", "remove", "b", "-o", "json", "--addr", b.AdminAddr())
	if code != 0 {
		t.Fatalf("remove via follower: exit %d: %s", code, errOut)
	}
	var res raftChangeJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil || !res.OK || res.ID != "b" {
		t.Fatalf("remove -o json = %q (%v)", out, err)
	}
	ps, err := a.Peers()
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || ps[0].ID != "a" {
		t.Fatalf("peers after remove = %+v, want only a", ps)
	}
	code, _, errOut = runCLI("raft", "remove", "nosuch", "--addr", a.AdminAddr())
	if code != 1 || !strings.Contains(errOut, "not found") {
		t.Errorf("remove unknown: exit %d, stderr %q", code, errOut)
	}
}

func TestRaftCLIBadInput(t *testing.T) {
	tests := []struct {
		args   []string
		code   int
		errHas string
	}{
		{[]string{"raft", "peers", "--addr", "nocolon"}, 2, `--addr "nocolon": must be host:port`},
		{[]string{"raft", "peers", "-o", "yaml", "--addr", "127.0.0.1:1"}, 2, "--output: must be one of"},
		{[]string{"raft", "join", "x"}, 2, "accepts 2 arg(s)"},
		{[]string{"raft", "join", "x", "noport", "--addr", "127.0.0.1:1"}, 2, `RAFT_ADDR "noport": must be host:port`},
		{[]string{"raft", "remove"}, 2, "accepts 1 arg(s)"},
		{[]string{"raft", "peers", "--timeout", "0s", "--addr", "127.0.0.1:1"}, 2, "--timeout: must be positive"},
		{[]string{"raft", "status", "--addr", "127.0.0.1:1"}, 1, "connection refused"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, _, errOut := runCLI(tt.args...)
			if code != tt.code || !strings.Contains(errOut, tt.errHas) {
				t.Errorf("exit %d stderr %q, want exit %d and %q", code, errOut, tt.code, tt.errHas)
			}
		})
	}
}
