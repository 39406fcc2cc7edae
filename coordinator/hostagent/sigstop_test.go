package hostagent_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/strata-sched/strata/coordinator/hostagent"
	"github.com/strata-sched/strata/coordinator/hostagent/driver/execdriver"
	"github.com/strata-sched/strata/coordinator/hostagent/ledger"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/internal/testutil"
)

const stopHelperEnv = "STRATA_HOSTAGENT_SIGSTOP_HELPER_DIR"

// The timing of TestSIGSTOPFencesWorkers: as a region would run it, with
// the stop budget the exec driver announces and the grace of the e2e tests.
const (
	stopTTL         = 2 * time.Second
	stopStopTimeout = 500 * time.Millisecond
	stopGrace       = 500 * time.Millisecond
	stopShards      = 3 // the last one ignores SIGTERM
)

func mono() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return time.Duration(ts.Nano())
}

// TestSIGSTOPHelper is not a test on its own: run by TestSIGSTOPFencesWorkers
// in a child process, it is a host agent with the exec driver whose lease
// grants come from its parent on stdin ("grant" lines; it answers
// "renewed <CLOCK_MONOTONIC ns>" once each is applied).
func TestSIGSTOPHelper(t *testing.T) {
	dir := os.Getenv(stopHelperEnv)
	if dir == "" {
		return // only meaningful as the child of TestSIGSTOPFencesWorkers
	}
	fail := func(err error) {
		fmt.Println("error", err)
		os.Exit(1)
	}
	clk := hostagent.WallClock{}
	d, err := execdriver.New(execdriver.Config{Supervisor: execSup,
		Command:     []string{"sh", "-c", `case "$STRATA_SHARD_ID" in stubborn*) trap "" TERM;; esac; while :; do sleep 0.05; done`},
		StopTimeout: stopStopTimeout, Clock: clk})
	if err != nil {
		fail(err)
	}
	a, err := hostagent.Open(hostagent.Config{Host: "h1", StorePath: filepath.Join(dir, "h1.db"), LedgerPath: filepath.Join(dir, "h1.ledger"),
		Driver: d, Clock: clk, Capacity: interfaces.Load{CPU: 8}, TickInterval: 10 * time.Millisecond})
	if err != nil {
		fail(err)
	}
	ctx := context.Background()
	go func() { _ = a.Run(ctx, nil) }()
	if err := a.LeaseGrant(ctx, time.Now(), stopTTL, nil); err != nil {
		fail(err)
	}
	var pids []string
	for i := range stopShards {
		id := fmt.Sprintf("plain-%d", i)
		if i == stopShards-1 {
			id = "stubborn"
		}
		if err := a.Assign(ctx, time.Now(), interfaces.Shard{ID: interfaces.ShardID(id), Job: "j"}, 7); err != nil {
			fail(err)
		}
		pid, _ := d.Pid(interfaces.ShardID(id))
		pids = append(pids, strconv.Itoa(pid))
	}
	time.Sleep(100 * time.Millisecond) // let the stubborn shell install its trap
	// The starts may have taken a while (a busy machine): renew before the
	// parent takes over, so that the first lease has not run out meanwhile.
	if err := a.LeaseGrant(ctx, time.Now(), stopTTL, nil); err != nil {
		fail(err)
	}
	if n := len(a.Running()); n != stopShards {
		fail(fmt.Errorf("%d shards run, want %d", n, stopShards))
	}
	fmt.Println("ready", strings.Join(pids, " "))
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if err := a.LeaseGrant(ctx, time.Now(), stopTTL, nil); err != nil {
			fail(err)
		}
		fmt.Println("renewed", int64(mono()))
	}
	os.Exit(3)
}

// stopTrial is what one trial of TestSIGSTOPFencesWorkers measured: how long
// after the last renewal the agent applied each worker was still running,
// and after the parent's send of that renewal.
type stopTrial struct {
	afterRenewal []time.Duration // per worker, in the helper's order
	afterSend    time.Duration   // the last worker's death, from the last grant's send
}

// TestSIGSTOPFencesWorkers freezes a real host agent process (exec driver,
// real worker processes under their supervisors) with SIGSTOP while its
// parent renews its lease, and checks that every worker is dead before the
// parent may place the shards elsewhere: lease ttl + the driver's stop
// budget + grace after the last grant the agent took, and that its ledger,
// once it is thawed, records each stop when the worker ended. Before the
// supervisors held the lease the workers ran until SIGCONT (issue 20, item
// 2). The figures are logged (go test -v -run TestSIGSTOPFencesWorkers).
func TestSIGSTOPFencesWorkers(t *testing.T) {
	bound := stopTTL + stopStopTimeout + 500*time.Millisecond + stopGrace // the exec driver's StopBudget adds 0.5s
	var trials []stopTrial
	for i := range 5 {
		tr := runStopTrial(t, i)
		trials = append(trials, tr)
		if tr.afterSend >= bound {
			t.Errorf("trial %d: the last worker died %v after the parent's last grant, at or past the %v after which the parent may re-place its shards", i, tr.afterSend, bound)
		}
	}
	var plain, stubborn, send []time.Duration
	for i, tr := range trials {
		t.Logf("trial %d: ran after the last renewal: %v; last death after the last grant's send: %v", i, tr.afterRenewal, tr.afterSend)
		plain = append(plain, tr.afterRenewal[:stopShards-1]...)
		stubborn = append(stubborn, tr.afterRenewal[stopShards-1])
		send = append(send, tr.afterSend)
	}
	span := func(ds []time.Duration) string {
		return fmt.Sprintf("%v–%v", slices.Min(ds).Round(time.Millisecond), slices.Max(ds).Round(time.Millisecond))
	}
	t.Logf("ttl %v (agent fence at receipt + %v), stop_timeout %v, parent may re-place %v after its last grant", stopTTL,
		stopTTL-hostagent.LeaseConfig{}.Margin(stopTTL), stopStopTimeout, bound)
	t.Logf("workers that stop on SIGTERM ran %s after the last renewal; workers that ignore it %s; last death %s after the last grant's send",
		span(plain), span(stubborn), span(send))
}

func runStopTrial(t *testing.T, trial int) stopTrial {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSIGSTOPHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), stopHelperEnv+"="+dir)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Wait()
	}()
	out := bufio.NewReader(outPipe)
	line, err := out.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ready ") {
		t.Fatalf("trial %d: helper said %q (%v)", trial, line, err)
	}
	var pids []int
	for _, f := range strings.Fields(strings.TrimPrefix(line, "ready ")) {
		p, _ := strconv.Atoi(f)
		pids = append(pids, p)
	}
	// Renew as a region would (every 250ms), a few times, each answered.
	var sent, renewed time.Duration
	for range 4 {
		time.Sleep(250 * time.Millisecond)
		at := mono()
		if _, err := io.WriteString(in, "grant\n"); err != nil {
			t.Fatal(err)
		}
		line, err := out.ReadString('\n')
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "renewed ")
		n, perr := strconv.ParseInt(v, 10, 64)
		if err != nil || !ok || perr != nil {
			t.Fatalf("trial %d: helper answered a grant with %q (%v)", trial, line, err)
		}
		sent, renewed = at, time.Duration(n)
	}
	for _, p := range pids {
		if syscall.Kill(p, 0) != nil {
			t.Fatalf("trial %d: worker %d died while its lease was being renewed", trial, p)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The parent goes on granting into the frozen agent's pipe, as a region
	// whose session is still open would: nothing renews it.
	_, _ = io.WriteString(in, "grant\n")
	dead := make([]time.Duration, len(pids))
	giveUp := mono() + 30*time.Second
	for left := len(pids); left > 0; {
		if mono() > giveUp {
			t.Fatalf("trial %d: workers %v still run 30s after the agent was frozen", trial, pids)
		}
		for i, p := range pids {
			if dead[i] == 0 && syscall.Kill(p, 0) != nil {
				dead[i] = mono()
				left--
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	tr := stopTrial{}
	for _, d := range dead {
		tr.afterRenewal = append(tr.afterRenewal, d-renewed)
		tr.afterSend = max(tr.afterSend, d-sent)
	}
	// Thawed, the agent fences what its supervisors already stopped; its
	// ledger records each stop when the supervisor saw the worker end, not
	// now (it would overlap the shards' next owner's interval).
	thawed := time.Now()
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "h1.ledger")
	var res *ledger.Result
	testutil.Until(t, "the thawed agent's ledger records the stops", 10*time.Second, func() bool {
		var err error
		res, err = ledger.Check(path)
		return err == nil && len(res.Running) == 0 && len(res.Intervals) == len(pids)
	})
	if !res.OK() {
		t.Fatalf("trial %d: ledger: %v", trial, res.Err())
	}
	for _, iv := range res.Intervals {
		if iv.End >= thawed.UnixNano() {
			t.Errorf("trial %d: the ledger stops %s at %v, after the thaw at %v: not when its worker ended", trial, iv.Shard,
				time.Unix(0, iv.End).Format(time.StampMicro), thawed.Format(time.StampMicro))
		}
	}
	return tr
}
