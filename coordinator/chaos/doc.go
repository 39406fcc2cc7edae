// Package chaos is the chaos suite: a real multi-process Strata hierarchy
// (coordinator/e2e's Cluster) with every process in its own network
// namespace, a seeded schedule of faults, a continuous admin workload, and a
// checker that judges the run from what the hosts and the workers themselves
// recorded.
//
// The pieces are separate:
//
//   - netns.go: the network. A bridge and one namespace (veth, 10.99.x.y) per
//     process; partitions are iptables DROP rules inside the namespaces.
//   - topology.go: the cluster on that network (3 global replicas, regions of
//     3 replicas, hosts with the exec driver running internal/beat workers).
//   - faults.go: the fault kinds, the seeded schedule and the injector.
//   - workload.go: job submit, delete, drain and undrain through the Admin
//     API, each recorded in the operations log.
//   - checker.go: reads the hosts' ledgers (coordinator/hostagent/ledger) and
//     the workers' heartbeat files while the run goes on and at its end, and
//     reports double owners, lost shards, shards stopped by a control-plane
//     fault and the longest stop per fault kind.
//   - measure.go: reconnect times after leader faults (from the daemons'
//     logs) and how long a paused host's workers went on (heartbeats).
//   - run.go: ties them together; report.go: the report and its files;
//     rejudge.go: the checker again over a kept run directory.
//
// The tests run only with STRATA_CHAOS=1 and need root (network namespaces);
// see docs/reliability.md, "Chaos suite".
package chaos
