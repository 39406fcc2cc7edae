package raftnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/strata-sched/strata/interfaces"
)

// Node is one replica of a Raft group.
type Node struct {
	cfg    Config
	raft   *raft.Raft
	fsm    *lockedFSM
	trans  raft.Transport
	stream *TCPStreamLayer // nil with an injected transport
	bolt   *raftboltdb.BoltStore
	logOut io.Writer

	adminLn   net.Listener
	adminSrv  *http.Server
	adminAddr string
	mux       *http.ServeMux
	client    *http.Client

	closeOnce sync.Once
	closeErr  error
	closing   chan struct{} // closed when Shutdown starts
}

// New starts a replica with fsm as its state machine. It does not bootstrap or join:
// call Bootstrap on the first replica of a new group and Join on the others. A
// replica restarted on an existing Dir resumes its group by itself.
func New(cfg Config, fsm raft.FSM) (*Node, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	if fsm == nil {
		return nil, fmt.Errorf("config: fsm: must not be nil: %w", interfaces.ErrInvalid)
	}
	n := &Node{cfg: cfg, fsm: newLockedFSM(fsm), mux: http.NewServeMux(),
		client: &http.Client{Timeout: 30 * time.Second}, closing: make(chan struct{})}
	out := cfg.LogOutput
	if out == nil {
		out = io.Discard
	}
	n.logOut = out
	ok := false
	defer func() {
		if !ok {
			n.closeResources()
		}
	}()

	// The admin listener comes first: its address goes into every hello.
	if cfg.AdminBind != "" {
		ln, err := net.Listen("tcp", cfg.AdminBind)
		if err != nil {
			return nil, fmt.Errorf("admin bind %q: %w", cfg.AdminBind, err)
		}
		n.adminLn = ln
		n.adminAddr = ln.Addr().String()
	}

	var (
		logs   raft.LogStore
		stable raft.StableStore
		snaps  raft.SnapshotStore
	)
	if cfg.Transport != nil {
		n.trans = cfg.Transport
		st := cfg.Stores
		if st == nil {
			st = NewInmemStores()
		}
		logs, stable, snaps = st.Logs, st.Stable, st.Snapshots
	} else {
		if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
			return nil, fmt.Errorf("config: dir %q: %w", cfg.Dir, err)
		}
		bs, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(cfg.Dir, "raft.db"), BoltOptions: boltOptions()})
		if err != nil {
			return nil, fmt.Errorf("open log store: %w", err)
		}
		n.bolt = bs
		// The cache keeps the newest entries in memory for the replicators, which
		// send them to followers without reading bbolt back; writes still go to
		// bbolt (and are fsynced) before StoreLogs returns.
		cache, err := raft.NewLogCache(logCacheSize, bs)
		if err != nil {
			return nil, fmt.Errorf("log cache: %w", err)
		}
		logs, stable = cache, bs
		fs, err := raft.NewFileSnapshotStore(cfg.Dir, cfg.Snapshots, out)
		if err != nil {
			return nil, fmt.Errorf("open snapshot store: %w", err)
		}
		snaps = fs
		sl, err := NewTCPStreamLayer(cfg.RaftBind, cfg.RaftAdvertise, Hello{ID: cfg.ID, AdminAddr: n.adminAddr}, cfg.Wrap)
		if err != nil {
			return nil, err
		}
		n.stream = sl
		n.trans = raft.NewNetworkTransport(sl, 3, 10*time.Second, out)
	}
	rc := cfg.raftConfig()
	rc.LogOutput = out
	r, err := raft.NewRaft(rc, n.fsm, logs, stable, snaps, n.trans)
	if err != nil {
		return nil, fmt.Errorf("start raft: %w", err)
	}
	n.raft = r
	n.fsm.running.Store(true)
	if n.adminLn != nil {
		n.registerAdmin()
		n.adminSrv = &http.Server{Handler: n.mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = n.adminSrv.Serve(n.adminLn) }()
	}
	ok = true
	return n, nil
}

// ID is the replica's server ID.
func (n *Node) ID() string { return n.cfg.ID }

// RaftAddr is the address peers reach this replica's transport at.
func (n *Node) RaftAddr() string { return string(n.trans.LocalAddr()) }

// AdminAddr is the admin endpoint's address ("" when there is none).
func (n *Node) AdminAddr() string { return n.adminAddr }

// Raft exposes the underlying raft instance (harnesses and benchmarks).
func (n *Node) Raft() *raft.Raft { return n.raft }

// StreamLayer is the TCP stream layer (nil with an injected transport).
func (n *Node) StreamLayer() *TCPStreamLayer { return n.stream }

// HandleFunc registers an application handler on the admin endpoint (e.g. the
// application's own read and write API). Patterns under /v1/raft/ and /v1/test/ are
// taken.
func (n *Node) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	n.mux.HandleFunc(pattern, h)
}

// Bootstrap makes this replica the only voter of a new group. It returns nil when
// the replica already has Raft state (a restart), so it is safe to call every time.
func (n *Node) Bootstrap() error {
	f := n.raft.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{
		Suffrage: raft.Voter, ID: raft.ServerID(n.cfg.ID), Address: n.trans.LocalAddr(),
	}}})
	if err := f.Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("bootstrap: %w", err)
	}
	return nil
}

// BootstrapServers starts a new group with the given voters (all replicas must be
// given the same list). Used by the in-memory harness.
func (n *Node) BootstrapServers(servers []raft.Server) error {
	if err := n.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("bootstrap: %w", err)
	}
	return nil
}

// IsLeader says whether this replica leads right now (it may be deposed a moment
// later; writes and linearizable reads check again).
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// notLeader builds the redirect answer with what this replica knows.
func (n *Node) notLeader() *NotLeaderError {
	addr, id := n.raft.LeaderWithID()
	e := &NotLeaderError{LeaderID: string(id), LeaderAddr: string(addr)}
	if addr != "" {
		e.LeaderAdmin = n.adminAddrOf(string(addr))
	}
	return e
}

// adminAddrOf returns the admin address of the replica at a raft address.
func (n *Node) adminAddrOf(raftAddr string) string {
	if raftAddr == n.RaftAddr() {
		return n.adminAddr
	}
	if n.stream != nil {
		if a, ok := n.stream.AdminAddrOf(raftAddr); ok {
			return a
		}
	}
	return ""
}

// LeaderAdmin returns the leader's admin address when known.
func (n *Node) LeaderAdmin() string {
	addr, _ := n.raft.LeaderWithID()
	if addr == "" {
		return ""
	}
	return n.adminAddrOf(string(addr))
}

func (n *Node) timeout(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		d := time.Until(dl)
		if d <= 0 {
			return time.Millisecond
		}
		return d
	}
	return n.cfg.Timeouts.Apply
}

// Apply commits cmd through the log and returns the FSM's response for it and the
// entry's index. On a follower it returns a *NotLeaderError without appending. When
// the FSM's response is an error (a domain rejection), it is returned as the error
// together with the index. ErrIndeterminate means the entry may or may not commit.
func (n *Node) Apply(ctx context.Context, cmd []byte) (any, uint64, error) {
	if len(cmd) == 0 {
		return nil, 0, fmt.Errorf("apply: command: must not be empty: %w", interfaces.ErrInvalid)
	}
	if n.cfg.Validate != nil {
		if err := n.cfg.Validate(cmd); err != nil {
			return nil, 0, fmt.Errorf("apply: command rejected before the log: %w", err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	f := n.raft.Apply(cmd, n.timeout(ctx))
	if err := n.wait(ctx, f); err != nil {
		return nil, 0, mapRaftErr(err, n.notLeader)
	}
	resp := f.Response()
	if err, ok := resp.(error); ok {
		return nil, f.Index(), err
	}
	return resp, f.Index(), nil
}

// ReadLinearizable runs fn on the FSM after making sure it reflects every write
// acknowledged before the call: a Barrier (an entry committed by a quorum in this
// leader's term, applied locally before the barrier returns) and a VerifyLeader.
// Only the leader serves it; followers return *NotLeaderError.
func (n *Node) ReadLinearizable(ctx context.Context, fn func(raft.FSM) error) error {
	if n.raft.State() != raft.Leader {
		return n.notLeader()
	}
	if err := n.wait(ctx, n.raft.Barrier(n.timeout(ctx))); err != nil {
		return mapRaftErr(err, n.notLeader)
	}
	if err := n.wait(ctx, n.raft.VerifyLeader()); err != nil {
		return mapRaftErr(err, n.notLeader)
	}
	return n.fsm.read(fn)
}

// wait waits for a raft future, but not forever: raft's futures cannot be
// cancelled, and one handed to a replica that shuts down mid-flight may never be
// answered. Giving up wraps ErrIndeterminate: the operation may still happen.
func (n *Node) wait(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	t := time.NewTimer(n.timeout(ctx) + time.Second)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("raft: %w: %w", ctx.Err(), ErrIndeterminate)
	case <-t.C:
		return fmt.Errorf("raft: no answer within %v: %w", n.timeout(ctx)+time.Second, ErrIndeterminate)
	case <-n.closing:
		return fmt.Errorf("raft: replica shutting down: %w", ErrIndeterminate)
	}
}

// ErrTooStale is returned by ReadStale when the replica has not heard from a leader
// within the bound the caller gave.
var ErrTooStale = errors.New("replica too stale")

// ReadStale runs fn on the local FSM as it is, on any replica: no round trip, but
// the state may lag the leader's. With maxLag > 0 a follower refuses (ErrTooStale)
// when its last contact with the leader is older than maxLag; a leader always
// serves.
func (n *Node) ReadStale(maxLag time.Duration, fn func(raft.FSM) error) error {
	if maxLag > 0 && n.raft.State() != raft.Leader {
		lc := n.raft.LastContact()
		if lc.IsZero() || time.Since(lc) > maxLag {
			return fmt.Errorf("stale read: last leader contact %v ago exceeds %v: %w", time.Since(lc).Round(time.Millisecond), maxLag, ErrTooStale)
		}
	}
	return n.fsm.read(fn)
}

// Peer is one server of the group's configuration.
type Peer struct {
	ID       string `json:"id"`
	Address  string `json:"address"`
	Suffrage string `json:"suffrage"`
	Leader   bool   `json:"leader"`
}

// Peers lists the servers of the latest configuration, sorted by ID.
func (n *Node) Peers() ([]Peer, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("peers: %w", err)
	}
	_, lid := n.raft.LeaderWithID()
	var out []Peer
	for _, s := range f.Configuration().Servers {
		out = append(out, Peer{ID: string(s.ID), Address: string(s.Address),
			Suffrage: s.Suffrage.String(), Leader: s.ID == lid})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// AddVoter adds (or keeps) a voter. Leader only; followers return *NotLeaderError.
//
// A server that is not a member yet must answer first (checkJoiner): at its
// admin address, when adminAddr is given, as the server id with raftAddr, and
// at raftAddr through the transport. A voter that cannot be reached would count
// towards the quorum at once, so a typo could cost the group its quorum for
// good. Joining a member again (same id, address, voter) is a no-op and checks
// nothing.
func (n *Node) AddVoter(ctx context.Context, id, raftAddr, adminAddr string) error {
	if id == "" {
		return fmt.Errorf("join: id: must not be empty: %w", interfaces.ErrInvalid)
	}
	if _, _, err := net.SplitHostPort(raftAddr); err != nil {
		return fmt.Errorf("join: raft address %q: must be host:port: %w", raftAddr, interfaces.ErrInvalid)
	}
	peers, err := n.Peers()
	if err != nil {
		return err
	}
	for _, p := range peers {
		if p.ID == id && p.Address == raftAddr && p.Suffrage == raft.Voter.String() {
			return nil // already a member: joining twice is harmless
		}
	}
	if n.raft.State() != raft.Leader {
		return n.notLeader()
	}
	if err := n.checkJoiner(ctx, id, raftAddr, adminAddr); err != nil {
		return err
	}
	err = n.wait(ctx, n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, n.timeout(ctx)))
	return mapRaftErr(err, n.notLeader)
}

// joinProbeTimeout bounds each check checkJoiner makes.
const joinProbeTimeout = 2 * time.Second

// checkJoiner checks that the replica a join names is running where the join
// says: its admin endpoint (when adminAddr is set and names a host, not
// 0.0.0.0 or ::) reports the same id and raft
// address, and its raft address accepts a transport connection (with the
// stream layer's hello, wrapper and blocked list; skipped on an in-process
// transport). A replica that reports another id or raft address is an
// ErrInvalid; one that cannot be reached is an error without a sentinel, so
// that Join, which retries those, rides out a replica still starting.
func (n *Node) checkJoiner(ctx context.Context, id, raftAddr, adminAddr string) error {
	if adminAddr != "" && !unspecifiedHost(adminAddr) {
		pctx, cancel := context.WithTimeout(ctx, joinProbeTimeout)
		c := NewClient(adminAddr)
		c.HTTP = n.client
		st, err := c.Status(pctx)
		cancel()
		if err != nil {
			return fmt.Errorf("join %s: cannot reach its admin address %s (%v); start the replica first, or fix the address", id, adminAddr, err)
		}
		if st.ID != id {
			return fmt.Errorf("join %s: the replica at admin address %s reports ID %q, not %q: %w", id, adminAddr, st.ID, id, interfaces.ErrInvalid)
		}
		if !sameTCPAddr(st.RaftAddr, raftAddr) {
			return fmt.Errorf("join %s: the replica at admin address %s has raft address %s, not %s: %w", id, adminAddr, st.RaftAddr, raftAddr, interfaces.ErrInvalid)
		}
	}
	if n.stream != nil {
		conn, err := n.stream.Dial(raft.ServerAddress(raftAddr), joinProbeTimeout)
		if err != nil {
			return fmt.Errorf("join %s: cannot reach its raft address %s (%v); start the replica first, or fix the address", id, raftAddr, err)
		}
		_ = conn.Close()
	}
	return nil
}

// unspecifiedHost says whether addr's host is 0.0.0.0 or :: (a replica whose
// admin endpoint binds every interface announces that; dialling it would reach
// the dialler itself).
func unspecifiedHost(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	ip := net.ParseIP(host)
	return err == nil && ip != nil && ip.IsUnspecified()
}

// sameTCPAddr says whether two host:port addresses are the same, by text or
// once resolved (a host name and the address it resolves to).
func sameTCPAddr(a, b string) bool {
	if a == b {
		return true
	}
	ta, err1 := net.ResolveTCPAddr("tcp", a)
	tb, err2 := net.ResolveTCPAddr("tcp", b)
	return err1 == nil && err2 == nil && ta.Port == tb.Port && ta.IP.Equal(tb.IP)
}

// RemoveServer removes a server from the group. Leader only. Removing an unknown ID
// is an ErrNotFound.
func (n *Node) RemoveServer(ctx context.Context, id string) error {
	if id == "" {
		return fmt.Errorf("remove: id: must not be empty: %w", interfaces.ErrInvalid)
	}
	if n.raft.State() != raft.Leader {
		return n.notLeader()
	}
	peers, err := n.Peers()
	if err != nil {
		return err
	}
	found := false
	for _, p := range peers {
		found = found || p.ID == id
	}
	if !found {
		return fmt.Errorf("remove: server %q: %w", id, interfaces.ErrNotFound)
	}
	err = n.wait(ctx, n.raft.RemoveServer(raft.ServerID(id), 0, n.timeout(ctx)))
	return mapRaftErr(err, n.notLeader)
}

// Join asks the group reachable at any member's admin address to add this replica
// as a voter, retrying (through leader redirects and elections) until ctx ends.
func (n *Node) Join(ctx context.Context, memberAdmin string) error {
	c := NewClient(memberAdmin)
	c.HTTP = n.client
	var last error
	for {
		last = c.Join(ctx, JoinRequest{ID: n.cfg.ID, RaftAddr: n.RaftAddr(), AdminAddr: n.adminAddr})
		if last == nil {
			return nil
		}
		if errors.Is(last, interfaces.ErrInvalid) {
			return last
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("join via %s: %w (last error: %v)", memberAdmin, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Leave removes this replica from its group (through the leader) and shuts it down.
func (n *Node) Leave(ctx context.Context) error {
	if n.IsLeader() {
		// Hand leadership over first so the group keeps a leader.
		if err := n.wait(ctx, n.raft.LeadershipTransfer()); err != nil && !errors.Is(err, raft.ErrNotLeader) {
			fmt.Fprintf(n.logOut, "raftnode %s: leadership transfer before leave failed: %v\n", n.cfg.ID, err)
		}
	}
	var err error
	for {
		admin := n.LeaderAdmin()
		if admin != "" && admin != n.adminAddr {
			c := NewClient(admin)
			c.HTTP = n.client
			err = c.Remove(ctx, n.cfg.ID)
		} else {
			err = n.RemoveServer(ctx, n.cfg.ID)
		}
		if err == nil || errors.Is(err, interfaces.ErrNotFound) {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("leave: %w (last error: %v)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return n.Shutdown()
}

// SnapshotBytes returns the FSM's snapshot encoding of its current state (the
// harnesses compare replicas with it; the FSM's encoding is deterministic).
func (n *Node) SnapshotBytes() ([]byte, error) {
	snap, err := n.fsm.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	defer snap.Release()
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		return nil, fmt.Errorf("snapshot persist: %w", err)
	}
	return sink.buf.Bytes(), nil
}

// memSink is a raft.SnapshotSink in memory.
type memSink struct {
	buf      bytes.Buffer
	canceled bool
}

func (m *memSink) Write(p []byte) (int, error) { return m.buf.Write(p) }
func (m *memSink) Close() error                { return nil }
func (m *memSink) ID() string                  { return "mem" }
func (m *memSink) Cancel() error               { m.canceled = true; return nil }

// Status is a replica's view of its group.
type Status struct {
	ID           string `json:"id"`
	State        string `json:"state"`
	RaftAddr     string `json:"raft_addr"`
	AdminAddr    string `json:"admin_addr,omitempty"`
	LeaderID     string `json:"leader_id,omitempty"`
	LeaderAddr   string `json:"leader_addr,omitempty"`
	LeaderAdmin  string `json:"leader_admin,omitempty"`
	Term         uint64 `json:"term"`
	LastIndex    uint64 `json:"last_index"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
}

// Status reports the replica's state.
func (n *Node) Status() Status {
	addr, id := n.raft.LeaderWithID()
	s := Status{ID: n.cfg.ID, State: n.raft.State().String(), RaftAddr: n.RaftAddr(), AdminAddr: n.adminAddr,
		LeaderID: string(id), LeaderAddr: string(addr),
		Term: n.raft.CurrentTerm(), LastIndex: n.raft.LastIndex(), CommitIndex: n.raft.CommitIndex(),
		AppliedIndex: n.raft.AppliedIndex()}
	if addr != "" {
		s.LeaderAdmin = n.adminAddrOf(string(addr))
	}
	return s
}

// WaitLeader waits until some replica is known as leader and returns its ID.
func (n *Node) WaitLeader(ctx context.Context) (string, error) {
	for {
		if _, id := n.raft.LeaderWithID(); id != "" {
			return string(id), nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("wait for leader: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Shutdown stops the replica: raft, the transport, the stores and the admin
// endpoint. It is safe to call more than once.
func (n *Node) Shutdown() error {
	n.closeOnce.Do(func() {
		close(n.closing)
		if n.raft != nil {
			n.closeErr = n.raft.Shutdown().Error()
		}
		n.closeResources()
	})
	return n.closeErr
}

func (n *Node) closeResources() {
	if n.adminSrv != nil {
		_ = n.adminSrv.Close()
	} else if n.adminLn != nil {
		_ = n.adminLn.Close()
	}
	if c, ok := n.trans.(io.Closer); ok && n.cfg.Transport == nil {
		_ = c.Close()
	} else if n.stream != nil {
		_ = n.stream.Close()
	}
	if n.bolt != nil {
		_ = n.bolt.Close()
	}
}
