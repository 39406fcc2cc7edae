// Package tiercore holds the pure decisions a tier replica takes at its
// boundaries: with its children (what to assign and revoke when a child says
// what it holds) and with its parent (which Assigns a revoke has made stale,
// and whose Hello may open a session). It is the seed of the tier core of
// issue 21: the daemon (coordinator/tierd) reads its state, calls these
// functions and carries out what they return; nothing here does I/O.
//
// No gRPC, Raft, bbolt or wire types; no clock reads, no randomness, no
// goroutines (internal/archtest enforces the imports). Inputs are domain values
// and plain epochs; outputs are lists of messages, sorted so that one input
// always gives the same output.
//
// # Epochs
//
// Every epoch here is a wire epoch: the one the child sees (for a tier below the
// top, the parent's epoch composed with the tier's own; coordinator/tierd
// epochs.go). 0 means "not known": nothing is sent with an unknown epoch.
//
// # Anti-entropy (Reconcile)
//
// A child states what it holds — every shard with its epoch in a Hello, or the
// shards it runs, without epochs, in a host's Report — and the parent answers
// from its committed state:
//
//	the child's own shard, held at an older epoch or not at all → Assign(current)
//	    (from a Report: only when due, so that a busy child is not flooded)
//	a shard moving away from the child (in-flight move from it)  → never Assign;
//	    Revoke(the move's epoch) if held (from a Hello; a Report leaves it to
//	    the revoke's own timed re-send)
//	a shard the tier's own parent is taking back (leaving)       → never Assign;
//	    Revoke(its epoch) if held (likewise)
//	a held shard that is another child's or nobody's             → Revoke(max(held, current))
//	a held shard the parent does not have (deleted)              → Revoke(max(held, gone)),
//	    gone being its tombstone or the state's epoch floor
//
// MayAssign is the one copy of the first three rules' test: every Assign a tier
// sends passes it. The second and third rules are where the cross-region double owners of issue 20 came
// from: an Assign re-sent to the source of an in-flight move, and a region that
// accepted it because it kept no tombstone of the revoke.
//
// # Tombstones
//
// A child tier remembers the epoch at which each shard was revoked from it
// (Tombstones) and refuses an Assign at or below it: a late or re-sent Assign
// can never bring back an owner that was revoked. An entry ends only when the
// parent assigns the shard again at a newer epoch (it supersedes the
// tombstone). docs/reliability.md ("Guarantees and bounds") gives the lifetime
// and why it is long enough.
//
// # The session core
//
// The bookkeeping of a tier replica's sessions, as state machines that take
// the time as an argument and return decisions (the driver commits and sends
// what they say; coordinator/tierd and the deterministic simulation
// coordinator/dst are the two drivers):
//
//	Uplink     the child side of the session with the parent: the parent's
//	           epochs (wire epochs composed from them, Compose), the parent's
//	           pending revokes, their tombstones, and the lease from the parent
//	Leases     the parent side of its children's leases: when each was last
//	           granted, since when this replica leads, who is being declared
//	           lost; LeaseEnd is never before the child's own count ends
//	Assigns    the last Assign sent per shard and its ack: when a report
//	           makes it due again
//	RevokeAcked what a child's revoke ack means: complete the move, finish
//	           the parent's revoke, or nothing
//
// Mutations are test-only switches that put issue 20's failure modes back, so
// that the simulation can show it catches them; production never sets them.
//
// # Group terms (AdmitHello)
//
// A child that is a Raft group states in its Hello the term its sending replica
// leads in; the parent remembers the newest term it accepted per child and
// refuses an older one, so a deposed leader can never take the session over
// from its group's real leader.
package tiercore
