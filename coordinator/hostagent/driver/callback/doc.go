// Package callback is the host-agent driver for stream workers that run as their
// own processes and attach to the agent over gRPC (service strata.v1.Worker in
// interfaces/wire/worker.proto; the sdk/worker package is the client side).
//
// The Driver is both a driver.Driver for the agent and the gRPC WorkerServer the
// workers connect to. Start picks the attached worker with the fewest shards
// (below its max_shards), sends it AddShard and waits for its ack; Stop sends
// DropShard to the worker holding the shard and waits for its ack. Measure returns
// the latest WorkerLoad figures of each shard.
//
// When a worker's stream ends, the worker drops its shards once it notices (the
// SDK does so before reconnecting) — which may take a while. The driver marks
// them pending and re-sends them, under the same epoch, to an attached worker
// after AckTimeout, or at once if the same incarnation of that worker attaches
// again (it dropped everything first); a Stop of such a shard returns only then
// too, so that the agent's stop, and the parent's move that follows, never
// overlap the old worker's run. An incarnation is the random nonce a worker
// sends in WorkerHello.incarnation, one per SDK Conn: a worker id alone does
// not tell two processes apart (the SDK's default, <hostname>-<pid>, repeats
// across PID namespaces, e.g. two containers of a pod), and a process that
// attaches under the id of one whose stream just broke gets its shards only
// after AckTimeout. A worker that sends no incarnation (older SDKs) always
// waits out AckTimeout too. A DropShard never overtakes the AddShard of a re-placement. The
// shards stay owned by this host throughout: this is placement onto local
// slots, invisible to the parent.
//
// Lease: the driver is a driver.LeaseHolder. Every AddShard carries the time
// left of the host's lease (Start's context deadline before the first
// RenewLease), measured when the command is sent, and every RenewLease sends
// each attached worker a LeaseRenewal; a worker drops its shards when the
// lease ends unrenewed (sdk/worker), so a frozen agent's workers stop on
// their own. Serve the driver with ServerOptions (keepalive, and a policy
// that admits the SDK's pings).
//
// Goroutines: per attached worker, the gRPC handler goroutine (receiving acks and
// loads) and one sender goroutine (writing commands); one short-lived goroutine
// per re-placement round of pending shards, and per detach one that waits
// AckTimeout and then runs a round.
package callback
