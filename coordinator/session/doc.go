// Package session runs the child side of the shard-assignment protocol (the
// messages: interfaces/wire, Session in session.proto; the rules for moves, epochs
// and leases: coordinator/tierd and docs/operations.md): one long-lived gRPC
// bidirectional stream from a child (a host agent, or a tier instance's leader) to
// whichever replica leads its parent.
//
// Client.Run dials the parent replicas in turn, sends Hello, follows a Redirect to
// the leader, then pumps messages until the stream breaks, and starts over with
// exponential backoff (with jitter from a seeded source). Messages from the parent
// go to a Handler on one goroutine, in order (LeaseGrants at once, on the receive
// goroutine, so a slow handler never delays a renewal); the acks it returns are sent
// back on the same stream. Reports are sent every report interval (the parent may
// set it in its LeaseGrant).
//
// Goroutines: Run's own (connect loop and receive loop); per live stream, one
// handler (client.go: Assign, Revoke and Constraints in order, queueing the acks)
// and one sender (reports, acks, hints); and gRPC's. A stream's two end with the
// stream; all stop when Run's context ends.
package session
