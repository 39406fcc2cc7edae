// Package control is the brain of a tier leader's control loop (docs/control.md,
// issue 7 items 1–2), written as a pure state machine in the style of etcd's raft:
// a Controller holds the loop's memory and Step turns one observation (time, the
// tier's view, the silent children) into one Decision; Observe feeds back what
// the round did. No clock reads, no goroutines, no randomness, no I/O: the
// daemons (coordinator/tierd) and the simulator (sim) drive the same code, and
// the same inputs give the same decisions.
//
// # One round
//
//	observe  reports are smoothed (EWMA of each child's p99 and used load, one
//	         sample per report sequence number); shard loads and the assignment
//	         come from the view with in-flight moves counted as done.
//	detect   silent children past the grace period, the mass-failure guard,
//	         shards to evacuate (unplaced, or on failed/draining children),
//	         imbalance, overload, SLO risk and stragglers.
//	decide   the mode (emergency, periodic or hold) and the round's budget: a PI
//	         controller with a dead band, anti-windup and a cooldown turns the
//	         error against the targets into a number of moves, capped by an AIMD
//	         move concurrency; anti-bounce constraints keep recently moved shards
//	         from going back.
//	act      the caller applies Decision.Apply to its view, solves with its
//	         policy, keeps Decision.Admit's moves, commits them, and reports back
//	         with Observe (a failed or timed-out solve keeps the last good
//	         assignment: nothing is admitted).
//	explain  every round leaves a Record (errors, budget, mode, why, alerts,
//	         outcome); History returns the most recent ones.
//
// # Modes
//
//   - emergency: children silent past the grace are declared failed and the
//     shards of failed or draining children (and unplaced shards) are re-placed
//     now, without a move budget, cooldown or concurrency limit; only those
//     shards move (hard constraints only).
//   - periodic: improve the balance when the error is outside the dead band,
//     within the round's budget; the balancer's lexicographic objective makes
//     sure a lower-priority goal never makes a higher-priority one worse.
//   - hold: no solve, no moves (within the dead band, cooling down, at the
//     concurrency limit, the mass-failure guard is engaged, or the last solve
//     found nothing to improve at this error).
//
// # Control policies
//
// Policies (policy.go) run after Step, each as detect → diagnose → resolve:
// straggler (a child whose shards of a job process markedly slower than the
// job's shards elsewhere loses them, with the evidence), doctor (a shard that
// fails on several children is quarantined with the reason) and autoscale (DS2
// advice on measured rates, reported or applied). They are chosen by name
// (RegisterPolicy, NewPolicies), as pure as the Controller, and their actions
// join the round through Controller.Merge.
//
// The tuning knobs, with their defaults and meaning, are the fields of Config;
// docs/control.md ("The loop", "The controller") describes them for operators.
package control
