// Package raftnode runs one replica of a tier's Raft group: the hashicorp/raft
// instance with its raft-boltdb/v2 log and stable store, a file snapshot store and a
// TCP transport, plus the small JSON-over-HTTP admin endpoint people, tools and the
// other replicas use.
//
// What it provides:
//
//   - Cluster life: Bootstrap a new group, Join an existing one through any member's
//     admin address, Leave, Remove a server, list Peers.
//   - Writes: Node.Apply commits a command on the leader; on a follower it returns a
//     *NotLeaderError (errors.Is(err, interfaces.ErrNotLeader)) that names the
//     leader's raft and admin addresses. The admin endpoint's /v1/raft/apply forwards
//     one hop to the leader, so a Client can send a write to any replica.
//   - Reads: ReadLinearizable (Barrier, then VerifyLeader, then read the FSM under its
//     read lock) and the cheaper ReadStale (read the local FSM as it is; optionally
//     refuse when the last contact with a leader is older than a bound). See
//     docs/operations.md, section "Raft".
//   - Transport: NewTCPStreamLayer is a raft.StreamLayer over TCP whose connections
//     can be wrapped (e.g. in TLS) by a ConnWrapper; every connection starts with a
//     small hello that names the dialling replica, which is how followers learn the
//     leader's admin address and how the test-mode "blocked peers" list cuts links
//     in both directions.
//
// The in-memory cluster harness lives in raftest (raft's in-memory transport, no
// processes); the multi-process harness on 127.0.0.1 in proctest, which builds
// and runs the test node binary in testnode.
//
// The FSM is any raft.FSM; Node wraps it in a read/write lock so that reads on the
// admin and application paths never race with Apply, Snapshot or Restore. Commands
// from outside are checked with Config.Validate before they reach the log (for a
// Tier: fsm.Decode), because a committed entry the FSM cannot decode stops every
// replica.
//
// Goroutines: raft's own (run loop, FSM, snapshots, one replicator per follower);
// the stream layer's accept loop plus one short-lived goroutine per inbound
// connection for its hello; the admin HTTP server and its per-request goroutines;
// and one waiter per raft future
// (Node.wait), which lets callers give up on a future raft may never answer when
// the replica shuts down mid-flight. Every wait selects on a timeout and on
// shutdown.
package raftnode
