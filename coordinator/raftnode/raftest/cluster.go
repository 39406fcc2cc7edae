package raftest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/strata-sched/strata/coordinator/raftnode"
	"github.com/strata-sched/strata/interfaces"
)

// Cluster is an in-memory Raft group.
type Cluster struct {
	tb     testing.TB
	newFSM func() raft.FSM
	tmo    raftnode.Timeouts

	mu     sync.Mutex
	nodes  []*raftnode.Node // nil while killed
	fsms   []raft.FSM
	trans  []*raft.InmemTransport
	addrs  []raft.ServerAddress
	stores []*raftnode.Stores
	// cut[i][j] is true when i must not reach j.
	cut [][]bool
}

// Option changes how a Cluster is built.
type Option func(*Cluster)

// WithTimeouts sets the replicas' timeouts (default: FastTimeouts).
func WithTimeouts(t raftnode.Timeouts) Option { return func(c *Cluster) { c.tmo = t } }

// FastTimeouts are the LAN timeouts with a shorter apply wait. Shorter heartbeats
// make elections quicker but cause spurious ones on a loaded machine (tests run
// under -race on 2 cores), which makes tests that expect a stable leader flaky.
func FastTimeouts() raftnode.Timeouts {
	t := raftnode.LANTimeouts()
	t.Apply = 2 * time.Second
	return t
}

// New starts n replicas with fresh FSMs from newFSM and bootstraps them as one
// group. The cluster shuts down when the test ends.
func New(tb testing.TB, n int, newFSM func() raft.FSM, opts ...Option) *Cluster {
	tb.Helper()
	c := &Cluster{tb: tb, newFSM: newFSM, tmo: FastTimeouts()}
	for _, o := range opts {
		o(c)
	}
	c.nodes = make([]*raftnode.Node, n)
	c.fsms = make([]raft.FSM, n)
	c.trans = make([]*raft.InmemTransport, n)
	c.addrs = make([]raft.ServerAddress, n)
	c.stores = make([]*raftnode.Stores, n)
	c.cut = make([][]bool, n)
	for i := range n {
		c.cut[i] = make([]bool, n)
		c.addrs[i] = raft.ServerAddress(fmt.Sprintf("inmem-%d", i))
		c.stores[i] = raftnode.NewInmemStores()
	}
	var servers []raft.Server
	for i := range n {
		servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(c.id(i)), Address: c.addrs[i]})
	}
	for i := range n {
		if err := c.start(i); err != nil {
			tb.Fatalf("start replica %d: %v", i, err)
		}
	}
	for i := range n {
		if err := c.nodes[i].BootstrapServers(servers); err != nil {
			tb.Fatalf("bootstrap replica %d: %v", i, err)
		}
	}
	tb.Cleanup(c.Shutdown)
	return c
}

func (c *Cluster) id(i int) string { return fmt.Sprintf("n%d", i) }

// start (re)creates replica i on its stores. Caller holds no lock.
func (c *Cluster) start(i int) error {
	_, tr := raft.NewInmemTransport(c.addrs[i])
	f := c.newFSM()
	node, err := raftnode.New(raftnode.Config{ID: c.id(i), Transport: tr, Stores: c.stores[i], Timeouts: c.tmo}, f)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.nodes[i], c.trans[i], c.fsms[i] = node, tr, f
	c.mu.Unlock()
	c.rewire()
	return nil
}

// rewire connects every pair of live replicas that is not cut.
func (c *Cluster) rewire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, ti := range c.trans {
		if c.nodes[i] == nil || ti == nil {
			continue
		}
		for j, tj := range c.trans {
			if i == j {
				continue
			}
			if c.nodes[j] == nil || tj == nil || c.cut[i][j] {
				ti.Disconnect(c.addrs[j])
				continue
			}
			ti.Connect(c.addrs[j], tj)
		}
	}
}

// Len is the number of replicas (live or killed).
func (c *Cluster) Len() int { return len(c.nodes) }

// Node returns replica i (nil while killed).
func (c *Cluster) Node(i int) *raftnode.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i]
}

// FSM returns replica i's state machine (a new one after each restart).
func (c *Cluster) FSM(i int) raft.FSM {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fsms[i]
}

// Stores returns replica i's log, stable and snapshot stores (kept across
// restarts).
func (c *Cluster) Stores(i int) *raftnode.Stores { return c.stores[i] }

// Index returns the position of the replica with the given ID, or -1.
func (c *Cluster) Index(id string) int {
	for i := range c.nodes {
		if c.id(i) == id {
			return i
		}
	}
	return -1
}

// Live returns the indexes of the replicas that run.
func (c *Cluster) Live() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for i, n := range c.nodes {
		if n != nil {
			out = append(out, i)
		}
	}
	return out
}

// Leader waits until exactly one live replica believes it leads, and returns its
// index.
func (c *Cluster) Leader(timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	for {
		var leaders []int
		for _, i := range c.Live() {
			if n := c.Node(i); n != nil && n.IsLeader() {
				leaders = append(leaders, i)
			}
		}
		if len(leaders) == 1 {
			return leaders[0], nil
		}
		if time.Now().After(deadline) {
			return -1, fmt.Errorf("no single leader after %v (leaders: %v)", timeout, leaders)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// MustLeader is Leader that fails the test.
func (c *Cluster) MustLeader() int {
	c.tb.Helper()
	i, err := c.Leader(10 * time.Second)
	if err != nil {
		c.tb.Fatal(err)
	}
	return i
}

// Partition cuts the replicas in side off from the others (both directions);
// replicas on the same side still talk. Earlier cuts stay.
func (c *Cluster) Partition(side ...int) {
	in := map[int]bool{}
	for _, i := range side {
		in[i] = true
	}
	c.mu.Lock()
	for i := range c.cut {
		for j := range c.cut {
			if i != j && in[i] != in[j] {
				c.cut[i][j] = true
			}
		}
	}
	c.mu.Unlock()
	c.rewire()
}

// Disconnect cuts replica i off from every other replica.
func (c *Cluster) Disconnect(i int) { c.Partition(i) }

// Reconnect restores replica i's links (others' cuts stay).
func (c *Cluster) Reconnect(i int) {
	c.mu.Lock()
	for j := range c.cut {
		c.cut[i][j], c.cut[j][i] = false, false
	}
	c.mu.Unlock()
	c.rewire()
}

// Heal removes every cut.
func (c *Cluster) Heal() {
	c.mu.Lock()
	for i := range c.cut {
		for j := range c.cut[i] {
			c.cut[i][j] = false
		}
	}
	c.mu.Unlock()
	c.rewire()
}

// Kill shuts replica i down, keeping its log, stable store and snapshots.
func (c *Cluster) Kill(i int) {
	c.mu.Lock()
	n := c.nodes[i]
	c.nodes[i] = nil
	c.mu.Unlock()
	if n == nil {
		return
	}
	c.rewire()
	if c.trans[i] != nil {
		c.trans[i].DisconnectAll()
	}
	_ = n.Shutdown()
}

// Restart starts a killed replica again on its stores with a fresh FSM, which
// raft fills from the snapshot and the log.
func (c *Cluster) Restart(i int) error {
	if c.Node(i) != nil {
		return fmt.Errorf("restart replica %d: it is running: %w", i, interfaces.ErrConflict)
	}
	return c.start(i)
}

// Apply commits cmd through whichever replica leads, retrying while there is no
// leader, until timeout. It returns the FSM's response.
func (c *Cluster) Apply(cmd []byte, timeout time.Duration) (any, error) {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		i, err := c.Leader(time.Until(deadline))
		if err != nil {
			last = err
			continue
		}
		n := c.Node(i)
		if n == nil {
			continue
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		resp, _, err := n.Apply(ctx, cmd)
		cancel()
		if err == nil || !errors.Is(err, interfaces.ErrNotLeader) {
			return resp, err
		}
		last = err
	}
	return nil, fmt.Errorf("apply: no leader accepted the command within %v: %v", timeout, last)
}

// WaitApplied waits until every live replica has applied at least index.
func (c *Cluster) WaitApplied(index uint64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		behind := -1
		for _, i := range c.Live() {
			if n := c.Node(i); n != nil && n.Raft().AppliedIndex() < index {
				behind = i
				break
			}
		}
		if behind < 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replica %d has not applied index %d after %v", behind, index, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// EnsureSame waits until every live replica has applied the leader's last index
// and then checks that their FSMs' snapshot encodings are byte-identical. Call it
// when no writes are in flight.
func (c *Cluster) EnsureSame(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		last = c.sameOnce(deadline)
		if last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return last
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *Cluster) sameOnce(deadline time.Time) error {
	li, err := c.Leader(time.Until(deadline))
	if err != nil {
		return err
	}
	// A barrier makes the leader apply everything it has committed.
	if err := c.Node(li).Raft().Barrier(time.Until(deadline)).Error(); err != nil {
		return fmt.Errorf("barrier on leader %d: %w", li, err)
	}
	target := c.Node(li).Raft().LastIndex()
	if err := c.WaitApplied(target, time.Until(deadline)); err != nil {
		return err
	}
	var ref []byte
	refIdx := -1
	for _, i := range c.Live() {
		b, err := c.Node(i).SnapshotBytes()
		if err != nil {
			return fmt.Errorf("replica %d: %w", i, err)
		}
		if refIdx < 0 {
			ref, refIdx = b, i
			continue
		}
		if !bytes.Equal(ref, b) {
			return fmt.Errorf("replica %d's state (%d bytes) differs from replica %d's (%d bytes)", i, len(b), refIdx, len(ref))
		}
	}
	return nil
}

// MustEnsureSame is EnsureSame that fails the test.
func (c *Cluster) MustEnsureSame() {
	c.tb.Helper()
	if err := c.EnsureSame(15 * time.Second); err != nil {
		c.tb.Fatal(err)
	}
}

// Shutdown stops every replica.
func (c *Cluster) Shutdown() {
	for i := range c.nodes {
		c.Kill(i)
	}
}
