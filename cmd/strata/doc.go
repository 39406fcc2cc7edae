// Command strata is Strata's one binary: the daemons (global, region, tier — a
// replica of any tier its configuration names — and host), the
// one-process dev cluster, the client commands that drive a cluster through its
// Admin API, the what-if simulator and the benchmarks.
//
// Run "strata --help" for the list of commands.
package main
