package chaos

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/strata-sched/strata/coordinator/e2e"
	"github.com/strata-sched/strata/coordinator/hostagent/ledger"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

// Config is one chaos run.
type Config struct {
	Shape Shape
	Seed  uint64
	// Duration is how long faults are injected; 0 means one round: every
	// kind once.
	Duration         time.Duration
	MinHold, MaxHold time.Duration // how long a fault is held
	Gap              time.Duration // quiet time after each fault
	Settle           time.Duration // the longest wait for every shard to run once after the faults
	// Kinds, when set, limits the faults to these kinds (to reproduce one);
	// the short run then injects each of them once.
	Kinds []Kind
	Dir   string
	Logf  func(format string, args ...any)
}

// Run builds the topology, runs the workload and the faults, lets the cluster
// settle and checks it.
func Run(ctx context.Context, cfg Config, strataBin, beatBin string) (*Report, error) {
	logf := cfg.Logf
	t, err := NewTopology(cfg.Dir, strataBin, beatBin, cfg.Shape)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	if err := t.Start(); err != nil {
		return nil, err
	}
	rep := &Report{Config: cfg, Began: time.Now()}
	if err := waitReady(ctx, t, 90*time.Second); err != nil {
		return nil, fmt.Errorf("cluster not ready: %w", err)
	}
	logf("cluster ready after %v: %d processes, seed %d", time.Since(rep.Began).Round(time.Millisecond), len(t.Cluster.All()), cfg.Seed)

	chk := NewChecker(t, rep.Began, logf)
	// Shards of 0.5 cpu: a host holds 2×HostCPU of them. The budget is 40% of
	// what the hosts minus two (one drained, one down) hold.
	perHost := int(2 * cfg.Shape.HostCPU)
	budget := max(8, 4*perHost*(len(t.Hosts())-2)/10)
	wl := &Workload{T: t, Seed: cfg.Seed, Every: 700 * time.Millisecond, MinJobs: 4, MaxJobs: 14, MaxShards: 8, ShardBudget: budget}
	wctx, stopWork := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); wl.Run(wctx) }()
	var faultsMu sync.Mutex
	go func() {
		defer wg.Done()
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-tick.C:
			}
			res, err := chk.Poll()
			if err != nil {
				logf("check: %v", err)
				continue
			}
			faultsMu.Lock()
			nf := len(rep.Faults)
			faultsMu.Unlock()
			_, alive, _ := chk.WorkerRuns(time.Now(), time.Second)
			logf("progress +%v: %d faults, %d ops, %d intervals, %d running, %d workers beating, %d violations",
				time.Since(rep.Began).Round(time.Second), nf, len(wl.Ops()), len(res.Intervals), len(res.Running), alive, len(chk.Findings()))
		}
	}()

	// Warm up, then the faults.
	sleep(ctx, 10*time.Second)
	in := &Injector{T: t, Logf: logf}
	steps := Schedule(cfg.Seed, 1<<16, cfg.MinHold, cfg.MaxHold, cfg.Gap)
	if len(cfg.Kinds) > 0 {
		steps = slices.DeleteFunc(steps, func(st Step) bool { return !slices.Contains(cfg.Kinds, st.Kind) })
	}
	if cfg.Duration == 0 {
		once := len(Kinds) // one round: every kind once
		if len(cfg.Kinds) > 0 {
			once = len(cfg.Kinds)
		}
		steps = steps[:once]
	}
	faultsUntil := time.Now().Add(cfg.Duration)
	for i, st := range steps {
		if ctx.Err() != nil || (cfg.Duration > 0 && time.Now().After(faultsUntil)) {
			break
		}
		f := in.Inject(ctx, i+1, st)
		if f.Err != "" {
			logf("fault %d: %s: %s", f.Seq, f.Kind, f.Err)
		}
		faultsMu.Lock()
		rep.Faults = append(rep.Faults, f)
		faultsMu.Unlock()
		sleep(ctx, st.Gap)
	}
	_ = t.Net.Heal()
	lastFault := time.Now()
	stopWork()
	wg.Wait()
	rep.Ops = wl.Ops()
	logf("faults over: %d faults, %d operations; settling (at most %v)", len(rep.Faults), len(rep.Ops), cfg.Settle)

	// Settle: every shard of every live job on exactly one host.
	for {
		res, err := chk.Poll()
		if err != nil {
			return nil, err
		}
		rep.Ledger = res
		rep.want, rep.Lost, rep.Orphans, rep.LostJobs = placementAtEnd(ctx, t, rep.Ops, res)
		rep.Expected = len(rep.want)
		if (len(rep.Lost) == 0 && len(rep.Orphans) == 0 && rep.Expected > 0) || time.Since(lastFault) > cfg.Settle || ctx.Err() != nil {
			break
		}
		sleep(ctx, 2*time.Second)
	}
	rep.Settled = time.Since(lastFault)
	// Judge the end 2 s later, once a move just made has its worker beating
	// and the one it replaced has stopped.
	sleep(ctx, 2*time.Second)
	res, err := chk.Poll()
	if err != nil {
		return nil, err
	}
	rep.Ledger = res
	if want, lost, orphans, lostJobs := placementAtEnd(ctx, t, rep.Ops, res); want != nil {
		rep.want, rep.Lost, rep.Orphans, rep.LostJobs, rep.Expected = want, lost, orphans, lostJobs, len(want)
	}
	cutoff := time.Now()
	rep.Findings = chk.Findings()
	for _, f := range rep.Findings {
		if strings.HasPrefix(f.Text, "worker overlap") {
			rep.WorkerOverlap++
		}
	}
	var alive map[string]int
	rep.Workers, _, alive = chk.WorkerRuns(cutoff, 500*time.Millisecond)
	if cfg.Shape.Driver == "exec" {
		for s := range rep.want {
			if alive[string(s)] != 1 {
				rep.WorkersOff = append(rep.WorkersOff, s)
			}
		}
		sort.Slice(rep.WorkersOff, func(i, j int) bool { return rep.WorkersOff[i] < rep.WorkersOff[j] })
	}
	slack := Slack{Host: cfg.Shape.HostLease() + cfg.Shape.Timing.Grace + 5*time.Second, ControlPlane: cfg.Gap}
	rep.Listed = listJobs(ctx, t)
	effective := effectiveOps(rep.Ops, rep.Listed)
	rep.Stops = Classify(rep.Ledger, effective, rep.Faults, cutoff, slack)
	rep.PerFault = StopsPerFault(rep.Ledger, effective, rep.Faults, cfg.Gap)
	rep.Reconnects = Reconnects(t, rep.Faults, cfg.Gap)
	rep.Paused = chk.PausedHostWorkers(rep.Faults)
	if err := rep.save(cfg.Dir); err != nil {
		logf("saving the report: %v", err)
	}
	return rep, nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// waitReady waits until every tier group has a leader and every region sees
// all its hosts connected.
func waitReady(ctx context.Context, t *Topology, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var last error
	for time.Now().Before(deadline) {
		if last = ready(ctx, t); last == nil {
			return nil
		}
		sleep(ctx, 500*time.Millisecond)
	}
	return last
}

func ready(ctx context.Context, t *Topology) error {
	if _, err := e2e.Leader(ctx, t.Cluster.Global); err != nil {
		return fmt.Errorf("global: %w", err)
	}
	for _, r := range t.RegionNames() {
		st, err := status(ctx, t.Group(r))
		if err != nil {
			return fmt.Errorf("%s: %w", r, err)
		}
		n := 0
		for _, c := range st.Children {
			if c.Connected {
				n++
			}
		}
		if n < len(t.HostsOf(r)) {
			return fmt.Errorf("%s: %d of %d hosts connected", r, n, len(t.HostsOf(r)))
		}
	}
	return nil
}

// status asks the group's leader for its instance status.
func status(ctx context.Context, group []*e2e.Proc) (*wire.InstanceStatus, error) {
	l, err := e2e.Leader(ctx, group)
	if err != nil {
		return nil, err
	}
	a, done, err := e2e.Admin(l)
	if err != nil {
		return nil, err
	}
	defer done()
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	st, err := a.Status(cctx, &wire.StatusRequest{})
	if err != nil {
		return nil, err
	}
	if len(st.Tiers) == 0 || len(st.Tiers[0].Instances) == 0 {
		return nil, fmt.Errorf("empty status")
	}
	return st.Tiers[0].Instances[0], nil
}

// placementAtEnd compares what runs (by the ledgers) with the live jobs: the
// jobs the global tier lists that the workload did not delete, plus the
// acknowledged submits it did not delete (missing from the list: lost jobs).
func placementAtEnd(ctx context.Context, t *Topology, ops []Op, res *ledger.Result) (want map[interfaces.ShardID]bool, lost, orphans []interfaces.ShardID, lostJobs []string) {
	deleted, tried := map[string]bool{}, map[string]bool{}
	acked := map[string]int{}
	for _, o := range ops {
		switch {
		case o.Kind == OpDelete:
			tried[o.Target] = true
			deleted[o.Target] = o.Acked()
		case o.Kind == OpSubmit && o.Acked():
			acked[o.Target] = o.Shards
		}
	}
	listed := listJobs(ctx, t)
	if listed == nil {
		return nil, nil, nil, nil // no global replica answered: try again
	}
	want = map[interfaces.ShardID]bool{}
	for j, n := range listed {
		if !deleted[j] { // a delete that failed left the job listed: it is live
			for i := 0; i < n; i++ {
				want[interfaces.ShardID(fmt.Sprintf("%s/%d", j, i))] = true
			}
		}
	}
	for j, n := range acked {
		if _, ok := listed[j]; !ok && !tried[j] {
			lostJobs = append(lostJobs, j)
			for i := 0; i < n; i++ {
				want[interfaces.ShardID(fmt.Sprintf("%s/%d", j, i))] = true
			}
		}
	}
	for s := range want {
		if len(res.Running[s]) != 1 {
			lost = append(lost, s) // two hosts are also an overlap violation
		}
	}
	for s := range res.Running {
		if !want[s] {
			orphans = append(orphans, s)
		}
	}
	sort.Slice(lost, func(i, j int) bool { return lost[i] < lost[j] })
	sort.Slice(orphans, func(i, j int) bool { return orphans[i] < orphans[j] })
	sort.Strings(lostJobs)
	return want, lost, orphans, lostJobs
}

// effectiveOps leaves out the deletes that failed and did not take effect
// (the job is still listed): a failed call may have landed, so a failed
// delete counts unless the job is still there.
func effectiveOps(ops []Op, listed map[string]int) []Op {
	var out []Op
	for _, o := range ops {
		if _, still := listed[o.Target]; o.Kind == OpDelete && !o.Acked() && still {
			continue
		}
		out = append(out, o)
	}
	return out
}

// listJobs asks the global tier for its jobs: job → shards (nil when no
// replica answers).
func listJobs(ctx context.Context, t *Topology) map[string]int {
	for _, p := range t.Cluster.Global {
		a, done, err := e2e.Admin(p)
		if err != nil {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		resp, err := a.ListJobs(cctx, &wire.ListJobsRequest{})
		cancel()
		done()
		if err == nil {
			listed := map[string]int{}
			for _, j := range resp.Jobs {
				listed[j.Id] = int(j.Shards)
			}
			return listed
		}
	}
	return nil
}
