// Command testnode runs one replica of a tier Raft group (raftnode.Tier over
// coordinator/fsm) with its admin endpoint, for the multi-process tests and
// benchmarks on 127.0.0.1 (see package proctest). It is not a daemon for
// production: a tier replica runs in production as "strata global", "strata
// region" or "strata tier" (coordinator/tierd), which add the sessions, the
// control loop and the Admin service.
//
//	testnode --id n1 --dir /tmp/n1 --raft-addr 127.0.0.1:7001 --admin-addr 127.0.0.1:7101 --bootstrap
//	testnode --id n2 --dir /tmp/n2 --raft-addr 127.0.0.1:7002 --admin-addr 127.0.0.1:7102 --join 127.0.0.1:7101
//
// The test node serves the raw write routes of the admin endpoint (raftnode
// Config.RawWrites: /v1/raft/join, remove, apply and the /v1/tier/ writes),
// which no production replica serves. With --test-mode the admin endpoint also
// serves /v1/test/block, the blocked-peers
// list that simulates network partitions between processes. When the replica is up
// it prints one line "READY <status JSON>" on stdout. SIGTERM or SIGINT stop it
// cleanly; SIGKILL is what the crash tests use.
package main
