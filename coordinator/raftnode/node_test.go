package raftnode_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/coordinator/raftnode"
	"github.com/strata-sched/strata/interfaces"
)

func TestConfigRejectsBadInput(t *testing.T) {
	tests := []struct {
		name string
		cfg  raftnode.Config
		want string
	}{
		{"no id", raftnode.Config{Dir: "x", RaftBind: "127.0.0.1:0"}, "config: id: must not be empty"},
		{"no dir", raftnode.Config{ID: "a", RaftBind: "127.0.0.1:0"}, "config: dir: must not be empty"},
		{"no bind", raftnode.Config{ID: "a", Dir: "x"}, "config: raft bind: must not be empty"},
		{"lease above heartbeat", raftnode.Config{ID: "a", Dir: "x", RaftBind: "127.0.0.1:0",
			Timeouts: raftnode.Timeouts{Heartbeat: 100 * time.Millisecond, LeaderLease: time.Second}}, "leader lease 1s must not exceed heartbeat 100ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := raftnode.New(tt.cfg, fsm.New())
			if !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, want ErrInvalid with %q", err, tt.want)
			}
		})
	}
}

func TestForwardingStatusAndLeave(t *testing.T) {
	tiers := tcpCluster(t, 3)
	l := leaderOf(t, tiers)
	var f *raftnode.Tier
	for _, tr := range tiers {
		if tr != l {
			f = tr
			break
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// A raw command sent to a follower's admin endpoint is forwarded to the leader.
	cmd, err := fsm.Encode(&fsm.PutChild{Child: interfaces.Child{ID: "c9", Tier: "host", Capacity: interfaces.Load{CPU: 4}}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := raftnode.NewClient(f.AdminAddr()).Apply(ctx, cmd)
	if err != nil {
		t.Fatalf("apply via follower: %v", err)
	}
	var res raftnode.ResultJSONValue
	if err := json.Unmarshal(resp.Result, &res); err != nil || res.Type != "put_child" || len(res.Ops) != 1 || res.Ops[0].Error != "" || res.Index != resp.Index {
		t.Fatalf("forwarded apply answer %s: %+v %v", resp.Result, res, err)
	}
	// Garbage is refused before it reaches the log.
	if _, err := raftnode.NewClient(l.AdminAddr()).Apply(ctx, nil); !errors.Is(err, interfaces.ErrInvalid) {
		t.Fatalf("empty command: %v, want ErrInvalid", err)
	}
	// A follower knows where the leader is, including its admin address.
	st, err := raftnode.NewClient(f.AdminAddr()).Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != "Follower" || st.LeaderID != l.ID() || st.LeaderAdmin != l.AdminAddr() {
		t.Fatalf("follower status %+v, want leader %s at admin %s", st, l.ID(), l.AdminAddr())
	}
	_, _, err = f.Apply(ctx, cmd)
	var nl *raftnode.NotLeaderError
	if !errors.As(err, &nl) || nl.LeaderAdmin != l.AdminAddr() {
		t.Fatalf("Apply on follower: %v, want NotLeaderError naming %s", err, l.AdminAddr())
	}

	// The leader leaves: leadership moves, the group shrinks to 2 and keeps writing.
	if err := l.Leave(ctx); err != nil {
		t.Fatalf("leave: %v", err)
	}
	var rest []*raftnode.Tier
	for _, tr := range tiers {
		if tr != l {
			rest = append(rest, tr)
		}
	}
	nl2 := leaderOf(t, rest)
	peers, err := nl2.Peers()
	if err != nil || len(peers) != 2 {
		t.Fatalf("peers after leave: %+v %v", peers, err)
	}
	for _, p := range peers {
		if p.ID == l.ID() {
			t.Fatalf("%s still in the configuration after leaving", l.ID())
		}
	}
	if _, err := nl2.Assign(ctx, "nope", "c9", ""); !errors.Is(err, interfaces.ErrNotFound) {
		t.Fatalf("write after leave: %v, want a domain answer (ErrNotFound for an unknown shard)", err)
	}
}
