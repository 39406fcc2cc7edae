// Package tiers holds the registry of tier policies (name → factory; Default is
// the registry the daemons and the simulator select policies from by name), the
// solver policies "greedy", "local" and "exact" (solver_policy.go: a
// SolverPolicy plans with the balancer solver of that name; "local" is the
// default of every tier) and "spread", an example custom policy (spread.go).
// There are no per-tier built-in policies: any registered policy can serve any
// tier. The tutorial's custom tier is examples/packtier; the "plugin" policy,
// which calls a policy in another process, is in coordinator/plugin. Policies
// are pure: they plan from an interfaces.View and never read a clock.
package tiers
