// Package stream runs a streaming job's shards on NATS JetStream under
// Strata: each shard of a job is a partition of the job's input stream, its
// operator state and offset are checkpointed in the broker, and its outputs
// go to an epoch-fenced sink, so that a shard that moves carries its state
// and its outputs are exactly once.
//
// Layout (Names): the job's records are in the stream STRATA_<job>,
// partition i on subject strata.<job>.<i>, consumed by shard "<job>/<i>"
// with explicit acknowledgements from the offset after its checkpoint.
// Checkpoints (Checkpoints) are a KV bucket entry per partition — epoch,
// offset, and the state, or above InlineMax the name of an object in the
// object store of the same name — replaced by compare-and-set on the entry's
// revision and refused when the stored epoch is newer than the writer's. The
// sink (Sink) is the stream STRATA_OUT_<job>, a subject per partition; an
// append names the subject's last sequence it read (an atomic check and
// write), is refused when that entry's epoch is newer (ErrFenced) and
// skipped when its output sequence is not above the last (ErrDuplicate).
//
// Runner is the worker.Handler of a stream worker (sdk/worker): OnAdd
// fences the sink under the assignment's epoch (the fencing token the host
// agent delivers), loads the checkpoint, makes the operator from its state
// (Factory) and starts the shard's task; OnDrop stops the task after the
// record it is on and writes the final checkpoint, so the next owner resumes
// at exactly that offset. A task writes a record's outputs to the sink
// before acknowledging it and before any checkpoint covers it: a checkpoint
// never runs ahead of the sink, and a replay from it re-emits only outputs
// the sink holds (skipped) or has not seen. With an Operator whose outputs
// and sequences are computed from the records alone, the sink holds each
// output once across moves, crashes and stale owners.
//
// Runner.Load is the worker's load report (worker.Options.Load): per shard,
// cpu = busy time / wall time, Rate = records per busy second (the true
// processing rate DS2 uses), InputRate = arrivals per second (records
// processed plus the growth of the broker's pending count), LatencyP99 =
// p99 event-time latency (processing time − the record's event time), mem =
// the last checkpointed state's size, Lag = the broker's pending count for
// the shard's consumer.
//
// Goroutines: one task per running shard (fetch, process, write, ack,
// checkpoint); OnAdd, OnDrop and Load may be called from any goroutine.
// Tests run a real nats-server (natstest).
package stream
