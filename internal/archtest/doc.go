// Package archtest enforces the architecture of DESIGN.md §6 as a test: the pure
// packages (interfaces, balancer, tiers, sim) never depend on grpc, raft, bbolt or
// the coordinator.
package archtest
