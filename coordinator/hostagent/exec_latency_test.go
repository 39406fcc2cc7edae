package hostagent

import (
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/hostagent/driver/synthetic"
	"github.com/strata-sched/strata/coordinator/hostagent/internal/fakeclock"
	"github.com/strata-sched/strata/interfaces"
)

// reportWithExec runs an agent whose synthetic driver executes its shards'
// work (8 cores, the host's capacity) under discipline: a tight shard (0.4 cpu,
// SLO 20ms) and three loose ones (2.4 cpu each, SLO 2s), 95% of the host. It
// reports every 2s for 30s and returns the last report and the driver.
func reportWithExec(t *testing.T, discipline string) (interfaces.Report, *synthetic.Driver) {
	t.Helper()
	clk := fakeclock.New(t0)
	d, err := synthetic.New(synthetic.Config{Clock: clk, Seed: 11, Cores: 8, Discipline: discipline})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{dir: t.TempDir(), clock: clk, synth: d}
	a := r.openWith(t, "h1", d)
	t.Cleanup(func() { a.Close() })
	if err := a.LeaseGrant(ctx, clk.Now(), time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	shards := []interfaces.Shard{
		{ID: "tight", Job: "j", Load: interfaces.Load{CPU: 0.4, Tasks: 1}, InputRate: 200, LatencySLO: 20 * time.Millisecond},
	}
	for _, id := range []interfaces.ShardID{"l0", "l1", "l2"} {
		shards = append(shards, interfaces.Shard{ID: id, Job: "j", Load: interfaces.Load{CPU: 2.4, Tasks: 1}, InputRate: 1000, LatencySLO: 2 * time.Second})
	}
	for i, s := range shards {
		if err := a.Assign(ctx, clk.Now(), s, interfaces.Epoch(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	var rep interfaces.Report
	for range 15 {
		clk.Advance(2 * time.Second)
		rep = a.Report(clk.Now())
	}
	return rep, d
}

// TestReportCarriesMeasuredShardLatency: the per-shard p99 in the agent's
// report is the one the driver's execution core measured, and the host's p99
// is the worst of them; LLF keeps the tight shard within its SLO where FIFO
// does not.
func TestReportCarriesMeasuredShardLatency(t *testing.T) {
	slo := 20 * time.Millisecond
	var tight [2]time.Duration
	for i, disc := range []string{"llf", "fifo"} {
		rep, d := reportWithExec(t, disc)
		if len(rep.Shards) != 4 {
			t.Fatalf("%s: report shards %+v", disc, rep.Shards)
		}
		var worst time.Duration
		for _, sl := range rep.Shards {
			st, ok := d.ExecStats(sl.Shard)
			if !ok || st.Window.Completed == 0 {
				t.Fatalf("%s: shard %s not executed: %+v", disc, sl.Shard, st)
			}
			want, _ := synthetic.Measured(st)
			if sl.LatencyP99 != want || want == 10*time.Millisecond {
				t.Fatalf("%s: shard %s reports p99 %v, the core measured %v", disc, sl.Shard, sl.LatencyP99, want)
			}
			worst = max(worst, sl.LatencyP99)
			if sl.Shard == "tight" {
				tight[i] = sl.LatencyP99
			}
		}
		if rep.LatencyP99 != worst {
			t.Fatalf("%s: host p99 %v, worst shard %v", disc, rep.LatencyP99, worst)
		}
		t.Logf("%s: tight p99 %v, host p99 %v p50 %v", disc, tight[i], rep.LatencyP99, rep.LatencyP50)
	}
	if tight[0] > slo || tight[1] <= slo {
		t.Fatalf("tight shard p99: llf %v fifo %v, want llf ≤ %v < fifo", tight[0], tight[1], slo)
	}
}
