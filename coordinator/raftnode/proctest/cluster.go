package proctest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/raftnode"
	"github.com/strata-sched/strata/interfaces"
)

const testnodePkg = "github.com/strata-sched/strata/coordinator/raftnode/testnode"

var (
	buildOnce sync.Once
	buildBin  string
	buildErr  error
)

// Binary builds the testnode binary once per test process and returns its path.
func Binary(tb testing.TB) string {
	tb.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "strata-testnode-")
		if err != nil {
			buildErr = err
			return
		}
		buildBin = filepath.Join(dir, "testnode")
		out, err := exec.Command("go", "build", "-o", buildBin, testnodePkg).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build %s: %v\n%s", testnodePkg, err, out)
		}
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return buildBin
}

// Proc is one replica process.
type Proc struct {
	ID        string
	RaftAddr  string
	AdminAddr string
	Dir       string
	Client    *raftnode.Client

	args    []string
	logPath string

	mu   sync.Mutex // guards cmd and done: restarts race with observers
	cmd  *exec.Cmd
	done chan struct{}
}

func (p *Proc) current() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd, p.done
}

// Running says whether the process runs.
func (p *Proc) Running() bool {
	cmd, done := p.current()
	if cmd == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Cluster is a group of replica processes on 127.0.0.1.
type Cluster struct {
	tb    testing.TB
	bin   string
	Procs []*Proc
	// Extra arguments for every process (e.g. timeouts).
	extra []string
}

// Option changes how the cluster starts.
type Option func(*Cluster)

// WithArgs adds testnode flags to every process.
func WithArgs(args ...string) Option { return func(c *Cluster) { c.extra = append(c.extra, args...) } }

// freePort returns a port on 127.0.0.1 that was free a moment ago.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// Start runs n replicas: the first bootstraps the group, the others join through
// it. It returns when all n are voters. The processes are killed when the test
// ends.
func Start(tb testing.TB, n int, opts ...Option) *Cluster {
	tb.Helper()
	c := &Cluster{tb: tb, bin: Binary(tb)}
	for _, o := range opts {
		o(c)
	}
	base := tb.TempDir()
	for i := range n {
		ra, err := freePort()
		if err != nil {
			tb.Fatal(err)
		}
		aa, err := freePort()
		if err != nil {
			tb.Fatal(err)
		}
		p := &Proc{ID: fmt.Sprintf("n%d", i), RaftAddr: ra, AdminAddr: aa, Dir: filepath.Join(base, fmt.Sprintf("n%d", i))}
		p.logPath = filepath.Join(base, p.ID+".log")
		p.Client = raftnode.NewClient(aa)
		p.Client.HTTP.Timeout = 10 * time.Second
		p.args = []string{"--id", p.ID, "--dir", p.Dir, "--raft-addr", ra, "--admin-addr", aa, "--test-mode"}
		if i == 0 {
			p.args = append(p.args, "--bootstrap")
		} else {
			p.args = append(p.args, "--join", c.Procs[0].AdminAddr)
		}
		p.args = append(p.args, c.extra...)
		c.Procs = append(c.Procs, p)
	}
	tb.Cleanup(c.KillAll)
	for i := range c.Procs {
		if err := c.start(i); err != nil {
			tb.Fatal(err)
		}
	}
	if err := c.WaitVoters(n, 20*time.Second); err != nil {
		tb.Fatal(err)
	}
	return c
}

func (c *Cluster) start(i int) error {
	p := c.Procs[i]
	if p.Running() {
		return fmt.Errorf("replica %s: already running: %w", p.ID, interfaces.ErrConflict)
	}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.bin, p.args...)
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", p.ID, err)
	}
	p.mu.Lock()
	p.cmd, p.done = cmd, make(chan struct{})
	done := p.done
	p.mu.Unlock()
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		got := false
		for sc.Scan() {
			if !got && strings.HasPrefix(sc.Text(), "READY ") {
				got = true
				ready <- nil
			}
		}
		if !got {
			ready <- fmt.Errorf("replica %s exited before it was ready", p.ID)
		}
	}()
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	select {
	case err := <-ready:
		if err != nil {
			return fmt.Errorf("%w; log:\n%s", err, c.Log(i))
		}
		return nil
	case <-time.After(60 * time.Second):
		return fmt.Errorf("replica %s not ready after 60s; log:\n%s", p.ID, c.Log(i))
	}
}

// Log returns the tail of replica i's stderr.
func (c *Cluster) Log(i int) string {
	b, _ := os.ReadFile(c.Procs[i].logPath)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Kill sends SIGKILL to replica i and waits for it to die.
func (c *Cluster) Kill(i int) {
	p := c.Procs[i]
	if !p.Running() {
		return
	}
	cmd, done := p.current()
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// KillAll kills every replica.
func (c *Cluster) KillAll() {
	for i := range c.Procs {
		c.Kill(i)
	}
}

// Restart starts a stopped replica again on its data directory.
func (c *Cluster) Restart(i int) error { return c.start(i) }

// Running lists the indexes of the running replicas.
func (c *Cluster) Running() []int {
	var out []int
	for i, p := range c.Procs {
		if p.Running() {
			out = append(out, i)
		}
	}
	return out
}

func ctxT(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// Leader waits until a running replica reports itself leader and every running
// replica it can see agrees, and returns its index.
func (c *Cluster) Leader(timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	for {
		li := -1
		for _, i := range c.Running() {
			ctx, cancel := ctxT(time.Second)
			st, err := c.Procs[i].Client.Status(ctx)
			cancel()
			if err == nil && st.State == "Leader" {
				if li >= 0 {
					li = -2 // two self-declared leaders (one is stale): wait
					break
				}
				li = i
			}
		}
		if li >= 0 {
			return li, nil
		}
		if time.Now().After(deadline) {
			return -1, fmt.Errorf("no single leader among running replicas %v after %v", c.Running(), timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitVoters waits until the leader's configuration has n voters.
func (c *Cluster) WaitVoters(n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		li, err := c.Leader(time.Until(deadline))
		if err == nil {
			ctx, cancel := ctxT(time.Second)
			peers, perr := c.Procs[li].Client.Peers(ctx)
			cancel()
			if perr == nil {
				v := 0
				for _, p := range peers {
					if p.Suffrage == "Voter" {
						v++
					}
				}
				if v == n {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("group did not reach %d voters within %v", n, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Partition cuts the replicas in side off from the others, in both directions,
// through each running replica's blocked-peers list. It replaces earlier cuts.
func (c *Cluster) Partition(side ...int) error {
	in := map[int]bool{}
	for _, i := range side {
		in[i] = true
	}
	for i, p := range c.Procs {
		if !p.Running() {
			continue
		}
		var blocked []string
		for j, q := range c.Procs {
			if i != j && in[i] != in[j] {
				blocked = append(blocked, q.RaftAddr)
			}
		}
		ctx, cancel := ctxT(5 * time.Second)
		err := p.Client.SetBlocked(ctx, blocked)
		cancel()
		if err != nil {
			return fmt.Errorf("partition: replica %s: %w", p.ID, err)
		}
	}
	return nil
}

// Heal clears every running replica's blocked list.
func (c *Cluster) Heal() error { return c.Partition() }

// Write sends a tier write to the leader (following redirects and elections) until
// it gets an answer that is not "not leader", or timeout passes. The error of the
// last attempt is returned.
func (c *Cluster) Write(timeout time.Duration, path string, in, out any) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		li, err := c.Leader(time.Until(deadline))
		if err != nil {
			last = err
			continue
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		err = c.Procs[li].Client.Call(ctx, "POST", path, in, out)
		cancel()
		if err == nil || !errors.Is(err, interfaces.ErrNotLeader) {
			return err
		}
		last = err
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("write %s: %v", path, last)
}

// State reads replica i's state summary (stale read: its local state).
func (c *Cluster) State(i int) (raftnode.StateResponse, error) {
	var st raftnode.StateResponse
	ctx, cancel := ctxT(5 * time.Second)
	defer cancel()
	err := c.Procs[i].Client.Call(ctx, "GET", "/v1/tier/state?read=stale", nil, &st)
	return st, err
}

// EnsureSame waits until every running replica has applied the leader's commit
// index and their state digests are equal; it returns the common state.
func (c *Cluster) EnsureSame(timeout time.Duration) (raftnode.StateResponse, error) {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		st, err := c.sameOnce(deadline)
		if err == nil {
			return st, nil
		}
		last = err
		if time.Now().After(deadline) {
			return raftnode.StateResponse{}, last
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *Cluster) sameOnce(deadline time.Time) (raftnode.StateResponse, error) {
	li, err := c.Leader(time.Until(deadline))
	if err != nil {
		return raftnode.StateResponse{}, err
	}
	// A linearizable read on the leader makes it apply all it has committed.
	ctx, cancel := ctxT(5 * time.Second)
	var lst raftnode.StateResponse
	err = c.Procs[li].Client.Call(ctx, "GET", "/v1/tier/state?read=linearizable", nil, &lst)
	cancel()
	if err != nil {
		return lst, err
	}
	for _, i := range c.Running() {
		st, err := c.State(i)
		if err != nil {
			return lst, fmt.Errorf("replica %d: %w", i, err)
		}
		if st.Digest != lst.Digest {
			return lst, fmt.Errorf("replica %d (applied %d) differs from leader %d (applied %d)", i, st.AppliedIndex, li, lst.AppliedIndex)
		}
	}
	return lst, nil
}
