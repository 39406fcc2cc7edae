// Package hierbench measures what the hierarchy buys: one reproducible instance
// (N shards with Zipf-skewed loads, M hosts with heterogeneous capacities spread
// over R regions) is placed and then rebalanced twice — once through the
// global → region hierarchy and once through one flat balancer over all M hosts —
// and both are timed and scored. It backs `strata bench hierarchy`.
//
// # The instance
//
// balancer.Generate builds the shards and hosts (resources cpu and mem; loads
// Zipf over ranks, largest/smallest = 20×; host capacities ±20% per resource;
// mean utilization 0.6). Host h belongs to region h·R/M (contiguous blocks of
// ⌊M/R⌋ or ⌈M/R⌉ hosts). A region's capacity is the sum of its hosts'.
// Every shard starts unplaced.
//
// # The two rounds
//
//  1. place: every shard is placed from nothing;
//  2. rebalance: a seeded load change (a fraction of the shards, 5% by default,
//     get each resource's load multiplied by a factor drawn uniformly from
//     [0.5, 2]), then one more round from the placement of round 1.
//
// Hierarchy: in each round the global tier plans the shards onto the regions
// (children = regions) with a tier policy built from the tiers registry, through
// interfaces.Policy.Plan on an interfaces.View, exactly as a global daemon does;
// the plan is applied; then every region plans its own shards onto its own
// hosts (shards that arrived from another region are unplaced in its view;
// shards that stayed keep their host), with a worker pool of Workers goroutines
// (GOMAXPROCS by default) — the region daemons run side by side too.
//
// Flat: the same instance, the same load change and the same two rounds through
// one policy whose children are all M hosts.
//
// Every region's plan is timed too: per round, the global tier's time plus the
// slowest region's is the critical path — how long the hierarchy would take
// with every region on its own machine, as deployed, rather than on the pool.
// Result.Hier.Rounds has it per round; CriticalPathSpeedup compares it with
// the flat run's time. A second clock (Config.CPU, the process's CPU time)
// is read at the same points for each side's CPU seconds and their ratio.
//
// The policies and their configurations come from the caller: `strata bench
// hierarchy` passes the tier daemons' own defaults (tierd.Config.Defaults) at
// both tiers and in the flat run, and the full-scan comparison only behind
// --full-scan.
//
// # Quality
//
// max_over_lb is, per resource, the busiest host's utilization divided by the
// lower bound of the flat instance after the load change (balancer.LowerBound:
// max(Σload/Σcapacity, max shard load / largest capacity)); the figure reported
// is the worse of cpu and mem. moves counts the shards whose host changed in the
// rebalance round; placements (round 1) are N for both and reported apart.
//
// The package never reads a clock: Config.Now and Config.CPU time the runs, and the flat run's time budget comes in as the
// context (a caller that wants it to start with the flat run cancels the
// context from Config.Phase's "flat place").
// Everything except the seconds is deterministic for a seed.
package hierbench
