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
// "double"). p99 latency is BaseLatency × the same multiplier.
//
// The driver starts no goroutines.
package synthetic
