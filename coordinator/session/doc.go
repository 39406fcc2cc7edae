// Package session runs the child side of the shard-assignment protocol (the
// messages: interfaces/wire, Session in session.proto; the rules for moves, epochs
// and leases: coordinator/tierd and docs/operations.md): one long-lived gRPC
// bidirectional stream from a child (a host agent, or a tier instance's leader) to
// whichever replica leads its parent.
//
// Client.Run dials the parent replicas in turn, sends Hello, follows a Redirect to
// the leader, then pumps messages until the stream breaks, and starts over with
// exponential backoff (with jitter from a seeded source). Nothing waits without a
// deadline: the Hello must be answered within ConnectTimeout, gRPC keepalive
// pings run on the connection, and a watchdog gives up a live stream that stays
// silent past the silence limit (a fraction of the lease; a grant answers every
// report). The replica given up is avoided for a while, so the next session goes
// to another one, and shortly after a live session ended the backoff stays at its
// minimum, so children find a new leader quickly.
//
// Messages from the parent go to a Handler on one goroutine, in order
// (LeaseGrants at once, on the receive goroutine, so a slow handler never delays a
// renewal); the acks it returns are sent back on the same stream. Reports are sent
// every report interval (the parent may set it in its LeaseGrant); the client
// numbers them (Report.epoch) and remembers the send times of the last few. A
// grant echoes the number of the report it answers (LeaseGrant.report_seq, 0 for
// the Hello) and the handler gets that report's send time as the lease's start:
// a lease is timed from the child's own send, never from a grant's receipt.
//
// Goroutines: Run's own (connect loop and receive loop); per live stream, one
// handler (client.go: Assign, Revoke and Constraints in order, queueing the acks),
// one sender (reports, acks, hints) and one watchdog; and gRPC's. A stream's three
// end with the stream; all stop when Run's context ends.
package session
