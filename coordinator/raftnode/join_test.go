package raftnode_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/coordinator/raftnode"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/internal/testutil"
)

// TestJoinRefusesAnUnreachableOrWrongReplica: a join that names a replica
// which does not answer, or answers as another server, is refused before the
// configuration changes, naming the address (a typo used to add an unreachable
// voter at once, and the group lost its quorum for good). A real join works,
// and joining a member again stays harmless.
func TestJoinRefusesAnUnreachableOrWrongReplica(t *testing.T) {
	start := func(id string) *raftnode.Tier {
		tr, err := raftnode.StartTier(raftnode.Config{ID: id, Dir: t.TempDir(), RaftBind: "127.0.0.1:0", AdminBind: "127.0.0.1:0", RawWrites: true}, fsm.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tr.Shutdown() })
		return tr
	}
	a, b := start("a"), start("b")
	if err := a.Bootstrap(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := a.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	c := raftnode.NewClient(a.AdminAddr())
	dead := testutil.FreeAddr(t)
	for _, tt := range []struct {
		name     string
		req      raftnode.JoinRequest
		sentinel error
		msg      []string
	}{
		{"raft address nobody listens on", raftnode.JoinRequest{ID: "b", RaftAddr: dead}, nil, []string{"cannot reach", "raft address " + dead}},
		{"admin address nobody listens on", raftnode.JoinRequest{ID: "b", RaftAddr: b.RaftAddr(), AdminAddr: dead}, nil, []string{"cannot reach", "admin address " + dead}},
		{"another server's ID", raftnode.JoinRequest{ID: "x", RaftAddr: b.RaftAddr(), AdminAddr: b.AdminAddr()}, interfaces.ErrInvalid, []string{`reports ID "b"`, b.AdminAddr()}},
		{"another server's raft address", raftnode.JoinRequest{ID: "b", RaftAddr: a.RaftAddr(), AdminAddr: b.AdminAddr()}, interfaces.ErrInvalid, []string{"raft address " + b.RaftAddr(), a.RaftAddr()}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			jctx, jcancel := context.WithTimeout(ctx, 8*time.Second)
			defer jcancel()
			err := c.Join(jctx, tt.req)
			if err == nil {
				t.Fatalf("join %+v accepted", tt.req)
			}
			if tt.sentinel != nil && !errors.Is(err, tt.sentinel) {
				t.Errorf("join %+v: %v, want %v", tt.req, err, tt.sentinel)
			}
			for _, m := range tt.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("join %+v: %q does not say %q", tt.req, err, m)
				}
			}
			peers, perr := a.Peers()
			if perr != nil || len(peers) != 1 || peers[0].ID != "a" {
				t.Fatalf("peers after a refused join: %+v %v, want only a", peers, perr)
			}
		})
	}
	if err := c.Join(ctx, raftnode.JoinRequest{ID: "b", RaftAddr: b.RaftAddr(), AdminAddr: b.AdminAddr()}); err != nil {
		t.Fatalf("join b: %v", err)
	}
	// Joining members again is harmless, whatever the admin address says.
	for _, req := range []raftnode.JoinRequest{
		{ID: "b", RaftAddr: b.RaftAddr(), AdminAddr: b.AdminAddr()},
		{ID: "a", RaftAddr: a.RaftAddr()},
	} {
		if err := c.Join(ctx, req); err != nil {
			t.Fatalf("join %+v again: %v", req, err)
		}
	}
	if peers, err := a.Peers(); err != nil || len(peers) != 2 {
		t.Fatalf("peers: %+v %v, want a and b", peers, err)
	}
}
