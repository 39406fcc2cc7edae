package session

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/strata-sched/strata/interfaces/wire"
)

// fakeParent is a Session server: a follower that redirects, or a leader that
// grants a lease, assigns one shard, and ends the stream after the ack.
type fakeParent struct {
	wire.UnimplementedSessionServer
	redirectTo string
	mu         sync.Mutex
	hellos     int
	acks       []*wire.Ack
	reports    int
}

func (f *fakeParent) Connect(s wire.Session_ConnectServer) error {
	m, err := s.Recv()
	if err != nil {
		return err
	}
	f.mu.Lock()
	if m.GetHello() != nil {
		f.hellos++
	}
	f.mu.Unlock()
	if f.redirectTo != "" {
		return s.Send(&wire.ParentMessage{Msg: &wire.ParentMessage_Redirect{Redirect: &wire.Redirect{LeaderAddress: f.redirectTo}}})
	}
	if err := s.Send(&wire.ParentMessage{Msg: &wire.ParentMessage_LeaseGrant{LeaseGrant: &wire.LeaseGrant{TtlNanos: int64(time.Second), ReportIntervalNanos: int64(20 * time.Millisecond)}}}); err != nil {
		return err
	}
	if err := s.Send(&wire.ParentMessage{Msg: &wire.ParentMessage_Assign{Assign: &wire.Assign{Shard: &wire.Shard{Id: "s1", Job: "j"}, Epoch: 7}}}); err != nil {
		return err
	}
	for {
		m, err := s.Recv()
		if err != nil {
			return err
		}
		f.mu.Lock()
		if a := m.GetAck(); a != nil {
			f.acks = append(f.acks, a)
			f.mu.Unlock()
			return nil // end the session: the child must come back
		}
		if m.GetReport() != nil {
			f.reports++
		}
		f.mu.Unlock()
	}
}

func serve(t *testing.T, f *fakeParent) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	wire.RegisterSessionServer(srv, f)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

type recorder struct {
	mu          sync.Mutex
	leases      int
	assigns     []uint64
	disconnects int
}

func (r *recorder) OnLease(*wire.LeaseGrant, time.Time) { r.mu.Lock(); r.leases++; r.mu.Unlock() }
func (r *recorder) OnAssign(a *wire.Assign) *wire.Ack {
	r.mu.Lock()
	r.assigns = append(r.assigns, a.GetEpoch())
	r.mu.Unlock()
	return &wire.Ack{Shard: a.GetShard().GetId(), Epoch: a.GetEpoch(), Kind: wire.AckKind_ACK_KIND_ASSIGN, Ok: true}
}
func (r *recorder) OnRevoke(*wire.Revoke) *wire.Ack { return nil }
func (r *recorder) OnConstraints(*wire.Constraints) {}
func (r *recorder) OnDisconnect(error)              { r.mu.Lock(); r.disconnects++; r.mu.Unlock() }

func TestClientFollowsRedirectAcksAndReconnects(t *testing.T) {
	leader := &fakeParent{}
	leaderAddr := serve(t, leader)
	follower := &fakeParent{redirectTo: leaderAddr}
	followerAddr := serve(t, follower)

	rec := &recorder{}
	c, err := NewClient(Config{
		Parents:    []string{followerAddr},
		Hello:      func() *wire.Hello { return &wire.Hello{ChildId: "h1", ProtocolVersion: 1} },
		Report:     func() *wire.Report { return &wire.Report{Child: "h1"} },
		BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
	}, rec)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()

	deadline := time.Now().Add(10 * time.Second)
	for {
		leader.mu.Lock()
		acks := len(leader.acks)
		leader.mu.Unlock()
		if acks >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("leader saw %d acks, want ≥ 2 (two sessions)", acks)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("Run returned %v, want context.Canceled", err)
	}
	leader.mu.Lock()
	defer leader.mu.Unlock()
	for _, a := range leader.acks[:2] {
		if a.GetShard() != "s1" || a.GetEpoch() != 7 || !a.GetOk() {
			t.Errorf("ack %v, want s1@7 ok", a)
		}
	}
	follower.mu.Lock()
	if follower.hellos == 0 {
		t.Error("the follower was never asked")
	}
	follower.mu.Unlock()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.leases < 2 || rec.disconnects < 1 {
		t.Errorf("leases %d, disconnects %d: want a lease per session and a disconnect between them", rec.leases, rec.disconnects)
	}
}

func TestNewClientNeedsParentsAndHello(t *testing.T) {
	if _, err := NewClient(Config{Hello: func() *wire.Hello { return nil }}, &recorder{}); err == nil {
		t.Error("no parents accepted")
	}
	if _, err := NewClient(Config{Parents: []string{"x"}}, &recorder{}); err == nil {
		t.Error("no Hello accepted")
	}
}

// TestRedirectLoopBacksOff: two replicas that point at each other (an
// election in progress) get three Hellos in all, then the client waits its
// backoff (an hour here) instead of redialling as fast as it can (about 2,000
// times a second before).
func TestRedirectLoopBacksOff(t *testing.T) {
	a, b := &fakeParent{}, &fakeParent{}
	aa, ba := serve(t, a), serve(t, b)
	a.mu.Lock()
	a.redirectTo = ba
	a.mu.Unlock()
	b.mu.Lock()
	b.redirectTo = aa
	b.mu.Unlock()
	c, err := NewClient(Config{Parents: []string{aa}, Hello: func() *wire.Hello { return &wire.Hello{ChildId: "h1", ProtocolVersion: 1} },
		BackoffMin: time.Hour, BackoffMax: time.Hour}, &recorder{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = c.Run(ctx)
	a.mu.Lock()
	b.mu.Lock()
	defer a.mu.Unlock()
	defer b.mu.Unlock()
	if a.hellos+b.hellos != maxRedirects {
		t.Errorf("%d + %d Hellos in a second of a redirect loop, want %d then the backoff", a.hellos, b.hellos, maxRedirects)
	}
}
