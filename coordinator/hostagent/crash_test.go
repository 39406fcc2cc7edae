package hostagent_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/hostagent"
	"github.com/strata-sched/strata/coordinator/hostagent/driver/execdriver"
	"github.com/strata-sched/strata/coordinator/hostagent/ledger"
	"github.com/strata-sched/strata/interfaces"
)

const helperEnv = "STRATA_HOSTAGENT_CRASH_HELPER_DIR"

func openExecAgent(dir string) (*hostagent.Agent, *execdriver.Driver, error) {
	d, err := execdriver.New(execdriver.Config{Supervisor: execSup, Command: []string{"sleep", "600"}, StopTimeout: time.Second, Clock: hostagent.WallClock{}})
	if err != nil {
		return nil, nil, err
	}
	a, err := hostagent.Open(hostagent.Config{Host: "h1", StorePath: filepath.Join(dir, "h1.db"), LedgerPath: filepath.Join(dir, "h1.ledger"),
		Driver: d, Clock: hostagent.WallClock{}, Capacity: interfaces.Load{CPU: 2}})
	return a, d, err
}

// TestCrashHelper is not a test on its own: run by TestKill9RestartResumes in a
// child process, it starts an agent with two shards and waits to be killed.
func TestCrashHelper(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		return // only meaningful as the child of TestKill9RestartResumes
	}
	ctx := context.Background()
	a, d, err := openExecAgent(dir)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	if err := a.LeaseGrant(ctx, time.Now(), 20*time.Second, nil); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	var pids []string
	for i, id := range []string{"a", "b"} {
		if err := a.Assign(ctx, time.Now(), interfaces.Shard{ID: interfaces.ShardID(id), Job: "j"}, interfaces.Epoch(i+1)); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		pid, _ := d.Pid(interfaces.ShardID(id))
		pids = append(pids, strconv.Itoa(pid))
	}
	fmt.Println("ready", strings.Join(pids, " "))
	time.Sleep(time.Minute)
	os.Exit(3)
}

// TestKill9RestartResumes kills a real agent process with SIGKILL: its shard
// processes die with it (parent-death signal), and a new agent on the same files
// holds both shards fenced, closes the ledger's open intervals, and resumes only
// the shard the parent re-confirms. The ledger of the whole history is clean.
func TestKill9RestartResumes(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ready ") {
		_ = cmd.Process.Kill()
		t.Fatalf("helper said %q (%v)", line, err)
	}
	var pids []int
	for _, f := range strings.Fields(strings.TrimPrefix(line, "ready ")) {
		p, _ := strconv.Atoi(f)
		pids = append(pids, p)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	for _, p := range pids {
		giveUp := time.Now().Add(10 * time.Second)
		for syscall.Kill(p, 0) == nil {
			if time.Now().After(giveUp) {
				t.Fatalf("shard process %d outlived its agent", p)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	a, d, err := openExecAgent(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	held := a.Held()
	if len(held) != 2 || !held[0].Fenced || !held[1].Fenced || held[0].Epoch != 1 || held[1].Epoch != 2 {
		t.Fatalf("held after kill -9: %+v", held)
	}
	if len(a.Running()) != 0 {
		t.Fatal("shards run before a lease")
	}
	ctx := context.Background()
	if err := a.LeaseGrant(ctx, time.Now(), 20*time.Second, []interfaces.Assignment{{Shard: "b", Epoch: 2}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.Pid("b"); !ok {
		t.Fatal("confirmed shard b has no process")
	}
	if _, ok := d.Pid("a"); ok {
		t.Fatal("unconfirmed shard a runs")
	}
	res, err := ledger.Check(filepath.Join(dir, "h1.ledger"))
	if err != nil {
		t.Fatal(err)
	}
	res.ExpectRunning([]interfaces.ShardID{"b"})
	if !res.OK() || len(res.Intervals) != 3 {
		t.Fatalf("ledger: %v; intervals %+v", res.Err(), res.Intervals)
	}
}
