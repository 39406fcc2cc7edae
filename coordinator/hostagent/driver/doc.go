// Package driver defines how a host agent runs shards: the Driver interface that the
// agent's executor calls after its state machine decided to start or stop a shard,
// and the measured-load type drivers report.
//
// Three drivers implement it, each in its own subpackage:
//
//   - synthetic: a built-in worker producing configurable, deterministic load
//     (demos, tests, benchmarks);
//   - execdriver: one operating-system process per shard, started from a configured
//     command with the shard id and epoch in its environment, measured from /proc;
//   - callback: stream-worker processes attach to the agent over gRPC and receive
//     AddShard/DropShard.
//
// A driver never decides anything: it does what it is told and reports load. Safety
// (epochs, leases, persistence order) is the agent's job — except that a driver
// that implements LeaseHolder also holds the lease deadline next to the work,
// so that a shard never runs past it when the agent is frozen or dead.
package driver
