// Package proctest is the multi-process harness: it builds the testnode binary and
// runs a Raft group of real processes on 127.0.0.1, for end-to-end tests of
// durability (kill -9 and restart), failover and partitions.
//
// Partitions between processes are simulated in each process's stream layer: every
// Raft connection starts with a hello naming the dialling replica, and a replica
// started with --test-mode refuses connections to and from the raft addresses in its
// blocked list, which the harness sets through POST /v1/test/block on the replica's
// admin endpoint (Cluster.Partition, Cluster.Heal). Setting the list also closes the
// open connections to the newly blocked peers. The admin endpoint itself is never
// blocked, so the harness can always observe every replica.
package proctest
