// Package hostd runs a host daemon: a host agent (coordinator/hostagent, its
// state in a local bbolt file, its shards run by a driver) connected to the
// leader of its region (or of whatever tier is its parent) through the
// shard-assignment session (coordinator/session).
//
// The session's Assign, Revoke and LeaseGrant go to the agent, whose answers
// become the Acks; the agent's Report is sent every report interval; its Hello
// names every shard it holds with its epoch, so a restarted host resumes what
// its parent still assigns to it and drops the rest.
//
// Goroutines: the session client's (see coordinator/session), the agent's tick
// loop (self-fencing) and the telemetry server's.
package hostd
