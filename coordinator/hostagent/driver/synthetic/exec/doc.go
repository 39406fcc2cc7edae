// Package exec is the deterministic execution core of the synthetic driver: it
// models one host with C cores running the pending work items of its shards and
// measures each shard's processing latency against its latency SLO.
//
// # Model
//
// Each shard has an item arrival rate, a per-item cost (processing time on one
// core at speed 1) and an SLO. Items arrive deterministically (every 1/rate) or
// as a Poisson process drawn from a math/rand/v2 PCG seeded with Config.Seed and
// the shard id, so runs are repeatable and one shard's arrivals do not depend on
// the others'. Arrived items wait in the shard's FIFO queue. Whenever a core is
// idle, the discipline picks the shard whose queue head runs next:
//
//   - llf (least laxity first, as in Cameo, Xu et al., NSDI'21): laxity =
//     arrival + SLO − now − cost; the smallest laxity runs first;
//   - fifo (the baseline): the oldest arrival on the host runs first.
//
// Within a shard items always start in arrival order (Cameo keeps per-operator
// order): only a queue head is ever eligible, and since all items of a shard
// share the shard's SLO and cost, the head is also the shard's item of smallest
// laxity. "now" is common to every candidate, so the LLF order is the order of
// arrival + SLO − cost and a heap of shards keyed by their head's key gives the
// next item in O(log n) per item. Ties go to the shard added first.
//
// Execution is non-preemptive per item: a started item holds its core for
// cost/speed. Items are meant to be short (the synthetic driver splits a shard's
// work into at most max_item_rate items per second), so the blocking a tight
// shard suffers behind a started item is at most one item's cost. Items of one
// shard may run on several cores at once (a shard's load may exceed one core).
//
// # Measurement
//
// An item's latency is completion − arrival (queueing plus service). Each shard
// keeps a sliding-window histogram: 4 slots of Window/4, each with log-linear
// buckets (16 per power of two above 1.024µs, up to about 18 minutes), so the
// window covers the last ¾·Window to Window and memory per shard is fixed
// (4 × 448 counters). Percentiles are the upper edge of the bucket holding the
// rank, so a reported p99 is never below the true one and at most 1/16 (+1µs)
// above it. An item misses its SLO when its latency exceeds the SLO; misses are
// counted over the shard's life and per window.
//
// # Time and bounds
//
// The core never reads a clock: Advance(to) processes every arrival and
// completion up to to. Its own timeline counts nanoseconds from the start given
// to New; an Advance that jumps more than MaxStep ahead simulates only the last
// MaxStep of the jump and cuts the rest out, as if the host had been paused, so
// a late caller cannot trigger unbounded work. Queued items are capped host-wide
// at MaxQueued: an arrival that finds the host full is dropped and counted
// (Stats.Dropped). The accounting invariant, checked by the property tests, is
// arrived = completed + running + queued + dropped (+ the items discarded with
// a removed shard, which leave with its stats).
//
// A Core is not safe for concurrent use; the synthetic driver serialises it.
package exec
