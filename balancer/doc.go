// Package balancer decides, for one tier, which child each shard should live on. It
// is a pure library: no I/O, no goroutines, no clock reads, no global randomness.
// Inputs are children, shards, the current assignment, in-flight moves, constraints
// and weighted goals; the output is a plan whose every move says why.
//
// # API
//
//   - Problem: the dense problem (N shards × M children × R resources) with every
//     hard constraint. Build it with FromView or fill it directly and Validate.
//   - Options: the soft goals (Goal: kind, priority, weight), the latency model,
//     the seed and the budgets (time via a caller-provided Now, a Deadline hook,
//     iterations).
//   - Solver / RegisterSolver / SolverByName: solvers by name ("greedy", "local",
//     "exact").
//   - Result: new assignment, moves (interfaces.Move with Reason, Goal, Delta),
//     infeasibility explanations, Summary. Finish builds one from an assignment so
//     every solver reports the same way.
//   - Evaluate (objective per goal and per priority level), Compare
//     (lexicographic), CheckHard (hard-constraint violations), LowerBound.
//
// The goals, their formulas and the solvers are described in detail below (see
// the package README section at the end of this comment once complete).
package balancer
