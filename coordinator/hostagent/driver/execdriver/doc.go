// Package execdriver runs each shard as an operating-system process started from a
// configured command.
//
// The process gets the agent's environment plus Config.Env plus
// STRATA_SHARD_ID, STRATA_SHARD_EPOCH, STRATA_JOB and STRATA_HOST (Config.Host).
// It runs in its own process group with a parent-death signal of SIGKILL, so
// the group's leader dies with the agent; the kernel signals no one else, so
// New, with Config.Host set, kills every process group whose processes carry
// STRATA_HOST of this host (a previous run's leftovers; Driver.Reaped counts
// them): a restarted agent never finds an orphan still running a shard it
// believes fenced. Stop sends SIGTERM to the group, waits Config.StopTimeout,
// then sends SIGKILL and waits for the exit; a group whose leader exited on its
// own is killed too.
//
// Measure reads /proc/<pid>/stat (utime+stime+cutime+cstime, in clock ticks of
// 1/100 s, the Linux USER_HZ) and /proc/<pid>/status (VmRSS). CPU is reported in
// cores: the tick delta between two Measure calls divided by the wall time
// between them on the configured clock (the first call averages since start).
// Memory is the RSS in bytes; tasks is 1; network and rates are not measured
// (0). Only the group leader is measured: a command that forks long-lived
// children should exec into its worker.
//
// Goroutines: one per running process, blocked in cmd.Wait, ending when the
// process exits.
package execdriver
