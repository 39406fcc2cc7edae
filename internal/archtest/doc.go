// Package archtest enforces the import rule of docs/architecture.md ("Import
// rules") as a test: the pure packages (interfaces, balancer, tiers, sim, and the
// tier core coordinator/tiercore) never
// depend on grpc, raft, bbolt or the coordinator (save its pure packages: the
// simulator runs the tier core). It also checks that every
// package has a doc.go.
package archtest
