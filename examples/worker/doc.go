// Command worker is an example stream worker built on sdk/worker. It attaches to
// a host agent's local worker address, "runs" every shard it is given by logging
// it and reporting a load derived from the shard's spec, and drops shards when
// told to, when the agent goes away, or when the host's lease ends unrenewed.
//
// With --sink DIR every shard writes a record to a file-based sink every --emit,
// under the epoch of its assignment: the fencing token. The sink (epochSink)
// remembers the largest epoch it has accepted per shard and refuses a write under
// an older one, so an old owner that runs on after its shard moved — its host
// frozen, say — cannot write over the new owner's output; the worker then stops
// writing that shard. Any sink a worker writes to should check the epoch this way
// (Kafka's producer epoch, a conditional write on a version column, ...).
//
//	go run ./examples/worker --addr 127.0.0.1:7422 --id w1 --max-shards 8 --sink /tmp/out
package main
