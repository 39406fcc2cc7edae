package session

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/strata-sched/strata/interfaces/wire"
)

// scriptedParent is a Session server whose behaviour after the Hello is a
// function of the test: it records the order in which replicas were dialled.
type scriptedParent struct {
	wire.UnimplementedSessionServer
	name string
	log  *dialLog
	run  func(s wire.Session_ConnectServer) error
}

type dialLog struct {
	mu    sync.Mutex
	hello []string
	c     chan string
}

func newDialLog() *dialLog { return &dialLog{c: make(chan string, 64)} }

func (l *dialLog) add(name string) {
	l.mu.Lock()
	l.hello = append(l.hello, name)
	l.mu.Unlock()
	l.c <- name
}

func (p *scriptedParent) Connect(s wire.Session_ConnectServer) error {
	m, err := s.Recv()
	if err != nil || m.GetHello() == nil {
		return err
	}
	p.log.add(p.name)
	return p.run(s)
}

func serveScripted(t *testing.T, p *scriptedParent) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	wire.RegisterSessionServer(srv, p)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

func grantMsg(seq uint64) *wire.ParentMessage {
	return &wire.ParentMessage{Msg: &wire.ParentMessage_LeaseGrant{LeaseGrant: &wire.LeaseGrant{TtlNanos: int64(4 * time.Second), ReportSeq: seq}}}
}

// silentAfterGrant grants the Hello's lease and then says nothing, for ever,
// while it keeps reading (a paused leader whose kernel still takes the bytes,
// or one cut off on the way back): the stream never breaks by itself.
func silentAfterGrant(s wire.Session_ConnectServer) error {
	if err := s.Send(grantMsg(0)); err != nil {
		return err
	}
	for {
		if _, err := s.Recv(); err != nil {
			return err
		}
	}
}

// neverAnswers reads the Hello and never answers it.
func neverAnswers(s wire.Session_ConnectServer) error {
	<-s.Context().Done()
	return s.Context().Err()
}

// grantsEveryReport is a healthy leader: a grant for the Hello and one for
// every report, echoing its sequence.
func grantsEveryReport(s wire.Session_ConnectServer) error {
	if err := s.Send(grantMsg(0)); err != nil {
		return err
	}
	for {
		m, err := s.Recv()
		if err != nil {
			return err
		}
		if r := m.GetReport(); r != nil {
			if err := s.Send(grantMsg(r.GetEpoch())); err != nil {
				return err
			}
		}
	}
}

func startClient(t *testing.T, cfg Config, h Handler) {
	t.Helper()
	if cfg.Hello == nil {
		cfg.Hello = func() *wire.Hello { return &wire.Hello{ChildId: "h1", ProtocolVersion: 1} }
	}
	c, err := NewClient(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// nextDial waits for the next replica to get a Hello. The limit only stops a
// broken client from hanging the suite; nothing is timed.
func nextDial(t *testing.T, l *dialLog, want string) {
	t.Helper()
	nextDialWithin(t, l, want, 30*time.Second)
}

func nextDialWithin(t *testing.T, l *dialLog, want string, limit time.Duration) {
	t.Helper()
	select {
	case got := <-l.c:
		if got != want {
			l.mu.Lock()
			defer l.mu.Unlock()
			t.Fatalf("Hello went to %s, want %s (dials so far %v)", got, want, l.hello)
		}
	case <-time.After(limit):
		l.mu.Lock()
		defer l.mu.Unlock()
		t.Fatalf("no Hello to %s (dials so far %v): the client is stuck on a silent parent", want, l.hello)
	}
}

// TestSilentParentIsLeftForAnotherReplica: a replica that grants the lease and
// then falls silent without breaking the stream is given up by the watchdog,
// and the next session goes to the other replica, not to the silent one again.
// Before the watchdog the client waited in Recv for ever (issue 20, observed 3).
func TestSilentParentIsLeftForAnotherReplica(t *testing.T) {
	l := newDialLog()
	silent := serveScripted(t, &scriptedParent{name: "silent", log: l, run: silentAfterGrant})
	healthy := serveScripted(t, &scriptedParent{name: "healthy", log: l, run: grantsEveryReport})
	startClient(t, Config{
		Parents:        []string{silent, healthy},
		Report:         func() *wire.Report { return &wire.Report{Child: "h1"} },
		SilenceTimeout: 50 * time.Millisecond,
		BackoffMin:     time.Millisecond, BackoffMax: 2 * time.Millisecond,
	}, &recorder{})
	nextDial(t, l, "silent")
	nextDial(t, l, "healthy")
}

// TestUnansweredHelloIsLeftForAnotherReplica: a replica that takes the
// Hello but never answers it costs one answer timeout, then the other replica
// is tried.
func TestUnansweredHelloIsLeftForAnotherReplica(t *testing.T) {
	l := newDialLog()
	mute := serveScripted(t, &scriptedParent{name: "mute", log: l, run: neverAnswers})
	healthy := serveScripted(t, &scriptedParent{name: "healthy", log: l, run: grantsEveryReport})
	startClient(t, Config{
		Parents:       []string{mute, healthy},
		AnswerTimeout: 50 * time.Millisecond,
		BackoffMin:    time.Millisecond, BackoffMax: 2 * time.Millisecond,
	}, &recorder{})
	nextDial(t, l, "mute")
	nextDial(t, l, "healthy")
}

// TestFrozenReplicaIsLeftForAnotherReplica: a replica whose process is frozen
// (SIGSTOP, docker pause) still completes TCP handshakes in its kernel but
// never speaks HTTP/2: the connect timeout gives it up and the other replica
// is tried. Before, the child waited for gRPC's own 20s connect timeout, and
// then for ever in Recv.
func TestFrozenReplicaIsLeftForAnotherReplica(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			accepted <- c // held open, never read or written
		}
	}()
	t.Cleanup(func() {
		lis.Close()
		for {
			select {
			case c := <-accepted:
				c.Close()
			default:
				return
			}
		}
	})
	l := newDialLog()
	healthy := serveScripted(t, &scriptedParent{name: "healthy", log: l, run: grantsEveryReport})
	startClient(t, Config{
		Parents:        []string{lis.Addr().String(), healthy},
		ConnectTimeout: 50 * time.Millisecond,
		AnswerTimeout:  time.Hour,
		BackoffMin:     time.Millisecond, BackoffMax: 2 * time.Millisecond,
	}, &recorder{})
	// Not a timing assertion: the guard only has to stay under gRPC's own
	// 20s connect timeout, which is what let the client move on before.
	nextDialWithin(t, l, "healthy", 10*time.Second)
}

// TestRedirectToTheSilentReplicaIsNotFollowed: after the leader went silent, a
// follower that still names it (it has not noticed yet) is not followed back
// to it; the client tries the remaining replica instead.
func TestRedirectToTheSilentReplicaIsNotFollowed(t *testing.T) {
	l := newDialLog()
	silent := serveScripted(t, &scriptedParent{name: "silent", log: l, run: silentAfterGrant})
	stale := serveScripted(t, &scriptedParent{name: "stale", log: l, run: func(s wire.Session_ConnectServer) error {
		return s.Send(&wire.ParentMessage{Msg: &wire.ParentMessage_Redirect{Redirect: &wire.Redirect{LeaderAddress: silent}}})
	}})
	healthy := serveScripted(t, &scriptedParent{name: "healthy", log: l, run: grantsEveryReport})
	startClient(t, Config{
		Parents:        []string{silent, stale, healthy},
		SilenceTimeout: 50 * time.Millisecond,
		ConnectTimeout: time.Hour, // following the redirect would hang here
		BackoffMin:     time.Millisecond, BackoffMax: 2 * time.Millisecond,
	}, &recorder{})
	nextDial(t, l, "silent")
	nextDial(t, l, "stale")
	nextDial(t, l, "healthy")
}

// leaseLog records the start times OnLease is given, and stops at the first
// Assign (a marker the parent sends after the grants under test).
type leaseLog struct {
	recorder
	froms  []time.Time
	marker chan struct{}
}

func (r *leaseLog) OnLease(_ *wire.LeaseGrant, from time.Time) {
	r.mu.Lock()
	r.froms = append(r.froms, from)
	r.mu.Unlock()
}

func (r *leaseLog) OnAssign(*wire.Assign) *wire.Ack { close(r.marker); return nil }

// TestLeaseRunsFromTheSendOfTheReportItAnswers: the parent answers report 1
// late (the test holds the grant until the client's clock has moved on by a
// minute); the lease the handler is given starts at report 1's send time, not
// at the grant's receipt, so it cannot run past send + ttl. A grant echoing a
// report the client never sent renews nothing. Before, OnLease got the
// receipt time, and every grant renewed.
func TestLeaseRunsFromTheSendOfTheReportItAnswers(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var clockMu sync.Mutex
	clock := t0
	now := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return clock }
	set := func(t time.Time) { clockMu.Lock(); clock = t; clockMu.Unlock() }

	gotReport := make(chan uint64, 1)
	release := make(chan struct{})
	l := newDialLog()
	addr := serveScripted(t, &scriptedParent{name: "p", log: l, run: func(s wire.Session_ConnectServer) error {
		if err := s.Send(grantMsg(0)); err != nil {
			return err
		}
		m, err := s.Recv()
		if err != nil {
			return err
		}
		gotReport <- m.GetReport().GetEpoch()
		<-release
		for _, seq := range []uint64{99, m.GetReport().GetEpoch()} {
			if err := s.Send(grantMsg(seq)); err != nil {
				return err
			}
		}
		if err := s.Send(&wire.ParentMessage{Msg: &wire.ParentMessage_Assign{Assign: &wire.Assign{Shard: &wire.Shard{Id: "s", Job: "j"}, Epoch: 1}}}); err != nil {
			return err
		}
		<-s.Context().Done()
		return nil
	}})
	rec := &leaseLog{marker: make(chan struct{})}
	set(t0.Add(time.Second)) // the Hello and the first report go at t0+1s
	startClient(t, Config{
		Parents:        []string{addr},
		Report:         func() *wire.Report { return &wire.Report{Child: "h1"} },
		ReportInterval: time.Hour, // one report
		SilenceTimeout: time.Hour,
		Now:            now,
	}, rec)
	var seq uint64
	select {
	case seq = <-gotReport:
	case <-time.After(30 * time.Second):
		t.Fatal("no report reached the parent")
	}
	if seq != 1 {
		t.Fatalf("first report numbered %d, want 1", seq)
	}
	set(t0.Add(time.Minute)) // the grant for it arrives a minute later
	close(release)
	select {
	case <-rec.marker:
	case <-time.After(30 * time.Second):
		t.Fatal("the parent's marker never arrived")
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	want := []time.Time{t0.Add(time.Second), t0.Add(time.Second)} // the Hello's grant, report 1's; none for report 99
	if len(rec.froms) != len(want) {
		t.Fatalf("OnLease got %v, want %v (a grant for an unknown report must renew nothing)", rec.froms, want)
	}
	for i := range want {
		if !rec.froms[i].Equal(want[i]) {
			t.Errorf("lease %d runs from %v, want the send time %v (not the receipt)", i, rec.froms[i], want[i])
		}
	}
}

// TestRestateEveryFollowsEveryNthReportWithAHello: with RestateEvery 3 the
// sender follows reports 3 and 6 with a Hello on the same session, built anew
// (the child restates what it holds); reports 1, 2, 4, 5 go alone. Without
// RestateEvery a second Hello never goes.
func TestRestateEveryFollowsEveryNthReportWithAHello(t *testing.T) {
	for _, tc := range []struct {
		every int
		want  []string
	}{
		{3, []string{"r1", "r2", "r3", "hello", "r4", "r5", "r6", "hello"}},
		{0, []string{"r1", "r2", "r3", "r4", "r5", "r6"}},
	} {
		seen := make(chan []string, 1)
		l := newDialLog()
		addr := serveScripted(t, &scriptedParent{name: "p", log: l, run: func(s wire.Session_ConnectServer) error {
			if err := s.Send(grantMsg(0)); err != nil {
				return err
			}
			var got []string
			for {
				m, err := s.Recv()
				if err != nil {
					return err
				}
				switch {
				case m.GetReport() != nil:
					got = append(got, fmt.Sprintf("r%d", m.GetReport().GetEpoch()))
					if err := s.Send(grantMsg(m.GetReport().GetEpoch())); err != nil {
						return err
					}
				case m.GetHello() != nil:
					got = append(got, "hello")
				}
				if m.GetReport().GetEpoch() == 6 {
					if tc.every > 0 {
						if m, err = s.Recv(); err != nil {
							return err
						} else if m.GetHello() != nil {
							got = append(got, "hello")
						}
					}
					seen <- got
					<-s.Context().Done()
					return nil
				}
			}
		}})
		var hellos, reports atomic.Int32
		startClient(t, Config{
			Parents: []string{addr},
			Hello:   func() *wire.Hello { hellos.Add(1); return &wire.Hello{ChildId: "r1", ProtocolVersion: 1} },
			Report: func() *wire.Report {
				if reports.Add(1) > 6 {
					return nil // six reports, then none: no Hello is built after them
				}
				return &wire.Report{Child: "r1"}
			},
			ReportInterval: time.Millisecond,
			SilenceTimeout: time.Hour,
			RestateEvery:   tc.every,
		}, &leaseLog{marker: make(chan struct{})})
		select {
		case got := <-seen:
			if !slices.Equal(got, tc.want) {
				t.Errorf("RestateEvery %d: the parent got %v, want %v", tc.every, got, tc.want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("RestateEvery %d: the parent never got six reports (and, with restatements, the Hello after the sixth)", tc.every)
		}
		if want := int32(1 + len(tc.want) - 6); hellos.Load() != want {
			t.Errorf("RestateEvery %d: Hello built %d times, want %d (anew for each restatement)", tc.every, hellos.Load(), want)
		}
	}
}
