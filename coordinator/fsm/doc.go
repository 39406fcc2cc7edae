// Package fsm is the replicated state machine of one tier instance: its children
// (capacity, labels, state), its shard specs, the assignment of shards to children
// with epochs, the in-flight moves, and a bounded applied-plan log that explains
// every placement change (shard, from, to, epoch, reason, Raft index). It
// implements github.com/hashicorp/raft's FSM, BatchingFSM and FSMSnapshot.
//
// # Commands
//
// A log entry is a one-byte CmdType followed by a canonical binary payload
// (uvarints, little-endian float64s, length-prefixed strings, maps as sorted
// key/value lists). Types are only ever appended; changing the encoding of a
// command means adding a new type. Build a command value (PutChild, RemoveChild,
// PutShards, DeleteShards, Assign, Unassign, Move, BeginMove, CompleteMove,
// AbortMove, ApplyPlan, Quarantine, DropShards, PlanBatch, RetireShards), call
// Encode, and pass the bytes to raft.Apply. DropShards (delete shards, aborting
// their in-flight moves) and PlanBatch (drain children and apply a plan's moves)
// are one entry each so that an operator's request is never half applied.
// RetireShards is DropShards that also raises the state's epoch floor to the
// dropped shards' largest epoch: every shard record created afterwards starts
// there, so a deleted shard ID that comes back (a job re-submitted, an
// autoscale grow after a shrink) only ever sees larger epochs — hosts keep
// tombstones of the old ones. The top tier deletes with it; a region drops
// shards its parent took back with DropShards, as its wire epochs carry the
// parent's.
//
// Decode is strict: unknown types, truncation, trailing bytes, non-minimal
// varints, unsorted map keys, out-of-range enums, over-long strings or counts
// (MaxStringLen, MaxBatch) and values that fail interfaces validation are all
// errors wrapping interfaces.ErrInvalid. Every accepted input re-encodes to the
// same bytes (the fuzz test checks it). Decode never panics.
//
// # Apply
//
// Apply is deterministic: no clock, no randomness, no iteration over maps (shards
// live in a slice indexed by a map; children are only looked up). It returns a
// *Result with one OpResult per item; domain rejections — stale epoch
// (ErrStaleEpoch), unknown shard or child (ErrNotFound), wrong owner, move already
// in flight, inactive target, child still holding shards (ErrConflict) — are
// returned there, to the caller of raft.Apply, and change nothing. A committed
// entry that does not decode is fatal: Apply panics with the index and the
// reason, because skipping it would make this replica diverge silently (the
// usual cause is an older binary reading a newer leader's entries).
//
// Apply does not check capacity. Capacity, like the other plan rules, is checked
// by the pure balancer.Verify on the leader before the plan is committed
// (FSM.VerifyPlanned runs it against this state and the loads the plan was
// made on, for coordinator/tierd's control round); Apply re-checks only what makes a single move unsafe whatever the load is (epoch compare-and-set, owner, in
// flight, target exists and is active), so moves committed in one batch after
// verification cannot double-own a shard.
//
// Moves follow the shard-assignment protocol (coordinator/tierd, "Moves and the
// safety rules"): Move (or ApplyPlan without Begin) commits a new owner with
// epoch+1 in one step; BeginMove marks the move in flight (revoke sent),
// CompleteMove commits it after the old owner's ack (epoch+1), AbortMove drops it.
// While a move is in flight its shard's load counts on the target, not the source
// (in-flight moves count as done, as in the balancer).
//
// Quarantine (the doctor control policy's resolution, tiers/control) takes a
// shard off its owner with a reason; no Assign or move of it commits until a
// release. The reason stays in the shard record (ShardState.Quarantined) and the
// change in the plan log (ChangeQuarantine, ChangeRelease).
//
// # Snapshots
//
// The state keeps every shard in an immutable record: an update builds a new
// record and swaps a pointer in a dense slice, never writing into a record a
// snapshot may be reading. Snapshot (which raft calls on the FSM goroutine, so
// Apply waits for it) therefore only copies the slice of pointers — 8 bytes a
// shard, a memmove of 8 MB for a million shards, into the slice of the previous,
// released snapshot so that no large allocation happens while Apply waits — plus
// the children and the plan log, which are small. Persist runs concurrently with later Applies: it sorts its
// private copy of the pointer slice by shard ID and streams records one by one
// through a bufio.Writer: a magic and version, a meta record, one record per child,
// one per shard, one per log entry, one per quarantined shard, one per ACL token
// (the hash of its secret, never the secret), and an end record
// with a CRC-32C of all that came before. The format version is the oldest that
// holds the state, so older binaries read what they can: 1 without quarantined
// shards, stamped log entries or quarantine and release entries in the plan log,
// 2 with quarantined shards or those entries, 3 once a log entry
// carries the time its Raft entry was appended (raft.Log.AppendedAt, the leader's
// clock replicated with the entry — data, not a clock read, so replicas agree), 4
// once the epoch floor is above 0, 5 once there is an ACL token. Nothing else is copied and the encoding of the whole state is never
// held in memory. We chose this over a persistent (HAMT/radix) map because it
// keeps reads and applies at plain slice/map speed and costs one small allocation
// per changed shard; the price is the O(n) pointer copy in Snapshot, a few
// milliseconds at 1M shards.
//
// Because records are sorted, the same state always gives the same bytes: Hash
// (SHA-256 of the stream) compares replicas, and the same commands in the same
// order give byte-identical snapshots. Restore decodes into a new state and swaps
// it in under the lock, so concurrent readers never see a half-restored state; a
// corrupt snapshot (bad checksum, unsorted or dangling records, counts that do
// not match) is an error and leaves the old state in place. The price is that
// old and new state are both in memory during a restore; Options.LeanRestore
// drops the old state first instead (readers then wait for the restore, and a
// failed restore leaves the FSM empty and returns ErrRestoreEmptied, which the node
// must treat as fatal; raftnode does). Shard records in a
// snapshot are checked structurally and for references, but IDs are not re-run
// through the syntax rules (they were validated when their command was decoded,
// and the checksum covers them), which keeps restore of 1M shards fast.
//
// # Reads
//
// The read methods (Child, Children, Shard, Assignment, Assignments, InFlight,
// View, PlanLog, History, Stats, AppliedIndex) take a read lock and may be called
// from any goroutine. On their own they are stale reads: this replica's state as
// of its last applied entry. For a linearizable read the node first confirms its
// leadership and waits for a Barrier (coordinator/raftnode), then reads here.
package fsm
