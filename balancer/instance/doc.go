// Package instance reads placement instances from files — the hosts of a
// fleet and the shards to place on them — so that `strata bench balance`,
// `strata bench hierarchy`, `strata plan` and the simulator can run on a real
// fleet rather than only on generated ones. It also generates instances
// shaped like real fleets (Fleet) for the benchmarks and property tests.
//
// # Schema
//
// An instance is a JSON file, or a directory holding hosts.csv and
// shards.csv. Both forms carry the same fields; docs/benchmarks.md
// ("Instances from files") documents them with examples, and
// testdata/ holds one of each.
//
// Hosts: id (unique), region and rack (optional labels), state (active,
// draining, failed; default active), labels (more key=value labels), the
// capacity of each named resource, and devices: a resource held as
// count × per-device capacity (gpu: 8 × 1.0), whose capacity is the
// product.
//
// Shards: id (unique), job, the load of each named resource (shards of one
// job may differ), state_bytes, and constraints: pin (a host id), allowed
// (host ids), region and rack (the host's labels must match), labels (more
// labels the host must have), anti_affinity ("group" or "group:limit", at
// most limit shards of the group per host, default 1), and current (the host
// the shard is on now, empty = unplaced).
//
// Decoding is strict: an unknown key or column, a number that is not a
// finite value ≥ 0, a repeated id or key, a load of a resource no host has,
// or a constraint naming a host that does not exist is an error that names
// the file, the line and the field. Nothing is half-loaded.
//
// Any resource name works: the instance's resources are the union of the
// hosts' capacities and devices, in the order cpu, mem, net, tasks, then the
// others sorted. View turns an instance into the interfaces.View every tier
// policy and balancer.FromView take.
//
// Load is the one function that opens files (for the commands); ReadJSON and
// ReadCSV take readers, and nothing here reads a clock or global randomness
// (Fleet's seed is a parameter).
package instance
