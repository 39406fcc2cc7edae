// Package balancer decides, for one tier, which child each shard should live on. It
// is a pure library: no I/O, no goroutines, no clock reads, no global randomness.
// Inputs are children, shards, the current assignment, in-flight moves, constraints
// and weighted goals; the output is a plan whose every move says why.
package balancer
