package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-sched/strata/examples/clickcount"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/tlsutil"
	"github.com/strata-sched/strata/sdk/stream"
	"github.com/strata-sched/strata/sdk/stream/natstest"
)

// streamWorker is one clickcount worker process attached to a host.
type streamWorker struct {
	host   string
	events string
	cmd    *exec.Cmd
}

func (w *streamWorker) kill() {
	if w.cmd != nil && w.cmd.Process != nil {
		_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
		_, _ = w.cmd.Process.Wait()
		w.cmd = nil
	}
}

func (w *streamWorker) stop() {
	if w.cmd != nil && w.cmd.Process != nil {
		_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _, _ = w.cmd.Process.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		w.cmd = nil
	}
}

// buildClickcount builds the example's binary into dir.
func buildClickcount(dir string) (string, error) {
	bin := filepath.Join(dir, "clickcount")
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "build", "-o", bin, "./examples/clickcount/cmd/clickcount")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}

// event is a line of a worker's --events file.
type event struct {
	Shard     string `json:"shard"`
	Epoch     uint64 `json:"epoch"`
	Kind      string `json:"kind"`
	At        int64  `json:"at_unix_nano"`
	Offset    uint64 `json:"offset"`
	Processed uint64 `json:"processed"`
	Lag       uint64 `json:"lag"`
	host      string
}

func readEvents(t *testing.T, ws []*streamWorker) []event {
	var out []event
	for _, w := range ws {
		f, err := os.Open(w.events)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var e event
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				e.host = w.host
				out = append(out, e)
			}
		}
		f.Close()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out
}

func pct(v []time.Duration, p float64) time.Duration {
	if len(v) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p*float64(len(s))+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

// TestStreamingExactlyOnce runs the clickcount example under a real
// hierarchy — strata global, two regions and 2×3 hosts as processes over
// mutual TLS on loopback, a real nats-server, one clickcount worker process
// per host attached to its host's callback service — while a producer
// publishes at a fixed rate: the third host of each region joins (the
// regions rebalance onto it), a host and its worker are killed with SIGKILL,
// and region-2 is drained. The fenced sink must then hold exactly the
// input's counts: no click lost, none counted twice. It logs the pause per
// move (the previous owner's last record to the new owner's first), the lag
// recovery after the host loss, and the throughput while the shards move
// against the steady state.
func TestStreamingExactlyOnce(t *testing.T) {
	dir := workDir(t)
	if os.Getenv("STRATA_STREAM_TIMELINE") != "" {
		dir, _ = os.MkdirTemp("", "strata-stream-")
		t.Logf("data and logs under %s", dir)
	}
	srv, err := natstest.Start(filepath.Join(dir, "nats"), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	bin, err := buildClickcount(dir)
	if err != nil {
		t.Fatal(err)
	}
	const (
		job        = "clicks"
		partitions = 12
		rate       = 600.0
	)
	hosts := []string{}
	for r := 1; r <= 2; r++ {
		for h := 1; h <= 3; h++ {
			hosts = append(hosts, fmt.Sprintf("region-%d-host-%d", r, h))
		}
	}
	ports, err := FreePorts(2 * len(hosts))
	if err != nil {
		t.Fatal(err)
	}
	cbAddr, httpAddr := map[string]string{}, map[string]string{}
	for i, h := range hosts {
		cbAddr[h], httpAddr[h] = fmt.Sprintf("127.0.0.1:%d", ports[2*i]), fmt.Sprintf("127.0.0.1:%d", ports[2*i+1])
	}
	spec := Spec{Replicas: 1, Regions: 2, HostsPerRegion: 3, HostCPU: 4,
		Timing:     Timing{Interval: 300 * time.Millisecond, LeaseTTL: 2 * time.Second, Grace: 100 * time.Millisecond, ReportInterval: 500 * time.Millisecond},
		HostDriver: func(host string) string { return fmt.Sprintf("{kind: callback, callback: {listen: %q}}", cbAddr[host]) }}
	c, err := NewCluster(dir, strataBin, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	for h, p := range c.Hosts { // metrics on listen.http
		f, err := os.OpenFile(p.Config, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(f, "listen: {http: %q}\n", httpAddr[h])
		f.Close()
	}
	late := map[string]bool{"region-1-host-3": true, "region-2-host-3": true}
	for _, p := range c.All() {
		if late[p.Name] {
			continue
		}
		if err := p.Start(c.Bin); err != nil {
			t.Fatal(err)
		}
	}

	workers := map[string]*streamWorker{}
	var wlist []*streamWorker
	startWorker := func(host string) {
		wdir := filepath.Join(dir, "worker", host)
		tdir := filepath.Join(wdir, "tls")
		if _, err := c.issue(tdir, tlsutil.Named(tlsutil.RoleWorker, "w-"+host)); err != nil {
			t.Fatal(err)
		}
		w := workers[host]
		if w == nil {
			w = &streamWorker{host: host, events: filepath.Join(wdir, "events.jsonl")}
			workers[host] = w
			wlist = append(wlist, w)
		}
		logf, err := os.OpenFile(filepath.Join(wdir, "log.txt"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		w.cmd = exec.Command(bin, "worker", "--addr", cbAddr[host], "--tls", tdir, "--host", host, "--id", "w-"+host,
			"--nats", srv.URL, "--job", job, "--events", w.events, "--progress", "200ms", "--checkpoint", "200ms")
		w.cmd.Stdout, w.cmd.Stderr = logf, logf
		w.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := w.cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, w := range wlist {
			w.stop()
		}
	})
	for _, h := range hosts {
		if !late[h] {
			startWorker(h)
		}
	}

	nc, err := nats.Connect(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	names := stream.Names{Job: job}
	if _, err := stream.OpenInput(context.Background(), js, names); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ga := admin(t, c.Global[0])
	eventually(t, "job submitted", 20*time.Second, func() error {
		_, err := ga.SubmitJob(ctx, &wire.SubmitJobRequest{Job: &wire.JobSpec{Id: job, Parallelism: partitions,
			ShardTemplate: &wire.Shard{Load: &wire.Load{Cpu: 0.5, Mem: 16 << 20, Tasks: 1}}}})
		if err != nil && isConflict(err) {
			return nil
		}
		return err
	})
	eventually(t, "all shards placed", 30*time.Second, func() error { return allPlaced(ctx, c, partitions) })

	// The producer runs from here to the end at a fixed rate.
	pctx, stopProducer := context.WithCancel(ctx)
	var published int
	var perr error
	var pwg sync.WaitGroup
	pwg.Add(1)
	go func() {
		defer pwg.Done()
		published, perr = clickcount.Producer{JS: js, Names: names, Partitions: partitions, Rate: rate, Keys: 500, Skew: 1.3, Seed: 7}.Run(pctx, 0)
	}()
	time.Sleep(2 * time.Second)
	tSteady := time.Now()
	// The hosts' metrics carry what the workers measure from the broker
	// and their clocks: event-time latency, lag, rates.
	eventually(t, "stream signals in a host's metrics", 10*time.Second, func() error {
		body, err := httpGetBody("http://" + httpAddr["region-1-host-2"] + "/metrics")
		if err != nil {
			return err
		}
		for _, m := range []string{"strata_host_latency_p99_seconds", "strata_host_input_records_per_second", "strata_host_rate_records_per_second", "strata_host_lag_records"} {
			v, ok := metricValue(body, m)
			if !ok {
				return fmt.Errorf("no %s", m)
			}
			if m != "strata_host_lag_records" && !(v > 0) {
				return fmt.Errorf("%s = %g", m, v)
			}
		}
		return nil
	})
	time.Sleep(2 * time.Second)

	// 1. Rebalancing: the third host of each region joins.
	tRebalance := time.Now()
	for h := range late {
		if err := c.Hosts[h].Start(c.Bin); err != nil {
			t.Fatal(err)
		}
		startWorker(h)
	}
	// The regions' balancers plan the rebalancing onto the new hosts and
	// the plans are applied at once (a periodic round would do the same,
	// at its own pace).
	eventually(t, "rebalancing plans applied", 30*time.Second, func() error {
		for name, group := range c.Regions {
			l, err := Leader(ctx, group)
			if err != nil {
				return err
			}
			a, done, err := Admin(l)
			if err != nil {
				return err
			}
			defer done()
			if _, err := regionChildren(ctx, group); err != nil {
				return err
			}
			pl, err := a.Plan(ctx, &wire.AdminPlanRequest{})
			if err != nil {
				return fmt.Errorf("%s: plan: %w", name, err)
			}
			if len(pl.GetPlan().GetMoves()) == 0 {
				return fmt.Errorf("%s: the plan has no move yet", name)
			}
			if _, err := a.ApplyPlan(ctx, &wire.ApplyPlanRequest{Token: pl.GetToken()}); err != nil {
				return fmt.Errorf("%s: apply: %w", name, err)
			}
		}
		return nil
	})
	eventually(t, "shards moved onto the new hosts", 30*time.Second, func() error {
		p, err := placement(ctx, c)
		if err != nil {
			return err
		}
		n := 0
		for _, h := range p {
			if late[h] {
				n++
			}
		}
		if n < 2 {
			return fmt.Errorf("%d shards on the new hosts", n)
		}
		return nil
	})
	settle(t, ctx, c, partitions)
	tRebalanced := time.Now()

	// 2. A host and its worker die (kill -9).
	victim := "region-1-host-1"
	p0, _ := placement(ctx, c)
	var onVictim []string
	for s, h := range p0 {
		if h == victim {
			onVictim = append(onVictim, string(s))
		}
	}
	tKill := time.Now()
	workers[victim].kill() // first: it must not see its host go and drop gracefully
	c.Hosts[victim].Kill()
	eventually(t, "the killed host's shards re-placed", 30*time.Second, func() error { return allPlaced(ctx, c, partitions, victim) })

	// 3. Region-2 is drained: its shards go to region-1.
	tDrain := time.Now()
	eventually(t, "drain of region-2 accepted", 20*time.Second, func() error {
		_, err := ga.Drain(ctx, &wire.DrainRequest{Child: "region-2"})
		return err
	})
	var r2 []string
	for h := range c.Hosts {
		if c.HostRegion[h] == "region-2" {
			r2 = append(r2, h)
		}
	}
	eventually(t, "region-2 empty", 40*time.Second, func() error { return allPlaced(ctx, c, partitions, append(r2, victim)...) })

	// The producer stops (closing every window); the sink must come to hold
	// exactly the input's counts.
	tEnd := time.Now()
	stopProducer()
	pwg.Wait()
	if perr != nil {
		t.Fatalf("producer: %v", perr)
	}
	sink, err := stream.OpenSink(ctx, js, names)
	if err != nil {
		t.Fatal(err)
	}
	var v clickcount.Verdict
	eventually(t, "the sink holds the input's counts", 30*time.Second, func() error {
		want, clicks, err := clickcount.Expected(ctx, js, names, time.Second)
		if err != nil {
			return err
		}
		if v, err = clickcount.Compare(ctx, sink, partitions, want, clicks); err != nil {
			return err
		}
		if v.DuplicateClicks > 0 || v.DuplicateWindows > 0 || len(v.Problems) > 0 {
			return nil // final: a duplicate never goes away
		}
		if !v.OK() {
			return fmt.Errorf("%s", v)
		}
		return nil
	})
	t.Logf("published %d clicks at %.0f/s; sink: %s", published, rate, v)
	if !v.OK() {
		t.Fatalf("the sink differs from the input: %s %v", v, v.Problems)
	}
	if v.Clicks != published {
		t.Fatalf("input stream holds %d clicks, the producer published %d", v.Clicks, published)
	}

	// Figures from the workers' events.
	evs := readEvents(t, wlist)
	type key struct {
		shard string
		epoch uint64
	}
	first, stopped, caught := map[key]event{}, map[key]event{}, map[key]event{}
	epochs := map[string][]uint64{}
	for _, e := range evs {
		k := key{e.Shard, e.Epoch}
		switch e.Kind {
		case "first":
			first[k] = e
			epochs[e.Shard] = append(epochs[e.Shard], e.Epoch)
		case "stopped":
			stopped[k] = e
		case "caughtup":
			caught[k] = e
		}
	}
	if os.Getenv("STRATA_STREAM_TIMELINE") != "" {
		for _, e := range evs {
			if e.Kind != "progress" {
				t.Logf("%s %s %s@%d %s offset %d", time.Unix(0, e.At).Format("15:04:05.000"), e.host, e.Shard, e.Epoch, e.Kind, e.Offset)
			}
		}
		t.Logf("steady %s rebalance %s rebalanced %s kill %s drain %s", tSteady.Format("15:04:05.000"), tRebalance.Format("15:04:05.000"), tRebalanced.Format("15:04:05.000"), tKill.Format("15:04:05.000"), tDrain.Format("15:04:05.000"))
	}
	var pauses, lossRecovery []time.Duration
	killed := map[string]bool{}
	for _, s := range onVictim {
		killed[s] = true
	}
	for s, es := range epochs {
		sort.Slice(es, func(i, j int) bool { return es[i] < es[j] })
		for i := 1; i < len(es); i++ {
			prev, cur := key{s, es[i-1]}, key{s, es[i]}
			if st, ok := stopped[prev]; ok {
				pauses = append(pauses, time.Duration(first[cur].At-st.At))
			} else if killed[s] && first[prev].host == victim {
				if cu, ok := caught[cur]; ok {
					lossRecovery = append(lossRecovery, time.Duration(cu.At-tKill.UnixNano()))
				}
			}
		}
	}
	t.Logf("moves with a handoff (old owner's last record → new owner's first): %d, pause p50 %v, p99 %v, max %v",
		len(pauses), pct(pauses, 0.5).Round(time.Millisecond), pct(pauses, 0.99).Round(time.Millisecond), pct(pauses, 1).Round(time.Millisecond))
	t.Logf("host loss: %d shards; kill → new owner caught up (backlog < one fetch): p50 %v, max %v (lease %v + grace %v)",
		len(onVictim), pct(lossRecovery, 0.5).Round(time.Millisecond), pct(lossRecovery, 1).Round(time.Millisecond), spec.Timing.LeaseTTL, spec.Timing.Grace)
	if len(pauses) == 0 {
		t.Errorf("no handoff measured: did any shard move?")
	}
	// Throughput: records processed per second, summed over the workers'
	// progress lines (processed counts restart with every new owner).
	last := map[key]uint64{}
	buckets := map[int64]uint64{}
	for _, e := range evs {
		if e.Kind != "progress" {
			continue
		}
		k := key{e.Shard, uint64(0)}
		k.epoch = uint64(len(e.host)) // a shard's counter is per task: per host is close enough here
		k.shard = e.Shard + "@" + e.host
		d := e.Processed
		if p, ok := last[k]; ok && e.Processed >= p {
			d = e.Processed - p
		}
		last[k] = e.Processed
		buckets[e.At/int64(time.Second)] += d
	}
	through := func(from, to time.Time) (mean float64, low uint64) {
		n := 0
		low = ^uint64(0)
		for s := from.Unix() + 1; s < to.Unix(); s++ {
			mean += float64(buckets[s])
			low = min(low, buckets[s])
			n++
		}
		if n == 0 {
			return 0, 0
		}
		return mean / float64(n), low
	}
	sm, sl := through(tSteady, tRebalance)
	rm, rl := through(tRebalance, tRebalanced)
	dm, dl := through(tDrain, tEnd)
	t.Logf("throughput (records/s, per-second buckets: mean, lowest): steady %.0f, %d; rebalancing %.0f, %d; drain %.0f, %d (input %.0f/s)", sm, sl, rm, rl, dm, dl, rate)
}

// settle waits until the placement has held still for a second with every
// shard placed (and none on avoid).
func settle(t *testing.T, ctx context.Context, c *Cluster, n int, avoid ...string) {
	t.Helper()
	eventually(t, "placement settled", 40*time.Second, func() error {
		before, err := placement(ctx, c)
		if err != nil {
			return err
		}
		time.Sleep(time.Second)
		if err := allPlaced(ctx, c, n, avoid...); err != nil {
			return err
		}
		after, err := placement(ctx, c)
		if err != nil {
			return err
		}
		for s, h := range before {
			if after[s] != h {
				return fmt.Errorf("shard %s moved %s → %s", s, h, after[s])
			}
		}
		return nil
	})
}

func httpGetBody(url string) (string, error) {
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// metricValue returns the value of the first sample of metric name.
func metricValue(body, name string) (float64, bool) {
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, name+" ") || strings.HasPrefix(l, name+"{") {
			f := strings.Fields(l)
			var v float64
			if _, err := fmt.Sscan(f[len(f)-1], &v); err == nil {
				return v, true
			}
		}
	}
	return 0, false
}
