package devcluster

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/telemetry"
	"github.com/strata-sched/strata/coordinator/telemetry/promtest"
	"github.com/strata-sched/strata/interfaces/wire"
)

// sessionLog counts, per tier, the "session: X connected" lines of the
// daemons' logs: the truth that strata_sessions_opened_total must sum to.
type sessionLog struct {
	mu   sync.Mutex
	buf  []byte
	seen map[string]int
}

var connectedLine = regexp.MustCompile(`^(\w+)/\S+ .*session: \S+ connected`)

func (l *sessionLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := strings.IndexByte(string(l.buf), '\n')
		if i < 0 {
			break
		}
		if m := connectedLine.FindStringSubmatch(string(l.buf[:i])); m != nil {
			l.seen[m[1]]++
		}
		l.buf = l.buf[i+1:]
	}
	return len(p), nil
}

func (l *sessionLog) counts() map[string]float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]float64{}
	for k, v := range l.seen {
		out[k] = float64(v)
	}
	return out
}

func equal(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestPrometheusScrapesEveryDaemon runs a real Prometheus against a dev
// cluster: every daemon's series are there once under its own labels, and sums
// by tier equal what the cluster says (its logs, its placement).
func TestPrometheusScrapesEveryDaemon(t *testing.T) {
	promtest.Need(t, "prometheus")
	logs := &sessionLog{seen: map[string]int{}}
	var out io.Writer = logs
	if w := testLog(t); w != nil {
		out = io.MultiWriter(logs, w)
	}
	c, err := Start(Options{Dir: t.TempDir(), Log: out, Regions: 2, HostsPerRegion: 2, Interval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	const n = 24
	if _, err := admin(t, c.Global.GRPCAddr()).SubmitJob(ctx, &wire.SubmitJobRequest{Job: &wire.JobSpec{
		Id: "prom", Parallelism: n, ShardTemplate: &wire.Shard{Load: &wire.Load{Cpu: 0.25, Mem: 1 << 28, Tasks: 1}},
	}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "all shards running once", 30*time.Second, func() error { return allRunningOnce(c, n) })

	eps := c.Endpoints()
	targets := make([]string, len(eps))
	for i, e := range eps {
		targets[i] = e.HTTP
	}
	// Every endpoint's output is its own daemon's (no two alike), and passes
	// promtool's lint of the exposition format.
	bodies := map[string]string{}
	for _, e := range eps {
		body, err := httpGet("http://" + e.HTTP + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		if other, dup := bodies[body]; dup {
			t.Errorf("%s and %s export the same metrics", other, e.Name)
		}
		bodies[body] = e.Name
		if strings.Contains(body, telemetry.Undocumented) {
			t.Errorf("%s exports a metric missing from the catalogue:\n%s", e.Name, grepLines(body, telemetry.Undocumented))
		}
		lint := exec.Command(promtest.Need(t, "promtool"), "check", "metrics")
		lint.Stdin = strings.NewReader(body)
		if out, err := lint.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics on %s: %v\n%s", e.Name, err, out)
		}
	}

	// 2s: under -race on a loaded machine a 1s scrape of the global tier
	// can time out, and its series go stale.
	p := promtest.Start(t, targets, 2*time.Second)
	query := func(q, by string) map[string]float64 {
		m, err := p.By(ctx, q, by)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	waitFor(t, "every target up", 60*time.Second, func() error {
		if up := query(`sum(up)`, ""); up[""] != float64(len(targets)) {
			return fmt.Errorf("%v of %d targets up", up[""], len(targets))
		}
		return nil
	})

	// Each daemon exactly once, under its own tier.
	wantDaemons := map[string]float64{"global": 1, "region": 2, "host": 4}
	if got := query(`count by (tier) (strata_build_info)`, "tier"); !equal(got, wantDaemons) {
		t.Errorf("daemons by tier: got %s, want %s", promtest.Format(got), promtest.Format(wantDaemons))
	}
	if got := query(`count by (tier, tier_instance, host) (strata_build_info) > 1`, "tier"); len(got) > 0 {
		t.Errorf("a daemon is exported twice: %s", promtest.Format(got))
	}
	if got := query(`count({exported_instance!=""} or {exported_job!=""})`, ""); len(got) > 0 {
		t.Errorf("series carry a label that collides with Prometheus' instance or job: %s", promtest.Format(got))
	}
	// Every tier instance has one leader, and Raft agrees with the tier.
	wantLeaders := map[string]float64{"global": 1, "region": 2}
	if got := query(`sum by (tier) (strata_leader)`, "tier"); !equal(got, wantLeaders) {
		t.Errorf("leaders by tier: got %s, want %s", promtest.Format(got), promtest.Format(wantLeaders))
	}
	if got := query(`sum by (tier) (strata_raft_state{state="Leader"})`, "tier"); !equal(got, wantLeaders) {
		t.Errorf("raft leaders by tier: got %s, want %s", promtest.Format(got), promtest.Format(wantLeaders))
	}
	// Gauges: each tier accounts for every shard once.
	waitFor(t, "shards by tier", 60*time.Second, func() error {
		want := map[string]float64{"global": n, "region": n}
		if got := query(`sum by (tier) (strata_shards_owned)`, "tier"); !equal(got, want) {
			return fmt.Errorf("strata_shards_owned by tier: got %s, want %s", promtest.Format(got), promtest.Format(want))
		}
		if got := query(`sum by (tier) (strata_host_shards_running)`, "tier"); got["host"] != n {
			return fmt.Errorf("strata_host_shards_running: got %s, want host=%d", promtest.Format(got), n)
		}
		return nil
	})
	// A counter summed by tier equals the per-tier truth: the sessions the
	// daemons' logs say they accepted (regions at the global tier, hosts at
	// the regions; more if a session was re-opened).
	waitFor(t, "sessions opened by tier", 60*time.Second, func() error {
		truth := logs.counts()
		got := query(`sum by (tier) (strata_sessions_opened_total)`, "tier")
		if !equal(got, truth) {
			return fmt.Errorf("sum by (tier) (strata_sessions_opened_total) = %s, the logs say %s", promtest.Format(got), promtest.Format(truth))
		}
		if truth["global"] < 2 || truth["region"] < 4 {
			return fmt.Errorf("too few sessions in the logs: %s", promtest.Format(truth))
		}
		t.Logf("sum by (tier) (strata_sessions_opened_total) = %s = the logs' count", promtest.Format(got))
		return nil
	})
	// Latencies are histograms, aggregatable across replicas.
	if got := query(`count by (tier) (strata_control_round_seconds_bucket{le="+Inf"})`, "tier"); got["global"] != 1 || got["region"] != 2 {
		t.Errorf("control round histograms by tier: %s", promtest.Format(got))
	}
	// The dashboard and the alert rules of deploy/ query what exists.
	checkDeployQueries(t, p)
}

func grepLines(body, s string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
