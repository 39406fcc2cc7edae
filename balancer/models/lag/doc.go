// Package lag is a backlog (consumer lag) model: Step advances a backlog by one
// time step from the input and processing rates, DrainTime says how long a
// backlog takes to drain, Growth is how fast it grows when the input exceeds the
// capacity (max(0, input − capacity), the per-child term of the balancer's
// shortfall goal).
//
// No package imports it yet (docs/control.md, "Lag": not switched over): the
// simulator steps its backlogs with its own code (sim/engine.go, process) and the
// balancer computes its shortfall goal itself. TestStepMatchesSimulator checks
// Step against the simulator's step, as written in sim/engine.go.
//
// It imports only the standard library and interfaces (for the error
// sentinels), so both the balancer and the simulator can import it; it is a
// subpackage of balancer/models rather than part of it because models imports
// the balancer (for balancer.LatencyModel) and the balancer must be able to
// import this one.
package lag
