// Package clickcount is an example streaming job on NATS JetStream under
// Strata: per-key click counts in tumbling event-time windows over a
// generated clickstream whose keys are skewed (Zipf), written to an
// epoch-fenced sink.
//
// The job's shard "<job>/<i>" consumes partition i of the job's input stream
// (sdk/stream). Its operator (Windows) counts the clicks of each key per
// window of Window; a window closes when the partition's first record at or
// past its end arrives, and its counts go to the sink under the window's
// index as the output sequence, so a replay from a checkpoint re-emits the
// same outputs under the same sequences and the sink keeps one copy. The
// operator's state (open windows, plus Ballast bytes that stand for a
// larger operator's state) is checkpointed with the partition's offset.
//
// Producer publishes clicks at a fixed rate with keys drawn from a Zipf
// distribution and each record's key choosing its partition; Expected
// computes from the input stream what the sink must hold, and Compare tells
// what is lost or duplicated. cmd/clickcount is the worker, the producer and
// the checker as one program; docs/streaming.md walks through it.
package clickcount
