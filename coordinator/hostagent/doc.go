// Package hostagent is the host side of Strata's hierarchy: the agent that owns
// shards on one host, runs them through a driver, persists what it owns in a
// local bbolt file, self-fences when its lease expires, and records what it ran
// in an ownership ledger.
//
// # Structure
//
//   - Core (core.go): the decision logic, a deterministic state machine with no
//     I/O, no clock reads and no goroutines. Inputs carry the time: Assign(now,
//     spec, epoch), Revoke(now, shard, epoch), LeaseGrant(now, ttl, confirm),
//     Tick(now). Each returns an ordered list of Effects (persist, start, stop,
//     delete, lease) and the error for the ack.
//   - Agent (agent.go): serialises inputs under one mutex, feeds them to the Core
//     and executes the effects against the Store, the driver and the ledger. Its
//     API (Hello, Assign, Revoke, LeaseGrant, Tick, Report) is what the session
//     client calls with the messages of the parent's stream.
//   - Store (store.go): bbolt persistence. driver/*: the Driver interface and the
//     synthetic, execdriver and callback drivers. ledger: the ownership ledger and
//     its checker.
//
// # State machine
//
// Per shard the agent holds a Record {spec, epoch, fenced}; per revoked shard a
// tombstone epoch; and a lease deadline. A shard runs iff it is held and not
// fenced, and no shard runs while the lease is invalid.
//
//	Assign(e)  tombstone ≥ e or held > e → ErrStaleEpoch ("held epoch H, got E")
//	           no valid lease           → ErrNoLease (wraps ErrConflict); no change
//	           held == e, running       → no-op (idempotent; a changed spec is persisted)
//	           held == e, fenced        → persist unfenced, start  (re-confirmation)
//	           held < e or not held     → [stop old], persist, start
//	Revoke(e)  held > e or tomb > e     → ErrStaleEpoch
//	           otherwise                → [stop], delete record + tombstone max(e)
//	           (a revoke of a shard not held succeeds and leaves the tombstone, so
//	           a delayed Assign it overtook is refused; a repeated one writes the
//	           tombstone again, so its ack never stands for a write that failed;
//	           Revoke needs no lease)
//	LeaseGrant deadline = now + ttl - margin; confirm[] = Assign(held spec, epoch)
//	Tick       at or after the deadline: for each running shard stop, persist fenced
//
// A stop the driver fails leaves the shard running, so the change that asked
// for it is undone (Core.StopFailed): the shard stays held and running at its
// epoch, with its old tombstone, and nothing more of that input is carried out
// for it — a revoke is not acknowledged (the parent sends it again), an assign
// under a newer epoch is refused, and the fence is tried again at every input
// (Tick) while the lease is invalid.
//
// Every input first applies an expiry that is due, so a late input cannot act on
// an expired lease. A driver start that fails drops the shard (tombstone at its
// epoch) and returns the driver's error in the ack, marked ErrShardFailed (the
// ack's failed flag) — once the driver's stop of what it may have half-started
// succeeded: when that stop fails too, the shard stays held and running, so the
// fence or a revoke stops it. A persist that fails cancels the start it comes
// before; a changed spec of a running shard whose persist fails leaves the
// shard running (the durable record, of the same epoch, stands) and fails the
// ack, and the parent's next Assign of that epoch persists it again. A process that ends on its own (a driver with ExitError,
// e.g. exec) is stopped and dropped the same way on the next Tick. A re-sent
// Assign of a failed epoch is refused as stale and marked failed again, so the
// parent's doctor control policy counts the failure and the parent places the
// shard elsewhere. The mark is kept in memory only; after a restart such an
// Assign is refused as stale with Ack.revoked_at set (the tombstone is kept),
// and the parent takes the shard off the host, to place it again under a new
// epoch, instead of re-sending it.
//
// # Lease and fence timing
//
// The agent fences at send_local + ttl - margin, where send_local is its own
// send of the report (or Hello) the grant answers (the grant echoes its
// sequence, LeaseGrant.report_seq; coordinator/session maps it back to the send
// time), never the grant's receipt, and margin = max(MarginFraction·ttl,
// MinMargin) (defaults 0.2 and 100ms). A grant never shortens the lease held; a
// ttl ≤ margin (a parent tier passing on the little its own lease has left)
// renews nothing and is no error. The parent must re-place a silent child's shards only after ttl +
// x + grace measured from its own send time of the last grant, where x is the
// driver's stop budget (exec: StopTimeout plus 500ms for the kill; callback:
// 3 × AckTimeout — a pending add, the drop, a detach; driver.StopBudget),
// which the agent announces in its Hello
// (stop_budget_nanos) and the parent records with the child (label
// strata.stop_budget) and adds to the lease, with its drift margin D
// (control.drift_margin). With the child's send time r of the report the grant
// answers, the grant's send time s ≥ r, child tick interval k and relative
// clock-rate error ρ, the child has stopped by r + (ttl - margin)(1+ρ) + k + x
// in real time, which is before the parent's s + ttl + x + D + grace whenever
//
//	k + ρ·ttl < margin + D + grace
//
// — the delivery delay of the grant no longer enters: a grant that arrives late
// renews only what is left of it.
//
// A tier announces to its parent the largest stop budget of its children when
// it connects (their leases end with its own); a child that connects later with
// a larger budget counts from the tier's next session with its parent.
//
// With the tier defaults (coordinator/tierd Config.Defaults: LeaseTTL 4s, Grace
// 1s, DriftMargin 200ms), margin = max(0.2·4s, 100ms) = 0.8s and margin + D +
// grace = 2s; with k = 50ms (the default TickInterval) this leaves 1.95s for
// drift, whatever the drivers' stop timeouts (exec's default
// StopTimeout 5s gives x = 5.5s: a silent exec host's shards move after
// 4s + 5.5s + 0.2s + 1s). A driver start gets a
// context whose deadline is the lease deadline, so a slow start cannot hold the
// agent past its fence. TestHandoverRespectsLease replays this timeline and
// checks the two hosts' ledgers; re-placing earlier is caught as an overlap.
//
// # Handshake after a (re)connect or restart
//
//  1. child → Hello{host, capacity, held: every held shard with its epoch,
//     fenced or not} (wire: Hello.held_epochs).
//  2. parent → LeaseGrant{ttl}. A restarted agent loads every record fenced —
//     the lease is unknown after a restart — so nothing runs yet.
//  3. parent, for each held shard: Assign(shard, same epoch, spec) if it still
//     places it here (re-confirmation: the shard resumes), or Revoke(shard,
//     epoch) if not. Agent.LeaseGrant's confirm list does the same for callers
//     that carry confirmations in the grant. A held shard neither confirmed nor
//     revoked stays fenced (and keeps appearing in Hello).
//
// # Persistence order
//
// Persist, then start: a shard never runs without a durable record (a failed
// persist cancels the start). Stop, then persist: the fenced flag or the removal
// is written only after the driver stopped the shard. The lease deadline is
// persisted on every grant. bbolt transactions are fsynced on commit. Layout:
// see store.go; a corrupt or unknown record, bucket or version is an error
// wrapping ErrCorrupt (and interfaces.ErrInvalid) naming bucket and key; a store
// of another host is refused (ErrConflict). A damaged file is ErrCorrupt too,
// naming it and telling the operator to move it aside: one bbolt cannot open
// or panics on (the panic is recovered), one that fails bbolt's consistency
// check at open, and an existing empty (0-byte) file, which bbolt would open
// as a new store without the records and tombstones.
//
// # Ownership ledger
//
// JSON lines, one file per host, written by the executor (package ledger):
//
//	{"seq":7,"host":"h1","shard":"s1","epoch":3,"event":"start","ts":1764446400000000000}
//
// ts is wall nanoseconds from Config.Clock read at the moment of the event:
// "start" just before the driver starts the shard, "stop" just after the driver
// stopped it, so recorded intervals cover real ones — or, for a driver that
// saw the shard's process end before the stop (the exec driver's supervisor
// fenced it at the lease's end while the agent was frozen), that earlier time
// (stopTimer). On Open, starts left
// without a stop get a recovered stop at min(now, persisted lease deadline) —
// drivers' work dies with the agent (an exec shard's group leader carries a
// parent-death SIGKILL, and the restarted driver kills what is left of its
// groups), and would have been fenced at the deadline anyway. The ledger is
// not fsynced: a final line torn by a crash of the machine is cut off on Open
// (ledger.Writer.Torn says so); a malformed line elsewhere stops the agent
// with an error naming the line. ledger.Check
// merges the files of all hosts and reports overlaps, epoch regressions, order
// errors and (with ExpectRunning) shards not running at the end.
//
// # Worker-side fencing
//
// A driver that is a driver.LeaseHolder holds the lease next to the work: the
// agent hands it the time left until its own fence at every start (Start's
// context deadline) and after every grant (RenewLease; a grant parked behind a
// slow driver call too, at once), so the shards stop at the lease's end even
// when the agent is frozen or dead. The exec driver's supervisors and the
// callback driver's SDK workers do; docs/reliability.md has the measurements.
//
// # Goroutines (for docs/threads.md)
//
//   - Agent.Run: the one goroutine of the agent; calls Tick every TickInterval
//     of the injected clock until its context ends. All decision inputs are
//     serialised by Agent.mu, except that a lease grant arriving while an
//     input holds it (a slow driver call) is parked and applied, from its
//     receipt, when that input is done, and Report reads the running shards as
//     of the last input: neither a renewal nor a report waits for a driver.
//     The caller's goroutine (the session client) executes the inputs, except that when one input stops several shards (a
//     fence) their driver stops run side by side, one short-lived goroutine
//     each, so that the fence ends within one stop budget.
//   - execdriver: one goroutine per running shard, reading its supervisor's
//     reports, then in cmd.Wait. The supervisor (strata supervise) is a
//     process of its own per shard.
//   - callback: per attached worker, the gRPC handler goroutine (acks, loads)
//     and one sender goroutine; a short-lived goroutine per round of
//     re-placing a detached worker's shards.
//   - sdk/worker (in the worker process): one connection goroutine per Conn
//     (it also sends the acks), the lease timer's when the host's lease ends
//     unrenewed, and, when Options.Load is set, one load reporter per live
//     stream.
//
// The synthetic driver and the Core start no goroutines.
//
// # Known limits
//
//   - Tombstones are never pruned (one small entry per shard ever revoked).
//   - A shard whose exec process exits on its own is dropped on the next Tick
//     (reapExited, Core.Exited) and never restarted here, but the parent is not
//     told at once: it learns of it when a Report no longer lists the shard and
//     its re-sent Assign is acked failed (TestExitedWorkerIsReportedAsAFailure).
//   - Report sequence numbers restart at 1 when the agent restarts.
//   - The ledger compares timestamps of different hosts directly (one clock).
//   - The ledger is never rotated: Open reads it whole, so start-up time and
//     memory grow with the host's lifetime.
//   - A driver stop runs under the agent's lock: a revoke whose stop takes its
//     whole budget just before the lease ends holds up the fence of the other
//     shards by up to that budget, past the bound above (the parent waits one
//     budget). Announcing twice the budget would cover it at the price of a
//     slower failover; not done.
//   - A start that fails and whose cleanup stop fails too keeps the shard held
//     as running (the driver may run it: callback with a stuck worker), so the
//     fence or a revoke stops it; until then its reports list it and the
//     parent's re-sent Assign is acked, even if nothing runs it.
//   - The exec driver waits for a killed process without a bound: one stuck in
//     the kernel (D state) holds the agent's lock, and every input, until it
//     exits.
package hostagent
