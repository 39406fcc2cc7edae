// Package ledger records what host agents actually ran and checks the safety rules
// of the shard-assignment protocol (coordinator/tierd, "Moves and the safety
// rules": one owner per shard at a time, epochs that never go back) against those
// records.
//
// Every host agent appends one JSON object per line to its own ledger file:
//
//	{"seq":7,"host":"h1","shard":"s1","epoch":3,"event":"start","ts":1764446400000000000}
//
// seq is a per-file sequence that grows by one per line (it continues after a
// restart); ts is the wall time in nanoseconds from the agent's injected clock.
// The agent writes "start" just before it asks its driver to start a shard and
// "stop" just after the driver reports the shard stopped, so every recorded
// interval covers the real one. A driver that saw the shard's process end
// before the agent's stop (the exec driver's supervisor fences its worker at
// the lease's end even while the agent is frozen) gives that time instead,
// still after the real end: the stop's ts is then earlier than the line's
// place in the file suggests. A "stop" with "recovered":true is written when an
// agent restarts and finds a start with no stop: its ts is the earliest moment
// the shard is known to have stopped (the persisted lease deadline, or the
// restart time when that is earlier), because the shard died with the agent or
// would have been fenced at the deadline.
//
// Lines are written with one write(2) each and not fsynced: they survive a crash
// of the process, not of the machine. An append the disk takes only part of (a
// full disk) is cut off again, so the next line does not continue the fragment.
// After a crash of the machine the final line may be cut short or be zeros:
// a final line without its newline that does not decode is torn (TornLine);
// Open cuts it off and reports it (Writer.Torn), ReadFile leaves it out and
// Check lists it in Result.Torn. A final event that is whole but lacks its
// newline is kept and Open adds the newline. Any other malformed line is an
// error naming the file and the line.
//
// Check merges the ledgers of all hosts and reports:
//   - overlap: one shard running on two hosts in intervals that intersect (or
//     started twice on one host without a stop in between);
//   - epoch: a start whose epoch is lower than an earlier start of the same shard
//     on any host, or equal to an earlier start on another host;
//   - order: malformed histories (a stop with no start, a sequence gap);
//   - missing: with an expected shard set, shards not running at the end.
//
// Timestamps of different hosts are compared directly, so the check assumes their
// clocks agree (true for the e2e tests, which run every host on one machine).
package ledger
