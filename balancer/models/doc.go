// Package models holds the models that feed the balancer's goals and the
// global tier's sizing decisions (issue 7, item 4). It is pure: no clock, no
// global randomness, no I/O beyond the readers its parsers are given.
//
//   - Latency: FitLatency fits the balancer's own queueing latency model
//     (balancer.LatencyModel: p_q(ρ) = S·ln(1/(1−q))/(1−ρ), continued along
//     its tangent beyond MaxUtil) to observed (utilization, latency) samples
//     of one child, by least squares on log latency with gonum/optimize. With
//     too few samples, or samples all at nearly the same utilization, it keeps
//     the prior and says so in FitInfo. LatencyEstimator is the online variant:
//     a bounded ring of the last samples of one child; Assemble joins the
//     per-child fits into the one LatencyModel the balancer takes, and
//     LatencyEstimators does both for the children of a tier instance.
//   - Lag (subpackage balancer/models/lag, which the balancer itself can
//     import): lag.Step advances a backlog by one step from input and
//     processing rates; lag.DrainTime says how long a backlog takes to drain.
//     The simulator and the balancer's shortfall goal could share them; neither
//     imports the package yet.
//   - Parallelism: Advise is DS2's model ("Three steps is all you need",
//     OSDI 2018) — from the true processing and output rates of each operator
//     instance, the number of instances each operator of a dataflow needs, in
//     one step, for every measurement window. ParseTopology and ParseRates
//     read DS2's offline file formats. AdviseJob is the one-operator case
//     Strata's jobs are: the number of shards a job needs.
//
// The optimizer (gonum.org/v1/gonum/optimize) measures its own run time with
// the wall clock for its statistics; nothing here depends on that value, and
// the fitted parameters depend only on the samples and the prior.
package models
