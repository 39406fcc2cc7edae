// Package raftest is the in-memory cluster harness for Raft groups built on
// raftnode: N replicas joined by raft's in-memory transport, with helpers to
// partition the group, heal it, disconnect, kill and restart a replica (keeping its
// log and snapshots), find the leader, and check that every live replica holds the
// same state (EnsureSame compares the FSMs' snapshot encodings, which are
// deterministic).
//
// It is shipped as code so that every package above the Raft layer can test itself
// against a real group without sockets or disks.
package raftest
