package tierd

// Leadership and lease safety, on real Raft groups with fake children that
// record every message (a review's probes, each failing before its fix):
// a deposed leader must not grant leases, a session must not be registered on
// a replica that stopped leading, a child that renews while being declared
// lost must keep its lease or lose it before its shards move, and a child's
// re-registration must not undo an operator's drain.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/testutil"
	"github.com/strata-sched/strata/tiers"
)

var slowSolve atomic.Bool

func init() {
	tiers.MustRegister("test-slow", func(cfg interfaces.PolicyConfig) (interfaces.Policy, error) {
		p, err := tiers.New("local", cfg)
		if err != nil {
			return nil, err
		}
		return slowPolicy{p}, nil
	})
}

type slowPolicy struct{ interfaces.Policy }

func (s slowPolicy) Plan(ctx context.Context, v *interfaces.View) (interfaces.Plan, error) {
	if slowSolve.Load() {
		<-ctx.Done()
		return interfaces.Plan{}, ctx.Err()
	}
	return s.Policy.Plan(ctx, v)
}

func startGroup(t *testing.T, n int, mod func(*Config)) []*Daemon {
	var peers []Peer
	for i := 0; i < n; i++ {
		peers = append(peers, Peer{ID: fmt.Sprintf("n%d", i+1), Raft: testutil.FreeAddr(t), GRPC: testutil.FreeAddr(t)})
	}
	ds := make([]*Daemon, n)
	for i, p := range peers {
		cfg := Config{Tier: "global", Instance: "g", NodeID: p.ID, DataDir: t.TempDir(),
			RaftAddr: p.Raft, GRPCAddr: p.GRPC, Bootstrap: true, Peers: peers, Policy: "test-slow"}
		if mod != nil {
			mod(&cfg)
		}
		d, err := Start(cfg, testLog{t, p.ID})
		if err != nil {
			t.Fatal(err)
		}
		ds[i] = d
		t.Cleanup(func() { d.Close() })
	}
	return ds
}

type testLog struct {
	t  *testing.T
	id string
}

func (l testLog) Write(p []byte) (int, error) {
	if verbose {
		fmt.Printf("[%s] %s", l.id, p)
	}
	return len(p), nil
}

var verbose = false

func leaderOf(t *testing.T, ds []*Daemon) *Daemon {
	var l *Daemon
	testutil.Until(t, "a leader", 10*time.Second, func() bool {
		for _, d := range ds {
			if d.IsLeader() {
				d.mu.Lock()
				ok := d.leader
				d.mu.Unlock()
				if ok {
					l = d
					return true
				}
			}
		}
		return false
	})
	return l
}

type rec struct {
	at    time.Time
	kind  string
	shard string
	epoch uint64
	ttl   time.Duration
	term  uint64
	from  string
}

type fakeChild struct {
	id          string
	mu          sync.Mutex
	log         []rec
	held        map[string]uint64
	report      atomic.Bool
	cancel      context.CancelFunc
	ended       chan error
	sendMu      sync.Mutex
	st          wire.Session_ConnectClient
	tier        string
	runs        []string // reported as running (hosts)
	noRevokeAck atomic.Bool
}

func (f *fakeChild) add(r rec) {
	f.mu.Lock()
	f.log = append(f.log, r)
	f.mu.Unlock()
}

func (f *fakeChild) records(kind string) []rec {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []rec
	for _, r := range f.log {
		if r.kind == kind {
			out = append(out, r)
		}
	}
	return out
}

func (f *fakeChild) send(m *wire.ChildMessage) error {
	f.sendMu.Lock()
	defer f.sendMu.Unlock()
	return f.st.Send(m)
}

func (f *fakeChild) sendReport() error {
	r := interfaces.Report{Child: interfaces.ChildID(f.id), Capacity: interfaces.Load{CPU: 100}}
	f.mu.Lock()
	for _, s := range f.runs {
		r.Shards = append(r.Shards, interfaces.ShardLoad{Shard: interfaces.ShardID(s), Load: interfaces.Load{CPU: 1}})
	}
	f.mu.Unlock()
	return f.send(&wire.ChildMessage{Msg: &wire.ChildMessage_Report{Report: wire.ReportToWire(r)}})
}

// connect opens a session to addr, as label (to tell parents apart in the log).
func connectChild(t *testing.T, f *fakeChild, addr, label string) {
	cc := dial(t, addr)
	ctx, cancel := context.WithCancel(context.Background())
	st, err := wire.NewSessionClient(cc).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f.cancel, f.st, f.ended = cancel, st, make(chan error, 1)
	if f.held == nil {
		f.held = map[string]uint64{}
	}
	f.mu.Lock()
	held := map[interfaces.ShardID]interfaces.Epoch{}
	for s, e := range f.held {
		held[interfaces.ShardID(s)] = interfaces.Epoch(e)
	}
	f.mu.Unlock()
	tier := f.tier
	if tier == "" {
		tier = interfaces.TierRegion
	}
	h := wire.HelloToWire(interfaces.Child{ID: interfaces.ChildID(f.id), Tier: tier, Capacity: interfaces.Load{CPU: 100}}, held)
	if err := f.send(&wire.ChildMessage{Msg: &wire.ChildMessage_Hello{Hello: h}}); err != nil {
		t.Fatal(err)
	}
	f.report.Store(true)
	go func() {
		for {
			m, err := st.Recv()
			if err != nil {
				f.add(rec{at: time.Now(), kind: "end", from: label + ": " + err.Error()})
				f.ended <- err
				return
			}
			now := time.Now()
			switch x := m.GetMsg().(type) {
			case *wire.ParentMessage_LeaseGrant:
				f.add(rec{at: now, kind: "grant", ttl: time.Duration(x.LeaseGrant.GetTtlNanos()), term: x.LeaseGrant.GetTerm(), from: label})
			case *wire.ParentMessage_Assign:
				s := x.Assign.GetShard().GetId()
				f.add(rec{at: now, kind: "assign", shard: s, epoch: x.Assign.GetEpoch(), from: label})
				f.mu.Lock()
				f.held[s] = x.Assign.GetEpoch()
				f.mu.Unlock()
				_ = f.send(wire.AckToWire(wire.AckKind_ACK_KIND_ASSIGN, interfaces.ShardID(s), interfaces.Epoch(x.Assign.GetEpoch()), nil))
			case *wire.ParentMessage_Revoke:
				s := x.Revoke.GetShard()
				f.add(rec{at: now, kind: "revoke", shard: s, epoch: x.Revoke.GetEpoch(), from: label})
				if f.noRevokeAck.Load() {
					continue
				}
				f.mu.Lock()
				delete(f.held, s)
				f.mu.Unlock()
				_ = f.send(wire.AckToWire(wire.AckKind_ACK_KIND_REVOKE, interfaces.ShardID(s), interfaces.Epoch(x.Revoke.GetEpoch()), nil))
			case *wire.ParentMessage_Redirect:
				f.add(rec{at: now, kind: "redirect", from: label})
			}
		}
	}()
	go func() {
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				if f.report.Load() {
					if f.sendReport() != nil {
						return
					}
				}
			}
		}
	}()
}

func (f *fakeChild) heldShards() map[string]uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]uint64{}
	for k, v := range f.held {
		out[k] = v
	}
	return out
}

func submit(t *testing.T, d *Daemon, job string, n int) {
	a := wire.NewAdminClient(dial(t, d.GRPCAddr()))
	if _, err := a.SubmitJob(context.Background(), &wire.SubmitJobRequest{Job: &wire.JobSpec{Id: job, Parallelism: int64(n), ShardTemplate: &wire.Shard{Load: &wire.Load{Cpu: 1}}}}); err != nil {
		t.Fatal(err)
	}
}

// registeredAndGone connects child r1 to leader L until L has registered it,
// then ends its session: r1 is known, and about to reconnect.
func registeredAndGone(t *testing.T, L *Daemon) *fakeChild {
	r1 := &fakeChild{id: "r1"}
	connectChild(t, r1, L.GRPCAddr(), "L")
	testutil.Until(t, "r1 registered", 10*time.Second, func() bool { _, ok := L.Tier().FSM.Child("r1"); return ok })
	r1.cancel()
	<-r1.ended
	return r1
}

// twoChildrenWithShards connects children r1 and r2 to leader L and places a
// job of six shards on them; it returns them and what r1 holds.
func twoChildrenWithShards(t *testing.T, L *Daemon) (r1, r2 *fakeChild, r1held map[string]uint64) {
	r1, r2 = &fakeChild{id: "r1"}, &fakeChild{id: "r2"}
	connectChild(t, r1, L.GRPCAddr(), "L")
	connectChild(t, r2, L.GRPCAddr(), "L")
	testutil.Until(t, "children", 10*time.Second, func() bool { return len(L.Tier().FSM.Children()) == 2 })
	submit(t, L, "a", 6)
	testutil.Until(t, "placed", 15*time.Second, func() bool {
		return len(L.Tier().FSM.Assignments()) == 6 && len(r1.heldShards()) > 0 && len(r2.heldShards()) > 0
	})
	return r1, r2, r1.heldShards()
}

func margin(ttl time.Duration) time.Duration { return max(ttl/5, 100*time.Millisecond) }

func TestDeposedLeaderGrantsNoLease(t *testing.T) {
	ds := startGroup(t, 3, func(c *Config) { c.SolveTimeout = 5 * time.Second })
	L := leaderOf(t, ds)
	r1, r2, r1held := twoChildrenWithShards(t, L)
	t.Logf("r1 holds %v", r1held)

	slowSolve.Store(true)
	submit(t, L, "b", 2) // pokes L: its round now sits in a 3s solve
	time.Sleep(200 * time.Millisecond)
	var others []*Daemon
	var otherRaft []string
	for _, d := range ds {
		if d != L {
			others = append(others, d)
			otherRaft = append(otherRaft, d.Tier().RaftAddr())
		}
	}
	tPart := time.Now()
	L.Tier().StreamLayer().SetBlocked(otherRaft)
	for _, d := range others {
		d.Tier().StreamLayer().SetBlocked([]string{L.Tier().RaftAddr()})
	}
	time.Sleep(100 * time.Millisecond)
	slowSolve.Store(false)
	lostAt := make(chan time.Time, 1)
	go func() {
		for L.IsLeader() {
			time.Sleep(5 * time.Millisecond)
		}
		lostAt <- time.Now()
	}()
	B := leaderOf(t, others)
	B.mu.Lock()
	bSince := B.leaderSince
	B.mu.Unlock()
	// r2 is on B's side of the partition: it moves to B.
	r2.cancel()
	<-r2.ended
	connectChild(t, r2, B.GRPCAddr(), "B")

	var moved rec
	testutil.Until(t, "B re-places r1's shards on r2", 30*time.Second, func() bool {
		for _, a := range r2.records("assign") {
			if _, ok := r1held[a.shard]; ok && a.from == "B" {
				moved = a
				return true
			}
		}
		return false
	})
	lost := <-lostAt
	var last rec
	n := 0
	for _, g := range r1.records("grant") {
		if g.at.After(lost) {
			n++
		}
		if g.at.Before(moved.at) {
			last = g
		}
	}
	if last.at.IsZero() {
		t.Fatal("r1 got no grant before its shard moved: nothing to check the move against")
	}
	deadline := last.at.Add(last.ttl - margin(last.ttl))
	t.Logf("partition at 0; L lost raft leadership at %v; B leads since %v (term %d)", lost.Sub(tPart), bSince.Sub(tPart), B.Tier().Raft().CurrentTerm())
	t.Logf("r1 got %d LeaseGrants from L after L lost leadership; last at %v (term %d, ttl %v) -> r1 fences at %v", n, last.at.Sub(tPart), last.term, last.ttl, deadline.Sub(tPart))
	t.Logf("B assigned r1's shard %s@%d to r2 at %v", moved.shard, moved.epoch, moved.at.Sub(tPart))
	if moved.at.Before(deadline) {
		t.Errorf("OVERLAP: r2 told to run %s %v before r1's lease (granted by deposed L) ends", moved.shard, deadline.Sub(moved.at))
	}
}

func TestRenewalWhileDeclaredLost(t *testing.T) {
	ds := startGroup(t, 1, func(c *Config) {
		c.Interval = 100 * time.Millisecond
		c.LeaseTTL = time.Second
		c.Grace = 200 * time.Millisecond
	})
	L := leaderOf(t, ds)
	r1, r2, r1held := twoChildrenWithShards(t, L)
	var once sync.Once
	hook := func(d *Daemon, id interfaces.ChildID) {
		if id != "r1" {
			return
		}
		// r1's late Report arrives while the round is about to commit it
		// failed: a lease granted now would outlive the direct moves.
		once.Do(func() {
			_ = r1.sendReport()
			time.Sleep(300 * time.Millisecond)
		})
	}
	testHookDeclare.Store(&hook)
	defer testHookDeclare.Store(nil)
	r1.report.Store(false) // r1 goes silent (stream open)
	var moved rec
	testutil.Until(t, "r1's shards re-placed on r2", 20*time.Second, func() bool {
		for _, a := range r2.records("assign") {
			if e, ok := r1held[a.shard]; ok && a.epoch > e {
				moved = a
				return true
			}
		}
		return false
	})
	gs := r1.records("grant")
	last := gs[len(gs)-1]
	if last.at.IsZero() {
		t.Fatal("r1 got no grant before its shard moved: nothing to check the move against")
	}
	deadline := last.at.Add(last.ttl - margin(last.ttl))
	st, _ := L.Tier().FSM.Child("r1")
	t.Logf("r1 state %s; r1 last grant at T; r2 assigned %s@%d at T+%v; r1 fences at T+%v",
		st.State, moved.shard, moved.epoch, moved.at.Sub(last.at), deadline.Sub(last.at))
	if moved.at.Before(deadline) {
		t.Errorf("OVERLAP %v", deadline.Sub(moved.at))
	}
}

// A session whose Connect passed the leader check just before the loop's
// stepDown is registered on a follower and is never closed.
func TestNoSessionOnAReplicaThatStoppedLeading(t *testing.T) {
	ds := startGroup(t, 3, nil)
	L := leaderOf(t, ds)
	r1 := registeredAndGone(t, L)
	done := make(chan struct{})
	var once sync.Once
	hook := func(d *Daemon) {
		if d != L {
			return
		}
		once.Do(func() {
			// Leadership moves away while this Connect is between its leader
			// check and its registration; the loop notices and steps down first.
			if err := L.Tier().Raft().LeadershipTransfer().Error(); err != nil {
				t.Errorf("transfer: %v", err)
			}
			testutil.Until(t, "L's loop stepped down", 10*time.Second, func() bool {
				L.mu.Lock()
				defer L.mu.Unlock()
				return !L.leader
			})
			close(done)
		})
	}
	testHookConnect.Store(&hook)
	defer testHookConnect.Store(nil)
	r1.log = nil
	connectChild(t, r1, L.GRPCAddr(), "L")
	<-done
	tStep := time.Now()
	time.Sleep(6 * time.Second)
	n := 0
	for _, g := range r1.records("grant") {
		if g.at.After(tStep) {
			n++
		}
	}
	L.mu.Lock()
	_, has := L.sessions["r1"]
	L.mu.Unlock()
	t.Logf("L leader=%v; L still holds r1's session=%v; r1 got %d LeaseGrants from L in the 6s after L stepped down; r1 stream ended=%v",
		L.IsLeader(), has, n, len(r1.records("end")) > 0)
	for _, e := range r1.records("end") {
		t.Logf("end at %v: %s", e.at.Sub(tStep), e.from)
	}
	gs := r1.records("grant")
	if len(gs) > 0 {
		t.Logf("last grant at %v term %d; L term %d", gs[len(gs)-1].at.Sub(tStep), gs[len(gs)-1].term, L.Tier().Raft().CurrentTerm())
	}
	if n > 0 {
		t.Errorf("FOLLOWER GRANTS: %d grants from non-leader L", n)
	}
}

func TestReconnectKeepsADrain(t *testing.T) {
	ds := startGroup(t, 1, nil)
	L := leaderOf(t, ds)
	registeredAndGone(t, L)
	a := wire.NewAdminClient(dial(t, L.GRPCAddr()))
	var once sync.Once
	drained := make(chan error, 1)
	hook := func(d *Daemon) {
		// An operator drains r1 between the reconnect's read of r1 and its
		// commit. Under the decide lock the drain waits for the commit and then
		// applies; without it, it would land first and be overwritten.
		once.Do(func() {
			go func() {
				resp, err := a.Drain(context.Background(), &wire.DrainRequest{Child: "r1"})
				t.Logf("operator Drain during r1's reconnect: %v %v", resp.GetState(), err)
				drained <- err
			}()
			time.Sleep(300 * time.Millisecond)
		})
	}
	testHookRegister.Store(&hook)
	defer testHookRegister.Store(nil)
	// r1 reconnects with a new capacity (a child tier's capacity changes as its hosts come and go).
	cc := dial(t, L.GRPCAddr())
	st, err := wire.NewSessionClient(cc).Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	h := wire.HelloToWire(interfaces.Child{ID: "r1", Tier: interfaces.TierRegion, Capacity: interfaces.Load{CPU: 200}}, nil)
	if err := st.Send(&wire.ChildMessage{Msg: &wire.ChildMessage_Hello{Hello: h}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	if err := <-drained; err != nil {
		t.Fatalf("drain: %v", err)
	}
	c, _ := L.Tier().FSM.Child("r1")
	t.Logf("r1 after reconnect: %s", c.State)
	if c.State != interfaces.ChildDraining {
		t.Errorf("acknowledged drain lost: r1 is %s", c.State)
	}
}

// TestCapacityUpdateHoldsUpNoRenewal: a child tier's report with a new
// capacity renews its lease at once even while a decision holds the decide
// lock (a long commit); the capacity is committed once the lock is free. The
// receiver used to commit it itself, so the child's next reports, and their
// renewals, waited for the lock.
func TestCapacityUpdateHoldsUpNoRenewal(t *testing.T) {
	ds := startGroup(t, 1, nil)
	L := leaderOf(t, ds)
	r1 := &fakeChild{id: "r1"}
	connectChild(t, r1, L.GRPCAddr(), "L")
	testutil.Until(t, "r1 registered", 10*time.Second, func() bool { _, ok := L.Tier().FSM.Child("r1"); return ok })
	r1.report.Store(false) // reports sent by hand below
	L.decide.Lock()
	locked := true
	defer func() {
		if locked {
			L.decide.Unlock()
		}
	}()
	before := len(r1.records("grant"))
	for i := 0; i < 3; i++ {
		rep := interfaces.Report{Child: "r1", Capacity: interfaces.Load{CPU: float64(200 + i)}}
		if err := r1.send(&wire.ChildMessage{Msg: &wire.ChildMessage_Report{Report: wire.ReportToWire(rep)}}); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Until(t, "three renewals while decide is held", 5*time.Second, func() bool { return len(r1.records("grant")) >= before+3 })
	L.decide.Unlock()
	locked = false
	testutil.Until(t, "the last capacity committed", 10*time.Second, func() bool {
		c, _ := L.Tier().FSM.Child("r1")
		return c.Capacity.CPU == 202
	})
}
