package raftnode_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/coordinator/raftnode"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/internal/testutil"
	"github.com/strata-sched/strata/internal/tlsutil"
	"github.com/strata-sched/strata/internal/tlsutil/tlstest"
)

// TestRaftPeersMustBeOfTheGroup: with tlsutil's wrapper a Raft peer must
// present a certificate of the same tier instance. Two replicas of region
// eu-1 replicate; a replica holding a valid certificate of region us-1 can
// neither be joined (the leader's probe refuses its certificate, and the
// membership is unchanged) nor open a connection to the leader (refused and
// logged).
func TestRaftPeersMustBeOfTheGroup(t *testing.T) {
	pki := tlstest.New(t)
	logs := &testutil.Buffer{}
	logf := func(format string, args ...any) { fmt.Fprintf(logs, format+"\n", args...) }
	var strangerStore *tlsutil.Store
	start := func(instance, id string) *raftnode.Tier {
		st := tlstest.Store(t, pki.Issue(t, tlsutil.Replica(interfaces.TierRegion, instance, id)))
		if instance == "us-1" {
			strangerStore = st
		}
		tr, err := raftnode.StartTier(raftnode.Config{ID: id, Dir: t.TempDir(), RaftBind: "127.0.0.1:0", AdminBind: "127.0.0.1:0",
			Wrap: st.RaftWrapper(tlsutil.IsReplicaOf(interfaces.TierRegion, instance), logf)}, fsm.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tr.Shutdown() })
		return tr
	}
	a, b := start("eu-1", "n0"), start("eu-1", "n1")
	stranger := start("us-1", "n2")
	if err := a.Bootstrap(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := a.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.AddVoter(ctx, b.ID(), b.RaftAddr(), b.AdminAddr()); err != nil {
		t.Fatalf("a replica of the group was refused: %v", err)
	}
	mustOK(t, a, &fsm.PutChild{Child: interfaces.Child{ID: "c0", Tier: "host", Capacity: interfaces.Load{CPU: 1}}})
	testutil.Eventually(t, "c0 replicated to n1", 10*time.Second, func() error {
		if _, ok := b.FSM.Child("c0"); !ok {
			return fmt.Errorf("n1 lacks c0")
		}
		return nil
	})

	err := a.AddVoter(ctx, stranger.ID(), stranger.RaftAddr(), stranger.AdminAddr())
	if err == nil || !strings.Contains(err.Error(), "peer certificate names region us-1 replica n2 (strata://region/us-1/n2), want a replica of region eu-1") {
		t.Fatalf("joining a replica of another group: %v", err)
	}
	peers, err := a.Peers()
	if err != nil {
		t.Fatal(err)
	}
	if len(peers) != 2 {
		t.Fatalf("membership changed: %v", peers)
	}

	// The stranger's own transport refuses the leader (not its group);
	// one that accepts any server is refused by the leader.
	if c, err := stranger.StreamLayer().Dial(raft.ServerAddress(a.RaftAddr()), 5*time.Second); err == nil {
		_ = c.Close()
		t.Fatal("a replica of another group connected to the leader")
	}
	raw, err := net.Dial("tcp", a.RaftAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if c, err := strangerStore.RaftWrapper(nil, nil)(raw, true); err == nil {
		// TLS 1.3: the client's handshake ends before the server has
		// checked its certificate; the server's verdict comes on read.
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("the leader talked to a replica of another group")
		}
	}
	testutil.Until(t, "the leader logs the refused connection", 10*time.Second, func() bool {
		return strings.Contains(logs.String(), "raft: refused a connection from") &&
			strings.Contains(logs.String(), "want a replica of region eu-1")
	})
	if _, ok := stranger.FSM.Child("c0"); ok {
		t.Fatal("the stranger received the group's state")
	}
}
