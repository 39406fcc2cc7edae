package execdriver

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The supervisor's side of the pipes the driver opens for it.
const (
	controlFD = 3 // driver → supervisor: "deadline <ns>" lines
	statusFD  = 4 // supervisor → driver: "pid <n>", "error <text>", "exit <text>"
)

// monoNow reads CLOCK_MONOTONIC, in nanoseconds. It is one clock for every
// process on the machine (of one time namespace), never set and never
// stepped, so a deadline on it means the same to the agent and to its
// supervisors: a renewal that reaches a supervisor late renews nothing past
// the deadline the agent meant.
func monoNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("execdriver: clock_gettime(CLOCK_MONOTONIC): " + err.Error()) // Linux always has it
	}
	return ts.Nano()
}

// Supervise is the supervisor process of one shard ("strata supervise", a
// hidden subcommand; see the package documentation). args are its flags,
// then "--" and the worker's absolute path and arguments. It returns the
// process's exit code: 0 once the worker has exited and been reported, 1 when
// the worker could not be started, 2 for bad arguments.
//
// Files 3 and 4 are the pipes from and to the driver. On 3 it reads
// "deadline <ns>" lines: the lease now ends at <ns> on CLOCK_MONOTONIC (a
// later line replaces an earlier one, a past deadline ends the lease at
// once). On 4 it writes "pid <n>" once the worker runs (or "error <text>"),
// then "exit <ns> <text>" when the worker has exited: when it saw the exit,
// on CLOCK_MONOTONIC, and how ("" for status 0).
//
// When the lease ends, when file 3 reaches its end (the agent exited), or on
// SIGTERM, SIGINT or SIGHUP, it fences: SIGTERM to the worker's process
// group, SIGKILL after --stop-timeout. Renewals after that change nothing.
// When the worker exits, for whatever reason, it SIGKILLs what is left of
// the worker's group, reports, and exits.
func Supervise(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("supervise", flag.ContinueOnError)
	fs.SetOutput(stderr)
	deadline := fs.Int64("deadline", 0, "lease deadline on CLOCK_MONOTONIC, in ns; 0 = no lease (never fences on time)")
	stopTimeout := fs.Duration("stop-timeout", 5*time.Second, "how long a fence waits after SIGTERM before SIGKILL")
	agentPid := fs.Int("agent-pid", 0, "the agent's pid: exit at once if the parent is another process (the agent died before this started)")
	shard := fs.String("shard", "", "the shard's id, for messages")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	argv := fs.Args()
	if len(argv) == 0 || !strings.HasPrefix(argv[0], "/") {
		fmt.Fprintln(stderr, "strata supervise: want -- and the worker's absolute path and arguments")
		return 2
	}
	if *stopTimeout <= 0 {
		fmt.Fprintf(stderr, "strata supervise: --stop-timeout: must be > 0 (got %s)\n", *stopTimeout)
		return 2
	}
	s := &supervisor{shard: *shard, stopTimeout: *stopTimeout, stderr: stderr,
		control: os.NewFile(controlFD, "control"), status: os.NewFile(statusFD, "status")}
	defer s.status.Close()
	// Signals first: a SIGTERM from now on fences the worker instead of
	// killing the supervisor (whose death would SIGKILL the worker at once).
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if *agentPid != 0 && os.Getppid() != *agentPid {
		s.report("error the agent (pid " + strconv.Itoa(*agentPid) + ") exited before the supervisor started")
		return 1
	}
	return s.run(argv, *deadline, sigs)
}

type supervisor struct {
	shard       string
	stopTimeout time.Duration
	stderr      io.Writer
	control     *os.File
	status      *os.File
}

func (s *supervisor) report(line string) {
	_, _ = io.WriteString(s.status, line+"\n")
}

func (s *supervisor) run(argv []string, deadline int64, sigs <-chan os.Signal) int {
	// The worker's parent-death signal fires when the thread that forks it
	// ends, not the process: this goroutine keeps its thread for the
	// supervisor's life, so only the supervisor's death kills the worker.
	runtime.LockOSThread()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = os.Environ()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
	// The worker's own group (Stop and the fence signal it as a whole), and
	// it dies with the supervisor.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if deadline != 0 && deadline <= monoNow() {
		s.report("error the lease ended before the worker started")
		return 1
	}
	if err := cmd.Start(); err != nil {
		s.report("error " + oneLine(err.Error()))
		return 1
	}
	pgid := cmd.Process.Pid
	s.report("pid " + strconv.Itoa(pgid))

	renew := make(chan int64)
	go func() {
		defer close(renew)
		sc := bufio.NewScanner(s.control)
		for sc.Scan() {
			v, ok := strings.CutPrefix(sc.Text(), "deadline ")
			if n, err := strconv.ParseInt(v, 10, 64); ok && err == nil {
				renew <- n
			}
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	timer := time.NewTimer(time.Hour)
	setDeadline := func(ns int64) {
		if ns == 0 {
			timer.Stop()
			return
		}
		timer.Reset(max(0, time.Duration(ns-monoNow())))
	}
	setDeadline(deadline)
	fenced := ""
	var kill <-chan time.Time
	fence := func(why string) {
		if fenced != "" {
			return
		}
		fenced = why
		timer.Stop()
		fmt.Fprintf(s.stderr, "strata supervise: shard %s: %s: stopping its worker (pid %d; SIGTERM, SIGKILL after %s)\n", s.shard, why, pgid, s.stopTimeout)
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		kill = time.After(s.stopTimeout)
	}
	for {
		select {
		case ns, ok := <-renew:
			if !ok {
				renew = nil
				fence("the agent closed the control pipe (it exited)")
				continue
			}
			if fenced == "" {
				setDeadline(ns)
			}
		case <-timer.C:
			fence("its lease expired (the agent did not renew it)")
		case sig := <-sigs:
			fence("got " + sig.String())
		case <-kill:
			kill = nil
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		case err := <-exited:
			at := monoNow()
			// Whatever of its group is left goes with it: nothing supervises
			// it any more.
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			why := ""
			if err != nil {
				why = err.Error()
			}
			if fenced != "" {
				if why == "" {
					why = "exit status 0"
				}
				why = "the supervisor stopped it, " + fenced + ": " + why
			}
			s.report("exit " + strconv.FormatInt(at, 10) + " " + oneLine(why))
			return 0
		}
	}
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

// errSupervisor marks a supervisor that ended without reporting its worker's
// exit (killed): the worker died with it (its parent-death signal).
var errSupervisor = errors.New("the shard's supervisor process ended without reporting")
