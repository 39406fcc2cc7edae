package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/raftnode"
	"github.com/strata-sched/strata/coordinator/tierd"
	"github.com/strata-sched/strata/internal/testutil"
)

const raftTestToken = "strata_raft-cli-test-bootstrap-0123456789"

// startRaftPair starts replica a of a global tier (bootstrapped alone) and
// replica b (not a member yet), both with ACLs on and the same bootstrap
// token; b knows a's gRPC address, so it forwards writes to it.
func startRaftPair(t *testing.T) (a, b *tierd.Daemon) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(raftTestToken), 0o600); err != nil {
		t.Fatal(err)
	}
	pa := tierd.Peer{ID: "a", Raft: testutil.FreeAddr(t), GRPC: testutil.FreeAddr(t)}
	pb := tierd.Peer{ID: "b", Raft: testutil.FreeAddr(t), GRPC: testutil.FreeAddr(t)}
	start := func(p tierd.Peer, bootstrap bool, peers []tierd.Peer) *tierd.Daemon {
		d, err := tierd.Start(tierd.Config{Tier: "global", Instance: "g", NodeID: p.ID, DataDir: t.TempDir(),
			RaftAddr: p.Raft, GRPCAddr: p.GRPC, AdminAddr: "127.0.0.1:0", Bootstrap: bootstrap, Peers: peers,
			ACL: tierd.ACLConfig{Enabled: true, BootstrapTokenFile: file}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	a = start(pa, true, []tierd.Peer{pa})
	b = start(pb, false, []tierd.Peer{pa, pb})
	testutil.Until(t, "a leads", 10*time.Second, a.IsLeader)
	return a, b
}

func TestRaftCLIPeersJoinRemove(t *testing.T) {
	a, b := startRaftPair(t)
	tok := "--token=" + raftTestToken

	// Without a token, or with one that is not admin, membership is refused
	// and nothing changes.
	code, _, errOut := runCLI("raft", "join", "b", b.Tier().RaftAddr(), "--addr", a.GRPCAddr())
	if code != 1 || !strings.Contains(errOut, "requires an ACL token") {
		t.Fatalf("join without a token: exit %d, stderr %q", code, errOut)
	}
	// A join naming an address where no replica answers is refused, naming
	// the address.
	code, _, errOut = runCLI("raft", "join", "b", "127.0.0.1:1", "--addr", a.GRPCAddr(), tok)
	if code != 1 || !strings.Contains(errOut, "cannot reach its raft address 127.0.0.1:1") {
		t.Fatalf("join with a dead raft address: exit %d, stderr %q", code, errOut)
	}
	// With --admin-addr, a replica that reports another raft address there is
	// refused too.
	code, _, errOut = runCLI("raft", "join", "b", a.Tier().RaftAddr(), "--admin-addr", b.Tier().AdminAddr(), "--addr", a.GRPCAddr(), tok)
	if code != 1 || !strings.Contains(errOut, "has raft address "+b.Tier().RaftAddr()+", not "+a.Tier().RaftAddr()) {
		t.Fatalf("join with b's admin address and a's raft address: exit %d, stderr %q", code, errOut)
	}
	if ps, err := a.Tier().Peers(); err != nil || len(ps) != 1 {
		t.Fatalf("peers after refused joins: %+v %v", ps, err)
	}

	code, out, errOut := runCLI("raft", "join", "b", b.Tier().RaftAddr(), "--admin-addr", b.Tier().AdminAddr(), "--addr", a.GRPCAddr(), tok)
	if code != 0 || !strings.Contains(out, "joined b") {
		t.Fatalf("join: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// Ask the follower: it answers from its own copy of the configuration.
	var peers raftnode.PeersResponse
	testutil.Eventually(t, "b sees both peers", 10*time.Second, func() error {
		code, out, errOut = runCLI("raft", "peers", "-o", "json", "--addr", b.GRPCAddr(), tok)
		if code != 0 {
			return fmt.Errorf("peers: exit %d: %s", code, errOut)
		}
		if err := json.Unmarshal([]byte(out), &peers); err != nil {
			t.Fatalf("peers -o json is not JSON: %v\n%s", err, out)
		}
		if len(peers.Peers) != 2 {
			return fmt.Errorf("peers = %+v, want a (leader) and b", peers.Peers)
		}
		return nil
	})
	if peers.Peers[0].ID != "a" || !peers.Peers[0].Leader || peers.Peers[1].ID != "b" || peers.Peers[1].Leader || peers.Peers[1].Suffrage != "Voter" {
		t.Fatalf("peers after join = %+v, want a (leader) and b", peers.Peers)
	}
	code, out, _ = runCLI("raft", "peers", "--addr", a.GRPCAddr(), tok)
	if code != 0 || !strings.Contains(out, "SUFFRAGE") || !strings.Contains(out, b.Tier().RaftAddr()) {
		t.Errorf("peers table: exit %d, output %q", code, out)
	}

	// Removal sent to the follower is forwarded to the leader, with the token.
	code, out, errOut = runCLI("raft", "remove", "b", "-o", "json", "--addr", b.GRPCAddr(), tok)
	if code != 0 {
		t.Fatalf("remove via follower: exit %d: %s", code, errOut)
	}
	var res raftChangeJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil || !res.OK || res.ID != "b" {
		t.Fatalf("remove -o json = %q (%v)", out, err)
	}
	ps, err := a.Tier().Peers()
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || ps[0].ID != "a" {
		t.Fatalf("peers after remove = %+v, want only a", ps)
	}
	code, _, errOut = runCLI("raft", "remove", "nosuch", "--addr", a.GRPCAddr(), tok)
	if code != 1 || !strings.Contains(errOut, "not found") {
		t.Errorf("remove unknown: exit %d, stderr %q", code, errOut)
	}
	t.Setenv("STRATA_TOKEN", "")
	code, _, errOut = runCLI("raft", "remove", "a", "--addr", a.GRPCAddr())
	if code != 1 || !strings.Contains(errOut, "requires an ACL token") {
		t.Errorf("remove without a token: exit %d, stderr %q", code, errOut)
	}
	if ps, _ := a.Tier().Peers(); len(ps) != 1 {
		t.Errorf("peers after a refused remove: %+v", ps)
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
		{[]string{"raft", "status", "--raft-admin", "nocolon"}, 2, `--raft-admin "nocolon": must be host:port`},
		{[]string{"raft", "status", "--raft-admin", "127.0.0.1:1"}, 1, "connection refused"},
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
