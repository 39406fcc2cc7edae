// Package sim is the what-if simulator: it runs the same tier policies, balancer and
// control loop as the daemons on a virtual clock, with Raft and gRPC replaced by
// direct calls through the same contracts. Runs are seeded and repeatable.
//
// The pieces:
//
//   - scenario.go: scenario files (YAML, unknown keys rejected, errors name the
//     line and key) — topology, workload, events, policies, assertions.
//   - model.go, replay.go: topology and workload generators (heterogeneous hosts,
//     Zipf/uniform shard sizes, diurnal cycles, steps, spikes, hot shards, jobs
//     arriving and leaving), replay of a per-shard load CSV and of a real arrival
//     series.
//   - events.go: the discrete-event queue, ordered by (virtual time, sequence),
//     and VirtualClock, an interfaces.Clock advanced with Set, for code that
//     needs a Clock on virtual time (the engine itself gives policies the
//     virtual time as View.Now, Epoch + t).
//   - engine.go: the tick loop over dense arrays (loads, host sums, M/M/1
//     latency, backlog), metrics and assertions.
//   - rounds.go: the hierarchy — a global tier instance over regions, a region
//     tier instance per region, and with the chain [global, region, rack, host]
//     a rack tier instance per rack (regions then place onto racks) — building
//     interfaces.View values, integration modes, and applying accepted moves
//     with their transfer time.
//   - rounds.go also runs each tier instance's control round: the daemons'
//     own, coordinator/tiercore.Round (controller, control policies, solve,
//     screen, admit, verify), with the view as the state it verifies against
//     and the accepted moves applied with their transfer time; control.go
//     keeps the failover timing and the resource vector helpers.
//   - report.go: table, JSON, CSV and a self-contained HTML report with SVG plots.
//   - live.go: plans against a live cluster ("strata plan --scenario") —
//     ParsePlan turns a plan file and a LiveState (hosts, shards, assignment)
//     into a scenario that starts from the live assignment; FirstMoves lists
//     the moves of its first control interval.
//
// See docs/simulation.md for the file format, the models and the scenario library
// in sim/scenarios.
package sim
