// Package synthetic is the built-in worker of the host agent: it "runs" shards by
// producing configurable, deterministic load, for demos, tests and benchmarks.
//
// A shard's base load is its spec (load vector and input rate) unless a Profile
// overrides it. Measure reads the injected clock once and computes each shard's
// load at that instant as
//
//	base × scale × (1 + Wave·sin(2π·t/Period + phase(shard))) × (1 + Noise·u)
//
// for cpu, net and rate (memory and tasks are base × scale), where phase and the
// noise draw u ∈ [-1, 1] come from a math/rand/v2 PCG seeded with the driver's
// seed, the shard id and the whole second of t: the same seed, shards and clock
// readings always give the same figures. Scale multiplies a shard's load (2 =
// "double"). The latency model reports p99 = BaseLatency × the same multiplier.
//
// # Deadline-aware execution
//
// With Config.Cores > 0 (the host's cpu capacity) the driver also runs its
// shards' pending work in the execution core of package exec and reports each
// shard's measured p99 latency instead of the model. The host has ceil(Cores)
// cores of speed Cores/ceil(Cores). A shard with input rate r and cpu c arrives
// as n = min(r, MaxItemRate) items per second (Poisson by default), each costing
// c/n seconds of one core, with the shard's LatencySLO as its deadline
// (DefaultSLO, 1s, orders shards without one). Discipline picks the next item:
// "llf" (default; least laxity first, as in Cameo) or "fifo"; execution is
// non-preemptive per item and keeps each shard's items in arrival order.
//
// The core runs on the driver's clock, read at the edge only: Start, Stop,
// Scale and SetProfile advance it to the clock's now before changing a shard,
// and Measure advances it to now, reports, then sets each shard's rate and cost
// for the next interval from its load at now (so wave, noise, scale and profile
// reach the executed work, piecewise constant between measurements). Stop
// discards the shard's queued and running items.
//
// A shard's reported LatencyP99 is the p99 of the items it completed in the
// last Window (10s by default; histogram bucket upper edge, ≤ 1/16 above the
// true value), or the age of its oldest queued item when that is larger. The
// BaseLatency model remains the fallback: for shards without input rate or cpu
// (they do not run in the core), and for a shard with nothing completed in the
// window and nothing waiting (just started, or idle). Load, Rate and InputRate
// stay the offered figures above. ExecStats exposes a shard's counters (SLO
// misses among them).
//
// The driver starts no goroutines.
package synthetic
