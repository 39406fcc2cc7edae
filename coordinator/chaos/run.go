package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
	Dir              string
	Logf             func(format string, args ...any)
}

// Report is what a run found.
type Report struct {
	Config   Config
	Began    time.Time
	Faults   []Fault
	Ops      []Op
	Settled  time.Duration // how long after the last fault every shard ran once (or Config.Settle)
	Ledger   *ledger.Result
	Findings []Finding
	Stops    []Stop
	PerFault []FaultStop
	// Reconnects and Paused measure the static-stability and
	// worker-fencing goals per leader fault and per paused host.
	Reconnects []Reconnect
	Paused     []PausedWorkers
	// At the end: shards of live jobs that run on no host, the live jobs the
	// global tier no longer knows, and shards that run but belong to no live job.
	Lost, Orphans []interfaces.ShardID
	LostJobs      []string
	Expected      int
	// WorkersOff lists the live jobs' shards whose worker processes (exec
	// driver) do not beat exactly once at the end.
	WorkersOff    []interfaces.ShardID
	Workers       int // worker processes seen
	WorkerOverlap int // findings from the workers' heartbeats

	Listed map[string]int // the global tier's jobs at the end: job → shards

	want map[interfaces.ShardID]bool // the live jobs' shards at the end
}

// DoubleOwners counts the ledger's overlap and epoch violations and the
// workers' overlaps.
func (r *Report) DoubleOwners() (overlaps, epochs, workers int) {
	for _, v := range r.Ledger.Violations {
		switch v.Kind {
		case ledger.KindOverlap:
			overlaps++
		case ledger.KindEpoch:
			epochs++
		}
	}
	return overlaps, epochs, r.WorkerOverlap
}

// FailoverStops lists the stops a control-plane fault must not cause.
func (r *Report) FailoverStops() []Stop {
	var out []Stop
	for _, s := range r.Stops {
		if Failover(s.Cause) {
			out = append(out, s)
		}
	}
	return out
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
	if cfg.Duration == 0 {
		steps = steps[:len(Kinds)]
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
	slack := Slack{Host: cfg.Shape.Timing.LeaseTTL + cfg.Shape.Timing.Grace + 5*time.Second, ControlPlane: cfg.Gap}
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

// save writes the operations log, the fault log and the report under dir.
func (r *Report) save(dir string) error {
	write := func(name string, v any) error {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		switch xs := v.(type) {
		case []Op:
			for _, x := range xs {
				if err := enc.Encode(x); err != nil {
					return err
				}
			}
		case []Fault:
			for _, x := range xs {
				if err := enc.Encode(x); err != nil {
					return err
				}
			}
		}
		return os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644)
	}
	listed, err := json.Marshal(r.Listed)
	if err != nil {
		return err
	}
	return errors.Join(write("ops.jsonl", r.Ops), write("faults.jsonl", r.Faults), os.WriteFile(filepath.Join(dir, "listed.json"), listed, 0o644),
		os.WriteFile(filepath.Join(dir, "report.txt"), []byte(r.String()), 0o644))
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
	a, done, err := e2e.Admin(l.GRPC)
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
		a, done, err := e2e.Admin(p.GRPC)
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

// String prints the report.
func (r *Report) String() string {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "== chaos report: seed %d, began %s UTC\n", c.Seed, r.Began.UTC().Format("2006-01-02 15:04:05"))
	fmt.Fprintf(&b, "topology: %d global replicas, %d regions × %d replicas, %d hosts (%s driver), lease %v, grace %v\n",
		c.Shape.Replicas, c.Shape.Regions, c.Shape.Replicas, c.Shape.Regions*c.Shape.HostsPerRegion, c.Shape.Driver, c.Shape.Timing.LeaseTTL, c.Shape.Timing.Grace)
	byKind := map[Kind]int{}
	failed := 0
	for _, f := range r.Faults {
		byKind[f.Kind]++
		if f.Err != "" {
			failed++
		}
	}
	fmt.Fprintf(&b, "faults injected: %d (%d could not be injected)\n", len(r.Faults), failed)
	opc := map[string][2]int{}
	for _, o := range r.Ops {
		v := opc[o.Kind]
		v[0]++
		if o.Acked() {
			v[1]++
		}
		opc[o.Kind] = v
	}
	fmt.Fprintf(&b, "operations: %d (", len(r.Ops))
	for i, k := range []string{OpSubmit, OpDelete, OpDrain, OpUndrain} {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d/%d acked", k, opc[k][1], opc[k][0])
	}
	b.WriteString(")\n")
	shards := map[interfaces.ShardID]bool{}
	for _, iv := range r.Ledger.Intervals {
		shards[iv.Shard] = true
	}
	fmt.Fprintf(&b, "shards checked: %d (%d ownership intervals, %d ledger events, %d worker processes)\n", len(shards), len(r.Ledger.Intervals), r.Ledger.Events, r.Workers)
	ov, ep, wk := r.DoubleOwners()
	fmt.Fprintf(&b, "double owners: %d ledger overlaps, %d epoch violations, %d worker overlaps\n", ov, ep, wk)
	fmt.Fprintf(&b, "lost shards: %d of %d expected (lost jobs %d), orphans running %d; settle %v\n", len(r.Lost), r.Expected, len(r.LostJobs), len(r.Orphans), r.Settled.Round(time.Second))
	if c.Shape.Driver == "exec" {
		fmt.Fprintf(&b, "workers at the end: %d of %d expected shards not beating exactly once\n", len(r.WorkersOff), r.Expected)
	}
	causes := map[string]int{}
	for _, s := range r.Stops {
		causes[s.Cause]++
	}
	var cs []string
	for k, v := range causes {
		cs = append(cs, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(cs)
	fs := r.FailoverStops()
	fmt.Fprintf(&b, "stops: %d (%s); stopped by a control-plane fault: %d\n", len(r.Stops), strings.Join(cs, ", "), len(fs))
	type agg struct {
		n, shards, stopped int
		longest            time.Duration
	}
	per := map[Kind]*agg{}
	for _, p := range r.PerFault {
		a := per[p.Fault.Kind]
		if a == nil {
			a = &agg{}
			per[p.Fault.Kind] = a
		}
		a.n++
		a.shards += p.Shards
		a.stopped += p.Stopped
		a.longest = max(a.longest, p.Longest)
	}
	overlaps := OverlapsPerFault(r.Ledger, r.Faults, c.Gap)
	failByKind := map[string]int{}
	for _, s := range fs {
		failByKind[s.Fault]++
	}
	b.WriteString("per fault kind: faults, shards running at their start, of those stopped (an ownership gap before heal + gap), the longest gap, failover stops and overlapping interval pairs in their windows\n")
	fmt.Fprintf(&b, "%-40s %6s %8s %8s %9s %10s %9s\n", "fault", "count", "shards", "stopped", "longest", "failover", "overlaps")
	for _, k := range Kinds {
		if a := per[k]; a != nil {
			fmt.Fprintf(&b, "%-40s %6d %8d %8d %9s %10d %9d\n", k, a.n, a.shards, a.stopped, a.longest.Round(100*time.Millisecond), failByKind[string(k)], overlaps[string(k)])
		}
	}
	if n, m := failByKind[""], overlaps[""]; n+m > 0 {
		fmt.Fprintf(&b, "%-40s %6s %8s %8s %9s %10d %9d\n", "(outside any fault window)", "", "", "", "", n, m)
	}
	if len(r.Reconnects) > 0 {
		b.WriteString("leader faults: new leader elected / last child reconnected, after the fault began (children reconnected of all):\n")
		for _, x := range r.Reconnects {
			fmt.Fprintf(&b, "  %2d %-40s held %-6v elected %-8s reconnected %-8s (%d of %d)\n", x.Fault.Seq, x.Fault.Kind, x.Fault.End.Sub(x.Fault.Start).Round(100*time.Millisecond),
				orDash(x.Elected), orDash(x.Slowest), x.Reconnected, x.Children)
		}
	}
	for _, p := range r.Paused {
		fmt.Fprintf(&b, "paused host %s (fault %d, held %v): its %d workers beat for up to %v after SIGSTOP (lease %v)\n", p.Fault.Target, p.Fault.Seq,
			p.Fault.End.Sub(p.Fault.Start).Round(100*time.Millisecond), p.Workers, p.RanFor.Round(10*time.Millisecond), c.Shape.Timing.LeaseTTL)
	}
	b.WriteString("faults:\n")
	for _, f := range r.Faults {
		fmt.Fprintf(&b, "  %2d %s +%-6v %-40s %-22s held %v %s\n", f.Seq, f.Start.UTC().Format("15:04:05.000"), f.Start.Sub(r.Began).Round(time.Second), f.Kind, f.Target, f.End.Sub(f.Start).Round(100*time.Millisecond), f.Err)
	}
	const maxList = 25
	if len(r.Findings) > 0 {
		fmt.Fprintf(&b, "violations (%d, first %d):\n", len(r.Findings), min(maxList, len(r.Findings)))
		for _, f := range r.Findings[:min(maxList, len(r.Findings))] {
			fmt.Fprintf(&b, "  seen %s: %s\n", f.Seen.UTC().Format("15:04:05"), f.Text)
		}
	}
	if len(fs) > 0 {
		fmt.Fprintf(&b, "stopped by a control-plane fault (%d, first %d):\n", len(fs), min(maxList, len(fs)))
		for _, s := range fs[:min(maxList, len(fs))] {
			iv := s.Interval
			fmt.Fprintf(&b, "  %s on %s epoch %d stopped %s (ran from %s): %s [window: %s]\n", iv.Shard, iv.Host, iv.Epoch, stamp(iv.End), stamp(iv.Start), s.Cause, orNone(s.Fault))
		}
	}
	if len(r.Lost) > 0 {
		fmt.Fprintf(&b, "lost (first %d): %v\n", min(maxList, len(r.Lost)), r.Lost[:min(maxList, len(r.Lost))])
	}
	if len(r.LostJobs) > 0 {
		fmt.Fprintf(&b, "lost jobs: %v\n", r.LostJobs)
	}
	if len(r.Orphans) > 0 {
		fmt.Fprintf(&b, "orphans (first %d): %v\n", min(maxList, len(r.Orphans)), r.Orphans[:min(maxList, len(r.Orphans))])
	}
	return b.String()
}

func orDash(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return d.Round(10 * time.Millisecond).String()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
