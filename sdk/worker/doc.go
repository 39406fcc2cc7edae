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
// Callbacks are called one at a time, in command order, from the connection's
// goroutine. Goroutines: one per Conn (connect, receive and dispatch loop; it
// sends the acks) and, when Options.Load is set, one load reporter per live
// stream.
package worker
