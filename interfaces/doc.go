// Package interfaces holds Strata's cross-tier contracts: the domain types every
// tier, the balancer and the simulator share (shards, load vectors, children,
// assignments with epochs, moves, plans, reports, hints, constraints), the
// tier-policy plugin interface with its factory type, the result status that keeps
// "infeasible" apart from "error", the Clock interface, input validation, and
// the generic name → factory Registry behind the policy and solver registries.
//
// It imports the standard library only. The wire schema and its generated code live
// in the subpackage interfaces/wire; conversions between wire and domain types live
// there too, in one place.
package interfaces
