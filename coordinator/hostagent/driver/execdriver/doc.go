// Package execdriver runs each shard as an operating-system process started from a
// configured command, under a small supervisor process that holds the shard's
// lease.
//
// Supervisor. Start runs Config.Supervisor (strata: "strata supervise", a hidden
// subcommand; see Supervise), which starts the worker and watches it — the role
// containerd's shim or Nomad's executor plays. The supervisor holds the lease
// deadline: the agent passes it at start (Start's context deadline) and after
// every grant (RenewLease, driver.LeaseHolder) as a "deadline <ns>" line on a
// pipe, an absolute time on CLOCK_MONOTONIC. One clock for every process on the
// machine, never set or stepped: a renewal that reaches the supervisor late (the
// agent frozen between reading the clock and writing) renews nothing past the
// deadline the agent meant, which an "extend by D" message would. When the
// deadline passes without a renewal — the agent frozen by SIGSTOP, stuck, or
// gone — the supervisor fences the worker itself: SIGTERM to its process group,
// SIGKILL after StopTimeout, so the worker is dead within the lease plus the
// stop budget the parent waits for (StopBudget), whatever the agent does. It
// fences too when the pipe reaches its end (the agent exited) or on SIGTERM,
// SIGINT or SIGHUP. When the worker exits, the supervisor SIGKILLs what is left
// of its group, reports how the worker exited and exits itself; the driver's
// ExitError says so.
//
// Environment. A worker gets only the variables of the agent's environment that
// Config.EnvPass names, plus Config.Env, plus STRATA_SHARD_ID,
// STRATA_SHARD_EPOCH, STRATA_JOB and STRATA_HOST (Config.Host). The command is
// looked up in the agent's PATH. STRATA_SHARD_EPOCH is the assignment's epoch:
// the fencing token a sink must check (it grows with every new owner of the
// shard; a sink that has seen epoch N refuses writes under an epoch below N, as
// Kafka refuses a producer's older epoch), so that a worker that outlives its
// lease anyway — a host frozen longer than its supervisor's fence can reach —
// cannot overwrite its successor's output.
//
// Process groups. The supervisor and the worker each run in their own process
// group. The worker has a parent-death signal of SIGKILL (it dies with its
// supervisor, which keeps the forking thread for its life: the signal follows
// the thread, not the process). The supervisor has none: it fences its worker
// when the agent's end of the control pipe closes, however the agent dies — a
// parent-death signal from the agent, whose threads are the Go runtime's,
// killed healthy supervisors when a thread ended (golang/go#27505). The kernel
// signals no one else,
// so New, with Config.Host set, kills every process group whose processes carry
// STRATA_HOST of this host (a previous run's leftovers; Driver.Reaped counts
// them): a restarted agent never finds an orphan still running a shard it
// believes fenced. Stop sends SIGTERM to the worker's group, waits
// Config.StopTimeout, then sends SIGKILL and waits for the exit; a group whose
// leader exited on its own is killed too.
//
// Measure reads /proc/<pid>/stat (utime+stime+cutime+cstime, in clock ticks of
// 1/100 s, the Linux USER_HZ) and /proc/<pid>/status (VmRSS) of the worker.
// CPU is reported in cores: the tick delta between two Measure calls divided by
// the wall time between them on the configured clock (the first call averages
// since start). Memory is the RSS in bytes; tasks is 1; network and rates are
// not measured (0). Only the group leader is measured: a command that forks
// long-lived children should exec into its worker.
//
// Goroutines: per running shard, one reading its supervisor's reports and then
// waiting for it (cmd.Wait), ending when the supervisor exits. The supervisor
// process has three: its loop, one reading the renewals, one waiting for the
// worker.
package execdriver
