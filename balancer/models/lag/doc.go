// Package lag is the backlog (consumer lag) model shared by the simulator and
// the balancer's throughput goal: Step advances a backlog by one time step from
// the input and processing rates, DrainTime says how long a backlog takes to
// drain, Growth is how fast it grows when the input exceeds the capacity.
//
// It imports only the standard library and interfaces (for the error
// sentinels), so both the balancer and the simulator can import it; it is a
// subpackage of balancer/models rather than part of it because models imports
// the balancer (for balancer.LatencyModel) and the balancer must be able to
// import this one.
package lag
