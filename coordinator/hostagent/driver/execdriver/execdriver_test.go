package execdriver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/hostagent"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/internal/testutil"
)

var ctx = context.Background()

// sup runs this test binary as the supervisor (TestMain).
var sup []string

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "supervise" {
		os.Exit(Supervise(os.Args[2:], os.Stderr))
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sup = []string{self, "supervise"}
	os.Exit(m.Run())
}

func sp(id string) interfaces.Shard {
	return interfaces.Shard{ID: interfaces.ShardID(id), Job: "job-" + id}
}

func waitFor(t *testing.T, what string, f func() bool) {
	t.Helper()
	testutil.Until(t, what, 10*time.Second, f)
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func TestEnvStopAndMeasure(t *testing.T) {
	dir := t.TempDir()
	d, err := New(Config{Supervisor: sup,
		Command: []string{"sh", "-c", `echo "$STRATA_SHARD_ID $STRATA_SHARD_EPOCH $STRATA_JOB $EXTRA" > "$OUT/$STRATA_SHARD_ID.env"; exec sleep 60`},
		Env:     []string{"OUT=" + dir, "EXTRA=x1"},
		Clock:   hostagent.WallClock{},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Start(ctx, sp("s1"), 7); err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx, sp("s1"), 7); err != nil {
		t.Fatalf("same-epoch start: %v", err)
	}
	if err := d.Start(ctx, sp("s1"), 8); !errors.Is(err, interfaces.ErrConflict) {
		t.Fatalf("other-epoch start: %v", err)
	}
	envFile := filepath.Join(dir, "s1.env")
	waitFor(t, "env file", func() bool { b, _ := os.ReadFile(envFile); return strings.HasSuffix(string(b), "\n") })
	b, _ := os.ReadFile(envFile)
	if got := strings.TrimSpace(string(b)); got != "s1 7 job-s1 x1" {
		t.Fatalf("child saw env %q", got)
	}
	pid, ok := d.Pid("s1")
	if !ok || !alive(pid) {
		t.Fatal("no live pid")
	}
	m := d.Measure()["s1"]
	if m.Load.Mem <= 0 || m.Load.Tasks != 1 {
		t.Fatalf("sleep's measured load: %+v (want RSS > 0)", m.Load)
	}
	if err := d.Stop("s1"); err != nil {
		t.Fatal(err)
	}
	if alive(pid) || d.Kills() != 0 {
		t.Fatalf("after SIGTERM stop: alive=%v kills=%d", alive(pid), d.Kills())
	}
	if err := d.Stop("s1"); !errors.Is(err, interfaces.ErrNotFound) {
		t.Fatalf("second stop: %v", err)
	}
	if len(d.Measure()) != 0 {
		t.Fatal("stopped shard measured")
	}
}

func TestStopEscalatesToKill(t *testing.T) {
	d, err := New(Config{Supervisor: sup,
		Command:     []string{"sh", "-c", `trap "" TERM; while :; do sleep 0.05; done`},
		StopTimeout: 300 * time.Millisecond,
		Clock:       hostagent.WallClock{},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Start(ctx, sp("s1"), 1); err != nil {
		t.Fatal(err)
	}
	pid, _ := d.Pid("s1")
	time.Sleep(100 * time.Millisecond) // let the shell install its trap
	if err := d.Stop("s1"); err != nil {
		t.Fatal(err)
	}
	if d.Kills() != 1 || alive(pid) {
		t.Fatalf("kills=%d alive=%v, want SIGKILL to have ended it", d.Kills(), alive(pid))
	}
}

func TestBusyLoopCPU(t *testing.T) {
	d, err := New(Config{Supervisor: sup, Command: []string{"sh", "-c", "while :; do :; done"}, Clock: hostagent.WallClock{}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	idle, _ := New(Config{Supervisor: sup, Command: []string{"sleep", "60"}, Clock: hostagent.WallClock{}})
	defer idle.Close()
	if err := d.Start(ctx, sp("busy"), 1); err != nil {
		t.Fatal(err)
	}
	if err := idle.Start(ctx, sp("idle"), 1); err != nil {
		t.Fatal(err)
	}
	_, _ = d.Measure(), idle.Measure()
	// Wait until the busy loop has used 50ms of CPU (however contended the
	// machine is), then the measured rate must be > 0 and about at most the one
	// core a single-threaded shell can use (1.5 allows for the 10ms tick
	// granularity over a ≥50ms window). A settled sleep accrues no CPU at all.
	// Counted from after the first Measure: the loop may have used 50ms
	// before it already (idle's start, under its supervisor, takes a while).
	pid, _ := d.Pid("busy")
	base, err := ReadCPUTicks("/proc", pid)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "busy loop CPU", func() bool { n, err := ReadCPUTicks("/proc", pid); return err == nil && n >= base+5 })
	if c := d.Measure()["busy"].Load.CPU; c <= 0 || c > 1.5 {
		t.Fatalf("busy loop measured %.3f cores", c)
	}
	_ = idle.Measure()
	time.Sleep(200 * time.Millisecond)
	if c := idle.Measure()["idle"].Load.CPU; c != 0 {
		t.Fatalf("sleep measured %.3f cores", c)
	}
}

func TestExitedOnItsOwn(t *testing.T) {
	d, _ := New(Config{Supervisor: sup, Command: []string{"true"}, Clock: hostagent.WallClock{}})
	defer d.Close()
	if err := d.Start(ctx, sp("s"), 1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "exit", func() bool { return d.Exited("s") })
	if len(d.Measure()) != 0 {
		t.Fatal("exited process measured")
	}
	if err := d.Start(ctx, sp("s"), 2); err != nil {
		t.Fatalf("restart after exit: %v", err)
	}
}

func TestConfigAndParsers(t *testing.T) {
	for name, c := range map[string]Config{
		"exec.command":      {Supervisor: sup, Clock: hostagent.WallClock{}},
		"exec.supervisor":   {Command: []string{"x"}, Clock: hostagent.WallClock{}},
		"exec.env_pass[0]":  {Supervisor: sup, Command: []string{"x"}, Clock: hostagent.WallClock{}, EnvPass: []string{"A=B"}},
		"exec.env[1]":       {Supervisor: sup, Command: []string{"x"}, Clock: hostagent.WallClock{}, Env: []string{"A=B", "STRATA_SHARD_EPOCH=9"}},
		"exec.clock":        {Supervisor: sup, Command: []string{"x"}},
		"exec.env[0]":       {Supervisor: sup, Command: []string{"x"}, Clock: hostagent.WallClock{}, Env: []string{"NOEQUALS"}},
		"exec.stop_timeout": {Supervisor: sup, Command: []string{"x"}, Clock: hostagent.WallClock{}, StopTimeout: -1},
	} {
		if _, err := New(c); !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
	d, _ := New(Config{Supervisor: sup, Command: []string{"/nonexistent/bin"}, Clock: hostagent.WallClock{}})
	if err := d.Start(ctx, sp("s"), 1); err == nil || !strings.Contains(err.Error(), "start shard s") {
		t.Fatalf("missing binary: %v", err)
	}
	stat := "123 (a (weird) name) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17"
	if v, err := parseStat(stat); err != nil || v != 11+12+13+14 {
		t.Fatalf("parseStat = %d, %v", v, err)
	}
	for _, bad := range []string{"no paren", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 10 -1 12 13 14 15"} {
		if _, err := parseStat(bad); !errors.Is(err, interfaces.ErrInvalid) {
			t.Errorf("parseStat(%q): %v", bad, err)
		}
	}
	if v, err := parseStatus(strings.NewReader("Name:\tx\nVmRSS:\t  2048 kB\n")); err != nil || v != 2048*1024 {
		t.Fatalf("parseStatus = %d, %v", v, err)
	}
	if _, err := parseStatus(strings.NewReader("VmRSS: 12 MB\n")); !errors.Is(err, interfaces.ErrInvalid) {
		t.Fatalf("bad unit: %v", err)
	}
}

// TestStopTakesTheWholeGroup: a shard whose leader process exited on its own
// but left a member of its group running is stopped with that member (Stop
// used to return at once, and the member ran on after the shard was placed
// elsewhere).
func TestStopTakesTheWholeGroup(t *testing.T) {
	d, err := New(Config{Supervisor: sup, Command: []string{"sh", "-c", "sleep 30 & exit 0"}, Clock: hostagent.WallClock{}, StopTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx, sp("s1"), 1); err != nil {
		t.Fatal(err)
	}
	pgid, _ := d.Pid("s1")
	waitFor(t, "the leader exited", func() bool { return d.Exited("s1") })
	if err := d.Stop("s1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the group gone", func() bool { return syscall.Kill(-pgid, 0) != nil })
}

// TestNewReapsAPreviousRunsGroups: a shard process group a killed agent left
// (the parent-death signal reaches only its leader; here no one reaps it) is
// killed when the host's driver starts again; another host's is not.
func TestNewReapsAPreviousRunsGroups(t *testing.T) {
	host := fmt.Sprintf("reap-test-%d", os.Getpid())
	start := func(h string) int {
		cmd := exec.Command("sh", "-c", "sleep 30 & exec sleep 30")
		cmd.Env = append(os.Environ(), EnvHost+"="+h)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go cmd.Wait() //nolint:errcheck // reaped when killed
		return cmd.Process.Pid
	}
	mine, other := start(host), start(host+"-other")
	defer syscall.Kill(-other, syscall.SIGKILL) //nolint:errcheck
	defer syscall.Kill(-mine, syscall.SIGKILL)  //nolint:errcheck
	waitFor(t, "both groups running", func() bool {
		return syscall.Kill(-mine, 0) == nil && syscall.Kill(-other, 0) == nil
	})
	d, err := New(Config{Supervisor: sup, Command: []string{"true"}, Clock: hostagent.WallClock{}, Host: host})
	if err != nil {
		t.Fatal(err)
	}
	if d.Reaped != 1 {
		t.Errorf("reaped %d groups, want 1", d.Reaped)
	}
	waitFor(t, "this host's leftover group gone", func() bool { return syscall.Kill(-mine, 0) != nil })
	if syscall.Kill(-other, 0) != nil {
		t.Error("another host's group was killed")
	}
}

// leased is a context whose deadline is the lease a Start gets.
func leased(t *testing.T, d time.Duration) context.Context {
	c, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return c
}

func supPid(d *Driver, id interfaces.ShardID) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.procs[id].sup.Process.Pid
}

// TestSupervisorFencesAtTheLeaseEnd: with no renewal after the start, the
// supervisor stops the worker when the lease it started with ends (the agent
// did nothing), says so, and exits.
func TestSupervisorFencesAtTheLeaseEnd(t *testing.T) {
	d, err := New(Config{Supervisor: sup, Command: []string{"sleep", "600"}, Clock: hostagent.WallClock{}, StopTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	started := time.Now()
	// A lease long enough for the (race-built) supervisor to start on a busy
	// machine: Start fails when the lease ends first.
	if err := d.Start(leased(t, 1500*time.Millisecond), sp("s1"), 4); err != nil {
		t.Fatal(err)
	}
	pid, _ := d.Pid("s1")
	spid := supPid(d, "s1")
	waitFor(t, "the supervisor's fence", func() bool { return d.Exited("s1") })
	why, _ := d.ExitError("s1")
	if alive(pid) || alive(spid) || !strings.Contains(why, "its lease expired") || !strings.Contains(why, "signal: terminated") {
		t.Fatalf("worker alive=%v supervisor alive=%v, exit %q", alive(pid), alive(spid), why)
	}
	fenced := time.Now()
	time.Sleep(50 * time.Millisecond) // the agent comes round to the stop later
	if err := d.Stop("s1"); err != nil {
		t.Fatal(err)
	}
	// The stop is when the supervisor saw the worker end, not this Stop.
	if at, ok := d.StoppedAt("s1"); !ok || !at.Before(fenced) || !at.After(started) {
		t.Fatalf("StoppedAt = %v, %v; want between the start %v and the fence seen at %v", at, ok, started, fenced)
	}
}

// TestRenewalMovesTheDeadline: a renewal keeps the worker past the deadline
// it started with; a renewal that ends the lease stops it.
func TestRenewalMovesTheDeadline(t *testing.T) {
	d, err := New(Config{Supervisor: sup, Command: []string{"sleep", "600"}, Clock: hostagent.WallClock{}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	start := time.Now()
	if err := d.Start(leased(t, 1500*time.Millisecond), sp("s1"), 1); err != nil {
		t.Fatal(err)
	}
	d.RenewLease(time.Hour)
	// A start after a renewal takes the renewal's deadline, not ctx's.
	if err := d.Start(leased(t, 1500*time.Millisecond), sp("s2"), 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(start.Add(2 * time.Second)))
	for _, id := range []interfaces.ShardID{"s1", "s2"} {
		if pid, _ := d.Pid(id); d.Exited(id) || !alive(pid) {
			t.Fatalf("%s was stopped at the deadline it started with, though renewed", id)
		}
	}
	d.RenewLease(0)
	waitFor(t, "both fenced", func() bool { return d.Exited("s1") && d.Exited("s2") })
	for _, id := range []interfaces.ShardID{"s1", "s2"} {
		if why, _ := d.ExitError(id); !strings.Contains(why, "its lease expired") {
			t.Errorf("%s: %q", id, why)
		}
	}
}

// TestSupervisorEscalatesToKill: a worker that ignores SIGTERM is SIGKILLed
// stop_timeout after the lease's end.
func TestSupervisorEscalatesToKill(t *testing.T) {
	d, err := New(Config{Supervisor: sup, Command: []string{"sh", "-c", `trap "" TERM; echo ready; while :; do sleep 0.05; done`},
		Clock: hostagent.WallClock{}, StopTimeout: 200 * time.Millisecond, Output: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Start(leased(t, time.Hour), sp("s1"), 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // let the shell install its trap
	d.RenewLease(0)
	waitFor(t, "the worker killed", func() bool { return d.Exited("s1") })
	if why, _ := d.ExitError("s1"); !strings.Contains(why, "signal: killed") {
		t.Fatalf("exit %q, want SIGKILL after the ignored SIGTERM", why)
	}
}

// TestSupervisorGoesWithItsWorker: a worker that exits on its own takes its
// supervisor along (and the rest of its group), and the driver hears how it
// exited; a killed supervisor takes its worker.
func TestSupervisorGoesWithItsWorker(t *testing.T) {
	d, err := New(Config{Supervisor: sup, Command: []string{"sh", "-c", "sleep 30 & exit 3"}, Clock: hostagent.WallClock{}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Start(ctx, sp("s1"), 1); err != nil {
		t.Fatal(err)
	}
	pgid, _ := d.Pid("s1")
	spid := supPid(d, "s1")
	waitFor(t, "exit", func() bool { return d.Exited("s1") })
	if why, _ := d.ExitError("s1"); why != "the process exited on its own: exit status 3" {
		t.Fatalf("exit %q", why)
	}
	waitFor(t, "the group gone", func() bool { return syscall.Kill(-pgid, 0) != nil })
	if alive(spid) {
		t.Fatal("supervisor still alive")
	}

	d2, _ := New(Config{Supervisor: sup, Command: []string{"sleep", "600"}, Clock: hostagent.WallClock{}})
	defer d2.Close()
	if err := d2.Start(ctx, sp("s2"), 1); err != nil {
		t.Fatal(err)
	}
	pid, _ := d2.Pid("s2")
	if err := syscall.Kill(supPid(d2, "s2"), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the worker gone with its supervisor", func() bool { return d2.Exited("s2") && !alive(pid) })
	if why, _ := d2.ExitError("s2"); !strings.Contains(why, "supervisor process ended without reporting") {
		t.Fatalf("exit %q", why)
	}
}

// TestWorkersGetOnlyTheNamedEnvironment: of the agent's environment a worker
// sees only the variables env_pass names, plus env and the STRATA_ ones.
func TestWorkersGetOnlyTheNamedEnvironment(t *testing.T) {
	t.Setenv("STRATA_TEST_SECRET", "s3cret")
	t.Setenv("STRATA_TEST_PASSED", "yes")
	dir := t.TempDir()
	d, err := New(Config{Supervisor: sup, Command: []string{"sh", "-c", `env > "$OUT/env"; exec sleep 60`},
		EnvPass: []string{"STRATA_TEST_PASSED", "STRATA_TEST_UNSET"}, Env: []string{"OUT=" + dir},
		Clock: hostagent.WallClock{}, Host: "h-env"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Start(ctx, sp("s1"), 12); err != nil {
		t.Fatal(err)
	}
	var env map[string]string
	waitFor(t, "env file", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "env"))
		env = map[string]string{}
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, "="); ok {
				env[k] = v
			}
		}
		return env["STRATA_HOST"] != ""
	})
	want := map[string]string{"STRATA_TEST_PASSED": "yes", "OUT": dir, "STRATA_SHARD_ID": "s1", "STRATA_SHARD_EPOCH": "12", "STRATA_JOB": "job-s1", "STRATA_HOST": "h-env"}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	for _, k := range []string{"STRATA_TEST_SECRET", "STRATA_TEST_UNSET", "HOME"} {
		if _, ok := env[k]; ok {
			t.Errorf("the worker got %s", k)
		}
	}
}
