// Command clickcount is the example streaming job of package clickcount as
// one program:
//
//	clickcount worker  --addr HOST:PORT --nats URL [--tls DIR --host H] [--events FILE]
//	clickcount produce --nats URL --partitions N --rate R [--count N | --duration D]
//	clickcount check   --nats URL --partitions N
//
// worker attaches to a host agent's callback service (sdk/worker) and runs
// the shards it is given on JetStream (sdk/stream): each restores its
// windows from its checkpoint, consumes its partition and writes closed
// windows to the epoch-fenced sink. produce publishes a skewed clickstream
// at a fixed rate; check compares the sink with the input and exits 1 when
// a click is lost or counted twice. docs/streaming.md runs them under Strata.
package main
