package execdriver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/strata-sched/strata/coordinator/hostagent/driver"
	"github.com/strata-sched/strata/interfaces"
)

// Environment variables every shard process receives.
const (
	EnvShardID    = "STRATA_SHARD_ID"
	EnvShardEpoch = "STRATA_SHARD_EPOCH"
	EnvJob        = "STRATA_JOB"
	// EnvHost names the host whose driver started the process (Config.Host).
	EnvHost = "STRATA_HOST"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times on Linux.
const clockTicks = 100

// Config configures the driver.
type Config struct {
	// Command is the program and its arguments, started once per shard.
	Command []string
	// Supervisor is the argv of the supervisor program, which runs each
	// worker and holds its lease (Supervise; strata: the strata binary and
	// "supervise"). Required.
	Supervisor []string
	// EnvPass names the variables of the agent's environment the workers
	// get (PATH, TZ, ...); no other variable of the agent's reaches them.
	EnvPass []string
	// Env is added to every worker's environment (KEY=VALUE).
	Env []string
	// Dir is the working directory ("" = the agent's).
	Dir string
	// Output receives the processes' stdout and stderr (nil = discarded).
	Output io.Writer
	// StopTimeout is how long Stop waits after SIGTERM before SIGKILL.
	// Default 5s.
	StopTimeout time.Duration
	// Clock times CPU measurements and the stop timeout.
	Clock interfaces.Clock
	// ProcRoot is where /proc is mounted (tests); default "/proc".
	ProcRoot string
	// Host is the host's ID. Every process gets it as STRATA_HOST, and New
	// kills the process groups of processes that carry it: those a previous
	// run of this host left when it was killed (the kernel's parent-death
	// signal reaches a group's leader only). "" turns both off.
	Host string
}

type proc struct {
	sup     *exec.Cmd // the supervisor
	pid     int       // the worker's pid, and its process group's id
	ctrl    *os.File  // to the supervisor: lease renewals
	epoch   interfaces.Epoch
	done    chan struct{}
	waitErr error // how the worker exited, set before done is closed
	// exitedAt is when the supervisor saw the worker exit (on Config.Clock;
	// zero if it did not say), set before done is closed.
	exitedAt time.Time
	started  time.Time
	// last CPU sample
	lastTicks uint64
	lastAt    time.Time
	sampled   bool
}

// Driver is the exec driver. It is safe for concurrent use.
type Driver struct {
	cfg   Config
	mu    sync.Mutex
	procs map[interfaces.ShardID]*proc
	kills int
	// leased and leaseMono: the last RenewLease's deadline (CLOCK_MONOTONIC).
	leased    bool
	leaseMono int64
	// stoppedAt: per shard, when the worker of its last Stop had ended, if
	// it had ended before that Stop (StoppedAt).
	stoppedAt map[interfaces.ShardID]time.Time
	// Reaped is how many process groups a previous run of this host left
	// that New killed (Config.Host).
	Reaped int
}

var _ driver.Driver = (*Driver)(nil)
var _ driver.Closer = (*Driver)(nil)
var _ driver.LeaseHolder = (*Driver)(nil)

// New returns an exec driver.
func New(cfg Config) (*Driver, error) {
	if len(cfg.Command) == 0 || cfg.Command[0] == "" {
		return nil, &interfaces.FieldError{Field: "exec.command", Rule: "is required"}
	}
	if cfg.Clock == nil {
		return nil, &interfaces.FieldError{Field: "exec.clock", Rule: "is required"}
	}
	if len(cfg.Supervisor) == 0 || cfg.Supervisor[0] == "" {
		return nil, &interfaces.FieldError{Field: "exec.supervisor", Rule: "is required"}
	}
	if err := CheckEnv(cfg.Env, cfg.EnvPass); err != nil {
		return nil, err
	}
	if cfg.StopTimeout < 0 || cfg.StopTimeout > driver.MaxStopTimeout {
		return nil, &interfaces.FieldError{Field: "exec.stop_timeout", Rule: "must be in [0, " + driver.MaxStopTimeout.String() + "] (the parent waits for it before moving a silent host's shards)", Value: cfg.StopTimeout.String()}
	}
	if cfg.StopTimeout == 0 {
		cfg.StopTimeout = 5 * time.Second
	}
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	d := &Driver{cfg: cfg, procs: map[interfaces.ShardID]*proc{}, stoppedAt: map[interfaces.ShardID]time.Time{}}
	if cfg.Host != "" {
		d.Reaped = d.reapOrphans()
	}
	return d, nil
}

// CheckEnv checks Config.Env (KEY=VALUE, not a variable the driver sets)
// and Config.EnvPass (variable names, not one the driver sets); errors name
// the field as exec.env[i] or exec.env_pass[i].
func CheckEnv(env, pass []string) error {
	for i, kv := range env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return &interfaces.FieldError{Field: fmt.Sprintf("exec.env[%d]", i), Rule: "must be KEY=VALUE", Value: strconv.Quote(kv)}
		}
		if reserved(k) {
			return &interfaces.FieldError{Field: fmt.Sprintf("exec.env[%d]", i), Rule: "must not set " + k + " (the driver sets it)", Value: strconv.Quote(kv)}
		}
	}
	for i, k := range pass {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return &interfaces.FieldError{Field: fmt.Sprintf("exec.env_pass[%d]", i), Rule: "must be a variable name (no = or NUL)", Value: strconv.Quote(k)}
		}
		if reserved(k) {
			return &interfaces.FieldError{Field: fmt.Sprintf("exec.env_pass[%d]", i), Rule: "must not name " + k + " (the driver sets it)", Value: strconv.Quote(k)}
		}
	}
	return nil
}

// reserved reports whether k is one of the variables the driver sets.
func reserved(k string) bool {
	switch k {
	case EnvShardID, EnvShardEpoch, EnvJob, EnvHost:
		return true
	}
	return false
}

// reapOrphans kills the process group of every process whose environment
// says it was started for this host (STRATA_HOST), other than this process's
// own group, and returns how many groups it killed. Processes it cannot read
// (another user's) are skipped.
func (d *Driver) reapOrphans() int {
	entries, err := os.ReadDir(d.cfg.ProcRoot)
	if err != nil {
		return 0
	}
	mark := []byte(EnvHost + "=" + d.cfg.Host + "\x00")
	self := syscall.Getpgrp()
	killed := map[int]bool{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join(d.cfg.ProcRoot, e.Name(), "environ"))
		if err != nil || !bytes.Contains(append([]byte{0}, env...), append([]byte{0}, mark...)) {
			continue
		}
		pgid, err := syscall.Getpgid(pid)
		if err != nil || pgid == self || killed[pgid] {
			continue
		}
		if syscall.Kill(-pgid, syscall.SIGKILL) == nil {
			killed[pgid] = true
		}
	}
	return len(killed)
}

// Start starts the command for spec under epoch, under its supervisor. The
// lease it holds ends at the last RenewLease's deadline, or, before any,
// at ctx's deadline (none without one).
func (d *Driver) Start(ctx context.Context, spec interfaces.Shard, epoch interfaces.Epoch) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p, ok := d.procs[spec.ID]; ok {
		select {
		case <-p.done: // exited on its own: start afresh
			delete(d.procs, spec.ID)
		default:
			if p.epoch == epoch {
				return nil
			}
			return fmt.Errorf("exec: shard %s runs under epoch %d, asked to start under %d: %w", spec.ID, p.epoch, epoch, interfaces.ErrConflict)
		}
	}
	// Looked up here, in the agent's PATH: the worker's environment need
	// not have one.
	path, err := exec.LookPath(d.cfg.Command[0])
	if err == nil {
		path, err = filepath.Abs(path)
	}
	if err != nil {
		return fmt.Errorf("exec: start shard %s: %w", spec.ID, err)
	}
	var deadline int64
	switch dl, ok := ctx.Deadline(); {
	case d.leased:
		deadline = d.leaseMono
	case ok:
		deadline = monoNow() + int64(time.Until(dl))
	}
	p, err := d.supervise(ctx, spec, epoch, path, deadline)
	if err != nil {
		return fmt.Errorf("exec: start shard %s: %w", spec.ID, err)
	}
	d.procs[spec.ID] = p
	return nil
}

// supervise starts the supervisor of spec's worker and waits until it says
// that the worker runs (or why not).
func (d *Driver) supervise(ctx context.Context, spec interfaces.Shard, epoch interfaces.Epoch, path string, deadline int64) (*proc, error) {
	ctrlR, ctrlW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	statR, statW, err := os.Pipe()
	if err != nil {
		ctrlR.Close()
		ctrlW.Close()
		return nil, err
	}
	args := append(append([]string{}, d.cfg.Supervisor[1:]...),
		"--deadline", strconv.FormatInt(deadline, 10),
		"--stop-timeout", d.cfg.StopTimeout.String(),
		"--agent-pid", strconv.Itoa(os.Getpid()),
		"--shard", string(spec.ID),
		"--", path)
	sup := exec.Command(d.cfg.Supervisor[0], append(args, d.cfg.Command[1:]...)...)
	sup.Dir = d.cfg.Dir
	sup.Env = d.env(spec, epoch)
	if d.cfg.Output != nil {
		sup.Stdout, sup.Stderr = d.cfg.Output, d.cfg.Output
	}
	sup.ExtraFiles = []*os.File{ctrlR, statW} // fds 3 and 4
	// Its own group, so that signals to the worker's group spare it. It
	// outlives the agent only until it sees the control pipe close (the
	// agent's end goes with the agent, however it dies), and then fences its
	// worker as at its lease's end. No parent-death signal: Linux sends it
	// when the *thread* that forked the child ends, and a Go program's
	// threads are the runtime's — one ending (a goroutine that exits while
	// locked to its thread, in any library) SIGKILLed every supervisor it
	// had started, with their workers: 9 shards of one chaos host at once,
	// 13 in the run (golang/go#27505).
	sup.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = sup.Start()
	ctrlR.Close()
	statW.Close()
	if err != nil {
		ctrlW.Close()
		statR.Close()
		return nil, fmt.Errorf("supervisor %s: %w", d.cfg.Supervisor[0], err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(statR)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	p := &proc{sup: sup, ctrl: ctrlW, epoch: epoch, done: make(chan struct{}), started: d.cfg.Clock.Now()}
	var first string
	select {
	case first = <-lines:
	case <-ctx.Done():
		_ = sup.Process.Kill() // the worker dies with it
	}
	pid, perr := strconv.Atoi(strings.TrimPrefix(first, "pid "))
	if !strings.HasPrefix(first, "pid ") || perr != nil || pid <= 0 {
		for range lines {
		}
		werr := sup.Wait()
		ctrlW.Close()
		statR.Close()
		switch {
		case strings.HasPrefix(first, "error "):
			return nil, errors.New(strings.TrimPrefix(first, "error "))
		case ctx.Err() != nil:
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("supervisor said %q (%v)", first, werr)
	}
	p.pid = pid
	go func() {
		why, reported := "", false
		for l := range lines {
			v, ok := strings.CutPrefix(l, "exit ")
			if !ok {
				continue
			}
			ns, rest, _ := strings.Cut(v, " ")
			why, reported = rest, true
			if at, err := strconv.ParseInt(ns, 10, 64); err == nil {
				// On the driver's clock, as of now; never before the start.
				t := d.cfg.Clock.Now().Add(-time.Duration(monoNow() - at))
				if t.Before(p.started) {
					t = p.started
				}
				p.exitedAt = t
			}
		}
		werr := sup.Wait()
		switch {
		case !reported:
			p.waitErr = fmt.Errorf("%w (%v)", errSupervisor, werr)
		case why != "":
			p.waitErr = errors.New(why)
		}
		ctrlW.Close()
		statR.Close()
		close(p.done)
	}()
	return p, nil
}

// env is the worker's environment: the agent's variables named in EnvPass,
// then Env, then the STRATA_ variables of the shard.
func (d *Driver) env(spec interfaces.Shard, epoch interfaces.Epoch) []string {
	var env []string
	for _, k := range d.cfg.EnvPass {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	env = append(env, d.cfg.Env...)
	env = append(env,
		EnvShardID+"="+string(spec.ID),
		EnvShardEpoch+"="+strconv.FormatUint(uint64(epoch), 10),
		EnvJob+"="+spec.Job)
	if d.cfg.Host != "" {
		env = append(env, EnvHost+"="+d.cfg.Host)
	}
	return env
}

// RenewLease moves the deadline of every supervisor's lease to left from now
// (driver.LeaseHolder), and of those Start starts from now on. A supervisor
// that does not take the line at once (its pipe full) misses it.
func (d *Driver) RenewLease(left time.Duration) {
	deadline := monoNow() + int64(left)
	d.mu.Lock()
	d.leased, d.leaseMono = true, deadline
	procs := make([]*proc, 0, len(d.procs))
	for _, p := range d.procs {
		procs = append(procs, p)
	}
	d.mu.Unlock()
	line := []byte("deadline " + strconv.FormatInt(deadline, 10) + "\n")
	for _, p := range procs {
		_ = p.ctrl.SetWriteDeadline(time.Now().Add(renewWriteTimeout))
		_, _ = p.ctrl.Write(line) // closed when its supervisor ended
	}
}

// renewWriteTimeout bounds a renewal's write to one supervisor.
const renewWriteTimeout = 50 * time.Millisecond

// Stop sends SIGTERM to the shard's process group, then SIGKILL after
// StopTimeout, and returns once the process has exited.
func (d *Driver) Stop(id interfaces.ShardID) error {
	d.mu.Lock()
	p, ok := d.procs[id]
	if ok {
		delete(d.procs, id)
	}
	delete(d.stoppedAt, id)
	d.mu.Unlock()
	if !ok {
		return fmt.Errorf("exec: shard %s: %w: not running", id, interfaces.ErrNotFound)
	}
	pgid := p.pid
	select {
	case <-p.done:
		// The leader exited on its own; members of its group may not have
		// (sh -c 'worker & exit 0'): take them too.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		d.stopped(id, p)
		return nil
	default:
	}
	if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		d.keep(id, p) // it still runs: a retried Stop must find it
		return fmt.Errorf("exec: SIGTERM shard %s (pid %d): %w", id, pgid, err)
	}
	select {
	case <-p.done:
		// The leader exited; take any stragglers of its group with it.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		d.stopped(id, p)
		return nil
	case <-d.cfg.Clock.After(d.cfg.StopTimeout):
	}
	d.mu.Lock()
	d.kills++
	d.mu.Unlock()
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		d.keep(id, p)
		return fmt.Errorf("exec: SIGKILL shard %s (pid %d): %w", id, pgid, err)
	}
	<-p.done
	d.stopped(id, p)
	return nil
}

// stopped records when the supervisor saw the worker of a stopped shard end.
func (d *Driver) stopped(id interfaces.ShardID, p *proc) {
	if p.exitedAt.IsZero() {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.procs[id]; !ok {
		d.stoppedAt[id] = p.exitedAt
	}
}

// StoppedAt reports, after a Stop of shard, when its supervisor saw the
// worker end — after its real end, and before Stop returned. When the
// supervisor fenced it at the lease's end while the agent was frozen, that is
// long before the agent got round to the Stop: the agent's ledger records
// the stop then (hostagent's stopTimer).
func (d *Driver) StoppedAt(id interfaces.ShardID) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.stoppedAt[id]
	return t, ok
}

// keep puts back a process whose stop failed, unless a new one took its place.
func (d *Driver) keep(id interfaces.ShardID, p *proc) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.procs[id]; !ok {
		d.procs[id] = p
	}
}

// killWait is what StopBudget allows for a SIGKILLed process group to go.
const killWait = 500 * time.Millisecond

// StopBudget is the longest Stop takes: StopTimeout after SIGTERM, then the
// SIGKILL (driver.StopBudgeter).
func (d *Driver) StopBudget() time.Duration { return d.cfg.StopTimeout + killWait }

// Kills returns how many stops needed SIGKILL.
func (d *Driver) Kills() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.kills
}

// Pid returns the process id running shard, if any.
func (d *Driver) Pid(id interfaces.ShardID) (int, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.procs[id]
	if !ok {
		return 0, false
	}
	return p.pid, true
}

// Exited reports whether shard's process ended on its own (it is then not
// measured; the agent drops the shard at its next Tick, see ExitError).
func (d *Driver) Exited(id interfaces.ShardID) bool {
	_, ok := d.ExitError(id)
	return ok
}

// ExitError reports whether shard's process ended on its own and how ("exit
// status 3", "signal: killed", or "exited with status 0"): the agent drops
// such a shard and tells its parent that it failed here.
func (d *Driver) ExitError(id interfaces.ShardID) (string, bool) {
	d.mu.Lock()
	p, ok := d.procs[id]
	d.mu.Unlock()
	if !ok {
		return "", false
	}
	select {
	case <-p.done:
	default:
		return "", false
	}
	if p.waitErr != nil {
		return "the process exited on its own: " + p.waitErr.Error(), true
	}
	return "the process exited on its own with status 0", true
}

// Measure reads CPU and RSS of every live shard process from /proc.
func (d *Driver) Measure() map[interfaces.ShardID]interfaces.ShardLoad {
	now := d.cfg.Clock.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[interfaces.ShardID]interfaces.ShardLoad, len(d.procs))
	for id, p := range d.procs {
		select {
		case <-p.done:
			continue
		default:
		}
		pid := p.pid
		ticks, err := ReadCPUTicks(d.cfg.ProcRoot, pid)
		if err != nil {
			continue // exited between the check and the read
		}
		rss, err := ReadRSS(d.cfg.ProcRoot, pid)
		if err != nil {
			continue
		}
		from, base := p.started, uint64(0)
		if p.sampled {
			from, base = p.lastAt, p.lastTicks
		}
		var cores float64
		if dt := now.Sub(from).Seconds(); dt > 0 && ticks >= base {
			cores = float64(ticks-base) / clockTicks / dt
		}
		p.lastTicks, p.lastAt, p.sampled = ticks, now, true
		out[id] = interfaces.ShardLoad{Shard: id, Load: interfaces.Load{CPU: cores, Mem: float64(rss), Tasks: 1}}
	}
	return out
}

// Close stops every process (SIGTERM, then SIGKILL after the timeout).
func (d *Driver) Close() error {
	d.mu.Lock()
	ids := make([]interfaces.ShardID, 0, len(d.procs))
	for id := range d.procs {
		ids = append(ids, id)
	}
	d.mu.Unlock()
	var errs []error
	for _, id := range ids {
		errs = append(errs, driver.IgnoreNotFound(d.Stop(id)))
	}
	return errors.Join(errs...)
}

// ReadCPUTicks returns utime+stime+cutime+cstime of pid, in clock ticks, from
// <procRoot>/<pid>/stat.
func ReadCPUTicks(procRoot string, pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("%s/%d/stat", procRoot, pid))
	if err != nil {
		return 0, err
	}
	return parseStat(string(b))
}

func parseStat(s string) (uint64, error) {
	// The command name (field 2) is in parentheses and may hold spaces: the
	// fields after the last ')' start at field 3 (state).
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("%w: /proc stat: no ')' in %q", interfaces.ErrInvalid, s)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return 0, fmt.Errorf("%w: /proc stat: %d fields after the command, want ≥ 15", interfaces.ErrInvalid, len(f))
	}
	var sum uint64
	for _, k := range []int{11, 12, 13, 14} { // utime stime cutime cstime (fields 14-17)
		v, err := strconv.ParseInt(f[k], 10, 64)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("%w: /proc stat field %d: %q", interfaces.ErrInvalid, k+3, f[k])
		}
		sum += uint64(v)
	}
	return sum, nil
}

// ReadRSS returns the resident set size of pid in bytes, from
// <procRoot>/<pid>/status (VmRSS).
func ReadRSS(procRoot string, pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("%s/%d/status", procRoot, pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseStatus(f)
}

func parseStatus(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "VmRSS:") {
			continue
		}
		f := strings.Fields(strings.TrimPrefix(line, "VmRSS:"))
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("%w: /proc status: VmRSS line %q", interfaces.ErrInvalid, line)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb < 0 {
			return 0, fmt.Errorf("%w: /proc status: VmRSS value %q", interfaces.ErrInvalid, f[0])
		}
		return kb * 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	// Kernel threads and zombies have no VmRSS.
	return 0, nil
}
