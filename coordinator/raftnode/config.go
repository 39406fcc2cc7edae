package raftnode

import (
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/raft"
	"github.com/strata-sched/strata/interfaces"
	"go.etcd.io/bbolt"
)

// Timeouts are the Raft timing knobs. LANTimeouts gives the values for replicas on
// one LAN (round trips well under 1 ms); docs/operations.md explains each.
type Timeouts struct {
	// Heartbeat: a follower that hears nothing from the leader for this long (plus
	// a random part of it) starts an election. The leader sends heartbeats every
	// Heartbeat/10.
	Heartbeat time.Duration
	// Election: how long a candidate waits for votes before trying again.
	Election time.Duration
	// LeaderLease: a leader that cannot reach a quorum for this long steps down.
	LeaderLease time.Duration
	// Commit: the longest a follower waits to learn a new commit index when no new
	// entries arrive.
	Commit time.Duration
	// Apply: the default wait for a write or a barrier when the caller's context
	// has no deadline.
	Apply time.Duration
	// MaxAppendEntries bounds the entries sent (and fsynced) in one AppendEntries.
	MaxAppendEntries int
	// SnapshotThreshold: entries since the last snapshot that trigger a new one;
	// SnapshotInterval: how often that is checked. TrailingLogs: entries kept after
	// a snapshot so slow followers can catch up without one.
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64
}

// LANTimeouts are the defaults for a LAN. A leader failure is noticed after 400 to
// 800 ms; an election on a LAN then takes a few milliseconds.
func LANTimeouts() Timeouts {
	return Timeouts{
		Heartbeat:         400 * time.Millisecond,
		Election:          400 * time.Millisecond,
		LeaderLease:       200 * time.Millisecond,
		Commit:            5 * time.Millisecond,
		Apply:             5 * time.Second,
		MaxAppendEntries:  512,
		SnapshotThreshold: 16384,
		SnapshotInterval:  30 * time.Second,
		TrailingLogs:      10240,
	}
}

// Config configures one replica.
type Config struct {
	// ID is the replica's Raft server ID, stable across restarts.
	ID string
	// Dir holds raft.db (log and stable store) and the snapshots. Required unless
	// Transport is set (the in-memory harness), in which case the stores are
	// in-memory too.
	Dir string
	// RaftBind is the TCP address the Raft transport listens on; RaftAdvertise the
	// address peers dial (RaftBind's resolved address when empty).
	RaftBind      string
	RaftAdvertise string
	// AdminBind is where the JSON-over-HTTP admin endpoint listens; empty for none.
	AdminBind string
	// Timeouts; zero fields take LANTimeouts' values.
	Timeouts Timeouts
	// TestMode enables /v1/test/* on the admin endpoint (blocked peers).
	TestMode bool
	// RawWrites enables the admin endpoint's raw write routes: POST
	// /v1/raft/join, /v1/raft/remove, /v1/raft/apply and /v1/tier/children,
	// shards, assign and move (and with them Node.Join and Node.Leave through
	// another replica). Only the test node (raftnode/testnode) and the tests
	// set it. A production replica (coordinator/tierd) never does: its writes
	// are its own code's, its membership goes through the authenticated gRPC
	// Admin service (RaftJoin, RaftRemove), and those routes answer 403.
	RawWrites bool
	// Wrap wraps every Raft connection (e.g. in TLS); nil for plain TCP.
	Wrap ConnWrapper
	// LogOutput receives raft's log (level LogLevel, default "warn"); nil discards.
	LogOutput io.Writer
	LogLevel  string
	// Transport, when set, replaces the TCP transport (the in-memory harness).
	Transport raft.Transport
	// Stores, with Transport, supplies the log, stable and snapshot stores (the
	// in-memory harness keeps them to restart a replica with its state); nil gives
	// fresh in-memory stores.
	Stores *Stores
	// Snapshots keeps this many snapshots on disk (default 2).
	Snapshots int
	// Validate checks a command before it is appended to the log. A committed
	// entry the FSM cannot decode stops every replica (and again on every restart,
	// since the entry stays in the log), so commands from outside — the admin
	// endpoint's /v1/raft/apply — must never reach the log unchecked. StartTier
	// sets it to fsm.Decode. Errors should wrap interfaces.ErrInvalid.
	Validate func(cmd []byte) error
	// EncodeResult turns an FSM response into JSON for /v1/raft/apply; nil uses
	// encoding/json.
	EncodeResult func(any) ([]byte, error)
}

// Stores are a replica's persistent parts, for harnesses that restart replicas.
type Stores struct {
	Logs      raft.LogStore
	Stable    raft.StableStore
	Snapshots raft.SnapshotStore
}

// NewInmemStores returns empty in-memory stores.
func NewInmemStores() *Stores {
	s := raft.NewInmemStore()
	return &Stores{Logs: s, Stable: s, Snapshots: raft.NewInmemSnapshotStore()}
}

func (c *Config) fill() error {
	if c.ID == "" {
		return fmt.Errorf("config: id: must not be empty: %w", interfaces.ErrInvalid)
	}
	if c.Transport == nil {
		if c.Dir == "" {
			return fmt.Errorf("config: dir: must not be empty: %w", interfaces.ErrInvalid)
		}
		if c.RaftBind == "" {
			return fmt.Errorf("config: raft bind: must not be empty: %w", interfaces.ErrInvalid)
		}
	}
	d := LANTimeouts()
	t := &c.Timeouts
	if t.Heartbeat == 0 {
		t.Heartbeat = d.Heartbeat
	}
	if t.Election == 0 {
		t.Election = d.Election
	}
	if t.LeaderLease == 0 {
		t.LeaderLease = d.LeaderLease
	}
	if t.Commit == 0 {
		t.Commit = d.Commit
	}
	if t.Apply == 0 {
		t.Apply = d.Apply
	}
	if t.MaxAppendEntries == 0 {
		t.MaxAppendEntries = d.MaxAppendEntries
	}
	if t.SnapshotThreshold == 0 {
		t.SnapshotThreshold = d.SnapshotThreshold
	}
	if t.SnapshotInterval == 0 {
		t.SnapshotInterval = d.SnapshotInterval
	}
	if t.TrailingLogs == 0 {
		t.TrailingLogs = d.TrailingLogs
	}
	if t.LeaderLease > t.Heartbeat {
		return fmt.Errorf("config: timeouts: leader lease %v must not exceed heartbeat %v: %w", t.LeaderLease, t.Heartbeat, interfaces.ErrInvalid)
	}
	if c.Snapshots == 0 {
		c.Snapshots = 2
	}
	if c.LogLevel == "" {
		c.LogLevel = "warn"
	}
	return nil
}

func (c *Config) raftConfig() *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.ID)
	rc.HeartbeatTimeout = c.Timeouts.Heartbeat
	rc.ElectionTimeout = c.Timeouts.Election
	rc.LeaderLeaseTimeout = c.Timeouts.LeaderLease
	rc.CommitTimeout = c.Timeouts.Commit
	rc.MaxAppendEntries = c.Timeouts.MaxAppendEntries
	rc.SnapshotThreshold = c.Timeouts.SnapshotThreshold
	rc.SnapshotInterval = c.Timeouts.SnapshotInterval
	rc.TrailingLogs = c.Timeouts.TrailingLogs
	// BatchApplyCh stays off: with it, futures buffered in the apply channel of a
	// replica that shuts down are never answered. The leader loop still gathers
	// all waiting commands into one AppendEntries (group commit).
	rc.BatchApplyCh = false
	rc.LogLevel = c.LogLevel
	return rc
}

// logCacheSize is how many of the newest log entries a replica keeps in memory
// (raft.LogCache) for replication.
const logCacheSize = 1024

// boltOptions are bbolt's defaults except for the freelist: it is not written on
// every commit (NoFreelistSync) but rebuilt by scanning when the file is opened,
// and kept as a hash map, which stays cheap when a long-running log has freed
// many pages after snapshots. Every commit is still fsynced: durability is
// unchanged.
func boltOptions() *bbolt.Options {
	o := *bbolt.DefaultOptions
	o.NoFreelistSync = true
	o.FreelistType = bbolt.FreelistMapType
	return &o
}
