// Command worker is an example stream worker built on sdk/worker. It attaches to
// a host agent's local worker address, "runs" every shard it is given by logging
// it and reporting a load derived from the shard's spec, and drops shards when
// told to or when the agent goes away.
//
//	go run ./examples/worker --addr 127.0.0.1:7422 --id w1 --max-shards 8
package main
