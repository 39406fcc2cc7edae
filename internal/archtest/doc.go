// Package archtest enforces the import rule of docs/architecture.md ("Import
// rules") as a test: the pure packages (interfaces, balancer, tiers, sim, and the
// tier core coordinator/tiercore) never
// depend on grpc, raft, bbolt or the coordinator. It also checks that every
// package has a doc.go.
package archtest
