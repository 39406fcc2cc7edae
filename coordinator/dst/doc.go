// Package dst is Strata's deterministic simulation test: one seed drives a
// whole hierarchy — a global tier group, two or more region groups and their
// hosts — built from the real decision code, over a simulated network and a
// virtual clock, with faults injected, and checks the protocol's safety rules
// after every step.
//
// # What runs for real
//
//   - every host is a hostagent.Core (the agent's state machine: leases,
//     fencing, epochs, tombstones), its effects carried out by a small
//     executor here (a store that survives crashes, and a supervisor per
//     worker that holds the lease deadline, as the exec driver's does);
//   - every tier replica keeps its committed state in a real fsm.FSM
//     (coordinator/fsm, applied through ApplyCommand exactly as a Raft entry)
//     and takes its session decisions with the tier session core
//     (coordinator/tiercore): Leases (when a silent child's lease ends),
//     Assigns (when an Assign is due again), Reconcile (anti-entropy on Hello
//     and Report), MayAssign, RevokeAcked (revoke → ack → commit → assign),
//     AdmitHello (group terms) and Uplink (the parent's epochs, pending
//     revokes, tombstones and the lease from the parent) — the code tierd
//     runs;
//   - what this package adds is the driver around them: sessions on the
//     simulated network, a simulated Raft log per group, and a small control
//     round (place unplaced shards, re-place a lost child's shards, begin
//     random moves, create and delete shards at the top). The control round is
//     not tierd's (issue 21 moves that into tiercore separately); it only
//     needs to generate the traffic whose safety the cores must keep.
//
// # Raft: a simulated log per group
//
// Each group has one replicated log with a term and a leader. A replica
// commits only while it is the group's leader in the current term; its FSM
// applies the entry at once, and a newly elected leader applies every entry
// before it acts (Raft's leader completeness). A leadership change is a
// depose (the term grows, so the old leader's commits fail at once; it learns
// it was deposed after up to 500ms, as hashicorp/raft's leader lease lets a
// cut-off leader believe it leads) followed, 1–2s later, by an election (the
// followers' election timeout). A paused leader is deposed by its followers
// after 0.5–1s and learns it on resume. We chose this over hashicorp/raft on
// its in-memory transport because raft runs goroutines and timers that a
// virtual clock cannot drive deterministically, and because what the tier
// protocol depends on is exactly the guarantees modelled here (one leader
// per term, committed entries survive, a deposed leader may act for a
// bounded while before it knows); raft itself is tested in
// coordinator/raftnode. The cost is that elections are chosen, not run.
//
// # Network and faults
//
// Messages are delivered after a random delay (a few ms, sometimes hundreds:
// messages overtake each other), dropped, or duplicated, all drawn from the
// seed; a partition drops everything between two sides. Sessions are as in
// coordinator/session: a child opens one to the replica it believes leads
// (followers redirect), reports every interval, answers nothing on a session
// it gave up, gives a session up when the parent is silent past 1.5 report
// intervals (at most half the lease), and the parent sees a session end when
// the child's process dies or gives it up (a stream reset), or by keepalive.
// A plan of faults, drawn from the seed, crashes and restarts processes
// (host agents keep their store; their workers keep running under their
// supervisor until the lease they hold ends), pauses them (a paused process
// handles nothing; what was sent to it waits), partitions them, deposes
// leaders and breaks sessions. Every process's clock runs at its own rate,
// within ±1% of the virtual clock (bounded drift). After the plan's fault
// window every fault is healed, and the run goes on quietly.
//
// # Invariants, checked after every step
//
//   - one owner: at most one worker of a shard is active at any instant, a
//     worker being active from its start until its stop or its supervisor's
//     lease deadline, on the virtual clock;
//   - epochs only grow: a shard starts under an epoch at least as high as any
//     it started under before, and a repeated epoch only on the same host;
//   - capacity: no host runs more workers than its capacity;
//   - leases honoured: when a tier declares a child lost (and so may give its
//     shards away), nothing that child's lease covers still runs (no active
//     worker on that host, or on any host of that region);
//   - nothing lost: once the faults have stopped and the run has been quiet,
//     every shard the global tier has runs on exactly one host, and no host
//     runs a shard the global tier does not have.
//
// # Seeds, traces and shrinking
//
// Run(seed, cfg) is a pure function of its arguments: the same seed gives the
// same run, step for step (Result.Digest hashes every step). A failing seed
// is replayed with the trace on, and the trace's last lines are printed; the
// plan of faults is then shrunk (each fault removed while the run still
// fails) so the report names the fewest faults that still break the rule.
//
// # Mutants
//
// Config.Mutations (tiercore.Mutations) and Config.NoWorkerLease put back
// issue 20's failure modes — no tombstone on a parent's revoke, a parent that
// re-places a child's shards when its session drops rather than when its
// lease and margin end, and workers without a lease of their own — and the
// tests show the invariants catch each one within a stated number of seeds.
//
// No real network, no clock reads, no goroutines, no global randomness: the
// only sources of time and chance are the virtual clock and the seeded
// math/rand/v2 generators (TestNoClockNoNetwork checks the sources).
package dst
