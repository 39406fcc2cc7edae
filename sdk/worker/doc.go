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
// ±20% jitter) until the context ends.
//
// Callbacks are called one at a time, in command order, from the connection's
// goroutine. Goroutines: one per Conn (connect, receive and dispatch loop; it
// sends the acks) and, when Options.Load is set, one load reporter per live
// stream.
package worker
