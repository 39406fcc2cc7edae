// Package worker is the Go SDK for stream workers that run shards for a Strata
// host agent (the agent's "callback" driver).
//
// A worker implements Handler and calls Connect with the agent's local gRPC
// address. The SDK attaches (WorkerHello), calls OnAdd for every AddShard and
// OnDrop for every DropShard, acknowledges each with the handler's result, and
// sends per-shard load every Options.LoadInterval when Options.Load is set.
//
// Safety: when the stream to the agent ends for any reason, the SDK calls OnDrop
// for every shard it runs before it reconnects — a worker never keeps running
// shards the agent may have given to another worker. It then reconnects with
// exponential backoff (Options.MinBackoff doubling up to Options.MaxBackoff, with
// ±20% jitter) until the context ends. Every hello of a Conn carries the same
// random incarnation (Conn.Incarnation): the agent gives a broken stream's
// shards back at once only to that incarnation, so two processes that share a
// worker id (the default <hostname>-<pid> repeats across PID namespaces) never
// run a shard at the same time.
//
// Lease: the worker holds the host's lease itself. Every AddShard carries the
// time left of it and the agent renews it (LeaseRenewal) after every grant its
// parent makes; when it ends unrenewed — the agent frozen or stuck while the
// stream stays up — the SDK calls OnDrop for every shard, as when the stream
// ends (Conn.LeaseEnd says when it ends). The stream pings the agent after 10s
// without traffic and ends when the answer takes longer than 5s (gRPC
// keepalive), so a vanished agent is noticed too.
//
// Fencing token: the epoch OnAdd receives grows with every new owner of the
// shard. A sink must check it — remember the largest epoch it accepted per
// shard and refuse writes under a smaller one, as a Kafka broker refuses a
// producer's older epoch — so that an owner that outlived its lease (a machine
// frozen longer than any timer on it can act) cannot overwrite its successor.
// examples/worker shows such a sink.
//
// Callbacks are called one at a time, in command order, from the connection's
// goroutine, and OnDrop at a lease's end from the lease timer's. Goroutines:
// one per Conn (connect, receive and dispatch loop; it sends the acks), the
// lease timer's while it drops shards, and, when Options.Load is set, one load
// reporter per live stream.
package worker
