// Package coordinator runs a tier instance for real: its Raft group (hashicorp/raft
// with raft-boltdb/v2 on bbolt), the FSM and its snapshots, the plan applier,
// leases and sessions, the control-loop runner, and the gRPC servers and clients.
package coordinator
