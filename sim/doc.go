// Package sim is the what-if simulator: it runs the same tier policies, balancer and
// control loop as the daemons on a virtual clock, with Raft and gRPC replaced by
// direct calls through the same contracts. Runs are seeded and repeatable.
package sim
