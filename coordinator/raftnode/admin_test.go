package raftnode_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/coordinator/raftnode"
	"github.com/strata-sched/strata/interfaces"
)

func TestAdminEndpointRejectsBadInput(t *testing.T) {
	tr, err := raftnode.StartTier(raftnode.Config{ID: "a", Dir: t.TempDir(), RaftBind: "127.0.0.1:0", AdminBind: "127.0.0.1:0", RawWrites: true}, fsm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown()
	if err := tr.Bootstrap(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := tr.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	c := raftnode.NewClient(tr.AdminAddr())
	tests := []struct {
		name         string
		method, path string
		body         any
		sentinel     error
		msg          string
	}{
		{"join without id", http.MethodPost, "/v1/raft/join", raftnode.JoinRequest{RaftAddr: "127.0.0.1:1"}, interfaces.ErrInvalid, "join: id: must not be empty"},
		{"join bad address", http.MethodPost, "/v1/raft/join", raftnode.JoinRequest{ID: "b", RaftAddr: "nowhere"}, interfaces.ErrInvalid, `raft address "nowhere": must be host:port`},
		{"join rejected with an admin address", http.MethodPost, "/v1/raft/join", raftnode.JoinRequest{RaftAddr: "10.0.0.9:7000", AdminAddr: "evil.example:1"}, interfaces.ErrInvalid, "join: id: must not be empty"},
		{"join bad admin address", http.MethodPost, "/v1/raft/join", raftnode.JoinRequest{ID: "b", RaftAddr: "10.0.0.9:7000", AdminAddr: "evil"}, interfaces.ErrInvalid, `admin address "evil": must be host:port`},
		{"remove unknown", http.MethodPost, "/v1/raft/remove", raftnode.RemoveRequest{ID: "zz"}, interfaces.ErrNotFound, `server "zz"`},
		{"unknown body field", http.MethodPost, "/v1/raft/remove", map[string]string{"idd": "x"}, interfaces.ErrInvalid, `unknown field "idd"`},
		{"garbage command", http.MethodPost, "/v1/raft/apply", raftnode.ApplyRequest{Command: []byte{0xff, 1, 2}}, interfaces.ErrInvalid, ""},
		{"two children", http.MethodPost, "/v1/tier/children", raftnode.ChildrenRequest{Children: make([]interfaces.Child, 2)}, interfaces.ErrInvalid, "exactly one child"},
		{"invalid child", http.MethodPost, "/v1/tier/children", raftnode.ChildrenRequest{Children: []interfaces.Child{{ID: "c0"}}}, interfaces.ErrInvalid, "child.tier"},
		{"assignment without shard", http.MethodGet, "/v1/tier/assignment", nil, interfaces.ErrInvalid, "shard: must not be empty"},
		{"bad read mode", http.MethodGet, "/v1/tier/assignment?shard=s&read=fast", nil, interfaces.ErrInvalid, `read mode "fast"`},
		{"move of unknown shard", http.MethodPost, "/v1/tier/move", interfaces.Move{Shard: "s9", From: "c0", To: "c1", Epoch: 1}, interfaces.ErrNotFound, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := c.Call(ctx, tt.method, tt.path, tt.body, nil)
			var re *raftnode.RemoteError
			if !errors.Is(err, tt.sentinel) || !errors.As(err, &re) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("%s %s: %v, want %v containing %q", tt.method, tt.path, err, tt.sentinel, tt.msg)
			}
		})
	}
	// A rejected join taught the replica nothing (no half-applied request).
	if addr, ok := tr.StreamLayer().AdminAddrOf("10.0.0.9:7000"); ok {
		t.Errorf("a rejected join recorded admin address %q for 10.0.0.9:7000", addr)
	}
	// Test-mode endpoints are off unless asked for.
	if err := c.SetBlocked(ctx, nil); err == nil {
		t.Fatal("/v1/test/block answered on a replica not in test mode")
	}
}

// TestProductionReplicaServesNoRawWrites: a replica without RawWrites (every
// tier daemon) answers every raw write — membership, apply, the tier writes
// — with 403 and a message naming the way that is served, and changes
// nothing; its reads still answer.
func TestProductionReplicaServesNoRawWrites(t *testing.T) {
	tr, err := raftnode.StartTier(raftnode.Config{ID: "a", Dir: t.TempDir(), RaftBind: "127.0.0.1:0", AdminBind: "127.0.0.1:0"}, fsm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown()
	if err := tr.Bootstrap(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := tr.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	before, err := tr.SnapshotBytes()
	if err != nil {
		t.Fatal(err)
	}
	peers, _ := tr.Peers()
	c := raftnode.NewClient(tr.AdminAddr())
	child := interfaces.Child{ID: "evil", Tier: "host", Capacity: interfaces.Load{CPU: 1e9}}
	for _, w := range []struct {
		path string
		body any
	}{
		{"/v1/raft/apply", raftnode.ApplyRequest{Command: fsm.MustEncode(&fsm.PutChild{Child: child})}},
		{"/v1/raft/remove", raftnode.RemoveRequest{ID: "a"}},
		{"/v1/raft/join", raftnode.JoinRequest{ID: "b", RaftAddr: "127.0.0.1:1"}},
		{"/v1/tier/children", raftnode.ChildrenRequest{Children: []interfaces.Child{child}}},
		{"/v1/tier/shards", raftnode.ShardsRequest{Shards: []interfaces.Shard{{ID: "s", Job: "j"}}}},
		{"/v1/tier/assign", raftnode.AssignRequest{Shard: "s", Child: "evil"}},
		{"/v1/tier/move", interfaces.Move{Shard: "s", From: "a", To: "evil", Epoch: 1}},
	} {
		err := c.Call(ctx, http.MethodPost, w.path, w.body, nil)
		var re *raftnode.RemoteError
		if !errors.As(err, &re) || re.Code != raftnode.CodeForbidden || !strings.Contains(err.Error(), "POST "+w.path+": this replica serves no raw writes") ||
			!strings.Contains(err.Error(), "strata raft join|remove") {
			t.Errorf("POST %s: %v, want a forbidden error naming the gRPC Admin service", w.path, err)
		}
	}
	after, _ := tr.SnapshotBytes()
	if string(after) != string(before) {
		t.Error("a refused raw write changed the state")
	}
	if p, _ := tr.Peers(); len(p) != len(peers) {
		t.Errorf("peers %v, were %v", p, peers)
	}
	if _, err := c.Status(ctx); err != nil {
		t.Errorf("status: %v", err)
	}
	if _, err := c.Peers(ctx); err != nil {
		t.Errorf("peers: %v", err)
	}
}
