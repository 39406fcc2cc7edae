// Package tierd runs one replica of a tier instance above the hosts — the global
// tier, a region, or a custom tier — as a daemon: its Raft group
// (coordinator/raftnode with the coordinator/fsm state), the parent side of the
// shard-assignment sessions its children open, the control loop its leader runs,
// the uplink session to its own parent (for every tier but the top one), and the
// Admin gRPC service the CLI talks to.
//
// # Moves and the safety rules
//
// Every decision is committed through Raft before anyone is told. A first
// placement, or a move away from a child whose lease has expired, commits the new
// owner with epoch+1 and then sends Assign. A move away from a live child commits
// BeginMove (the move is in flight), sends Revoke to the old owner, and only after
// its Ack (or the expiry of its lease) commits CompleteMove (epoch+1) and sends
// Assign to the new owner. Children ignore messages with an epoch older than the
// one they hold.
//
// # Leases
//
// The leader renews a child's lease (LeaseGrant, ttl T) on every Report it gets.
// The child fences itself at receipt + T − margin. The leader declares a child
// lost only when now > max(last grant sent, leader since) + T + grace, so a new
// leader, which does not know its predecessor's grants, waits a full lease first.
// A tier that has a parent offers its children leases no longer than its own
// lease from the parent has left: when a region loses its parent, its hosts fence
// before the parent may give the region's shards away.
//
// # Boundaries
//
// What to assign and revoke when a child states what it holds (its Hello, a
// host's Report), the tombstones of the parent's revokes, and the Hello
// group-term check are coordinator/tiercore's pure decisions; this package
// reads the state for them and sends what they return. A child tier restates
// what it holds (a Hello on its live session) every restateEvery reports,
// reconciled like the first. A child tier's Hello
// states the Raft term its replica leads in; the parent keeps the newest it
// accepted with the child's record (label strata.group_term) and refuses an
// older one. The uplink runs only while its replica leads in the term it was
// started in.
//
// # Goroutines
//
// Per replica: the control loop (leader work only; idles on followers), the
// uplink client and its leadership watcher (run while leader), four per child session (sessions.go: the
// gRPC handler of Connect, which registers the child and reconciles its Hello;
// a sender, which sends the child's outbox and checks each lease grant as it
// leaves; a receiver, which handles Reports at once; a worker, which handles
// Acks and Hints in order, so they never hold up a lease renewal), the gRPC
// server, raft's own and the
// telemetry server's. The session registry is guarded by Daemon.mu, the
// decisions that read the FSM and then commit by Daemon.decide, the FSM by
// raftnode's lock; docs/threads.md lists every goroutine and lock.
package tierd
