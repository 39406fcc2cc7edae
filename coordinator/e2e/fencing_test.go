package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/hostagent/ledger"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

// worker is one shard process as its pid file tells: every exec worker of
// TestFrozenHostsWorkersStopFirst writes $PIDS/<host>.<shard>.<epoch>
// (the shard's "/" as "_") holding its pid when it starts.
type worker struct {
	host, shard string
	epoch       uint64
	pid         int
	started     time.Time // the pid file's mtime
}

func workers(dir string) ([]worker, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []worker
	for _, e := range ents {
		f := strings.Split(e.Name(), ".")
		if len(f) != 3 {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			continue // being written
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		ep, _ := strconv.ParseUint(f[2], 10, 64)
		info, err := e.Info()
		if err != nil {
			continue
		}
		out = append(out, worker{host: f[0], shard: f[1], epoch: ep, pid: pid, started: info.ModTime()})
	}
	return out, nil
}

// TestFrozenHostsWorkersStopFirst runs a real hierarchy whose hosts use the
// exec driver (real worker processes under `strata supervise`), freezes the
// host with the most shards with SIGSTOP, and checks that each of its
// workers is gone before its shard's worker on another host starts; then it
// thaws the host and checks the ledgers: no shard on two hosts at once
// (issue 20, observed item 2: the region re-placed a frozen host's shards
// while the original processes ran on until SIGCONT).
func TestFrozenHostsWorkersStopFirst(t *testing.T) {
	dir := workDir(t)
	pids := filepath.Join(dir, "pids")
	if err := os.MkdirAll(pids, 0o755); err != nil {
		t.Fatal(err)
	}
	script := `echo $$ > "$PIDS/$STRATA_HOST.$(printf %s "$STRATA_SHARD_ID" | tr / _).$STRATA_SHARD_EPOCH.tmp" && mv "$PIDS/$STRATA_HOST.$(printf %s "$STRATA_SHARD_ID" | tr / _).$STRATA_SHARD_EPOCH.tmp" "$PIDS/$STRATA_HOST.$(printf %s "$STRATA_SHARD_ID" | tr / _).$STRATA_SHARD_EPOCH"; exec sleep 600`
	cmdJSON, _ := json.Marshal([]string{"sh", "-c", script})
	envJSON, _ := json.Marshal([]string{"PIDS=" + pids})
	const stopTimeout = 500 * time.Millisecond
	spec := Spec{Replicas: 1, Regions: 1, HostsPerRegion: 2, HostCPU: 4,
		Timing: Timing{Interval: 300 * time.Millisecond, LeaseTTL: 2 * time.Second, Grace: 500 * time.Millisecond, ReportInterval: 500 * time.Millisecond},
		HostDriver: func(string) string {
			return fmt.Sprintf("{kind: exec, exec: {command: %s, env: %s, env_pass: [PATH], stop_timeout: %s}}", cmdJSON, envJSON, stopTimeout)
		}}
	c := startCluster(t, dir, spec)
	ctx := context.Background()
	a := admin(t, c.Global[0])
	const n = 4
	eventually(t, "job submitted", 30*time.Second, func() error {
		_, err := a.SubmitJob(ctx, &wire.SubmitJobRequest{Job: &wire.JobSpec{Id: "f", Parallelism: n,
			ShardTemplate: &wire.Shard{Load: &wire.Load{Cpu: 0.5, Mem: 64 << 20, Tasks: 1}}}})
		if err != nil && isConflict(err) {
			return nil
		}
		return err
	})
	live := func() ([]worker, error) {
		ws, err := workers(pids)
		if err != nil {
			return nil, err
		}
		var out []worker
		for _, w := range ws {
			if syscall.Kill(w.pid, 0) == nil {
				out = append(out, w)
			}
		}
		return out, nil
	}
	var lines []string
	for trial := range 3 {
		var before []worker
		eventually(t, "every shard's worker running", 60*time.Second, func() error {
			ws, err := live()
			if err != nil {
				return err
			}
			if len(ws) != n {
				return fmt.Errorf("%d workers live, want %d", len(ws), n)
			}
			before = ws
			return nil
		})
		lines = append(lines, freezeTrial(t, c, pids, trial, before)...)
	}
	sort.Strings(lines)
	for _, l := range lines {
		t.Log(l)
	}
	t.Logf("lease_ttl %v (a host fences 1.6s after a grant at most), stop_timeout %v, grace %v", spec.Timing.LeaseTTL, stopTimeout, spec.Timing.Grace)
	c.Stop()
	res, err := ledger.Check(c.LedgerPaths()...)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range res.Violations {
		t.Errorf("ledger: %s", v)
	}
}

// interfacesShard turns a pid file's shard back into its ID ("f_0" → "f/0").
func interfacesShard(s string) interfaces.ShardID {
	return interfaces.ShardID(strings.Replace(s, "_", "/", 1))
}

// freezeTrial freezes the host that runs the most of before's workers, waits
// until each of its shards runs elsewhere, checks that each frozen worker was
// gone first, thaws the host and waits until its ledger holds none of them
// running. It returns a line of figures per frozen worker.
func freezeTrial(t *testing.T, c *Cluster, pids string, trial int, before []worker) []string {
	t.Helper()
	count := map[string]int{}
	for _, w := range before {
		count[w.host]++
	}
	victim := ""
	for h, k := range count {
		if victim == "" || k > count[victim] || k == count[victim] && h < victim {
			victim = h
		}
	}
	var frozen []worker
	for _, w := range before {
		if w.host == victim {
			frozen = append(frozen, w)
		}
	}
	vp := c.Hosts[victim].Pid()
	if err := syscall.Kill(vp, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			_ = syscall.Kill(vp, syscall.SIGCONT)
		}
	}
	defer thaw()

	// Until every frozen worker's shard runs elsewhere: when each frozen
	// worker died, and when its successor started.
	dead := map[string]time.Time{}
	var succ map[string]worker
	giveUp := time.Now().Add(60 * time.Second)
	for {
		if time.Now().After(giveUp) {
			t.Fatalf("after 60s: frozen %v, dead %v, successors %v", frozen, dead, succ)
		}
		for _, w := range frozen {
			if _, ok := dead[w.shard]; !ok && syscall.Kill(w.pid, 0) != nil {
				dead[w.shard] = time.Now()
			}
		}
		ws, err := workers(pids)
		if err != nil {
			t.Fatal(err)
		}
		succ = map[string]worker{}
		for _, w := range ws {
			for _, f := range frozen {
				if w.shard == f.shard && w.host != victim && w.epoch > f.epoch {
					succ[w.shard] = w
				}
			}
		}
		if len(succ) == len(frozen) && len(dead) == len(frozen) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	var lines []string
	for _, f := range frozen {
		s := succ[f.shard]
		d := dead[f.shard]
		if !d.Before(s.started) {
			t.Errorf("shard %s: its frozen worker (epoch %d on %s) was still running at %v when its successor started on %s (epoch %d) at %v",
				f.shard, f.epoch, victim, d.Format(time.StampMilli), s.host, s.epoch, s.started.Format(time.StampMilli))
		}
		lines = append(lines, fmt.Sprintf("trial %d, %s on %s: frozen worker gone %v after SIGSTOP, its successor started %v after that, on %s (epoch %d → %d)",
			trial, f.shard, victim, d.Sub(stopped).Round(time.Millisecond), s.started.Sub(d).Round(time.Millisecond), s.host, f.epoch, s.epoch))
	}

	// Thawed, the host fences what its supervisors stopped; the ledgers show
	// no shard on two hosts at once.
	thaw()
	eventually(t, "the thawed host holds nothing running", 30*time.Second, func() error {
		res, err := ledger.Check(filepath.Join(c.Hosts[victim].DataDir, "ledger.jsonl"))
		if err != nil {
			return err
		}
		for _, f := range frozen {
			for _, h := range res.Running[interfacesShard(f.shard)] {
				return fmt.Errorf("%s still open on %s", f.shard, h)
			}
		}
		return nil
	})
	return lines
}
