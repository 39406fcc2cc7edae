// Package devcluster starts a whole Strata hierarchy in one process on loopback:
// a global tier, regions, and hosts with synthetic workers, every tier a real
// Raft group (one replica each) and every link a real gRPC session. "strata dev"
// runs it; tests use it as the in-process cluster.
package devcluster
