package synthetic

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/hostagent/internal/fakeclock"
	"github.com/strata-sched/strata/interfaces"
)

// host runs, on a 4-cpu host through the driver, a tight shard (0.2 cpu, 100
// records/s, SLO 20ms) beside three loose ones (1.2 cpu, 240 records/s each, no
// SLO: ordered by DefaultSLO 1s), measuring every 2s for a minute, and returns
// the last measurement and the tight shard's life-time misses.
func host(t *testing.T, discipline string) (map[interfaces.ShardID]interfaces.ShardLoad, uint64) {
	t.Helper()
	clk := fakeclock.New(t0)
	d, err := New(Config{Clock: clk, Seed: 3, Cores: 4, Discipline: discipline})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tight := interfaces.Shard{ID: "tight", Job: "j", Load: interfaces.Load{CPU: 0.2}, InputRate: 100, LatencySLO: 20 * time.Millisecond}
	if err := d.Start(ctx, tight, 1); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"l0", "l1", "l2"} {
		if err := d.Start(ctx, interfaces.Shard{ID: interfaces.ShardID(id), Job: "j", Load: interfaces.Load{CPU: 1.2}, InputRate: 240}, 1); err != nil {
			t.Fatal(err)
		}
	}
	var m map[interfaces.ShardID]interfaces.ShardLoad
	for range 30 {
		clk.Advance(2 * time.Second)
		m = d.Measure()
	}
	st, ok := d.ExecStats("tight")
	if !ok || st.Arrived < 5000 || st.Window.Completed == 0 {
		t.Fatalf("tight shard's execution stats: %+v %v", st, ok)
	}
	if p99, _ := Measured(st); m["tight"].LatencyP99 != p99 {
		t.Fatalf("reported p99 %v, measured %v", m["tight"].LatencyP99, p99)
	}
	return m, st.Missed
}

func TestMeasuredLatencyLLFvsFIFO(t *testing.T) {
	llf, llfMiss := host(t, "")
	fifo, fifoMiss := host(t, "fifo")
	slo := 20 * time.Millisecond
	t.Logf("tight p99 llf %v fifo %v; misses llf %d fifo %d; loose p99 llf %v fifo %v",
		llf["tight"].LatencyP99, fifo["tight"].LatencyP99, llfMiss, fifoMiss, llf["l0"].LatencyP99, fifo["l0"].LatencyP99)
	if llf["tight"].LatencyP99 > slo || fifo["tight"].LatencyP99 <= slo || llfMiss >= fifoMiss {
		t.Fatalf("want LLF within and FIFO beyond the tight SLO %v: llf %v (%d misses), fifo %v (%d misses)",
			slo, llf["tight"].LatencyP99, llfMiss, fifo["tight"].LatencyP99, fifoMiss)
	}
	// The loaded host's latencies are measured, not the 10ms model.
	for id, l := range llf {
		if l.LatencyP99 == 10*time.Millisecond || l.LatencyP99 == 0 {
			t.Fatalf("shard %s reports %v", id, l.LatencyP99)
		}
	}
	if llf["l0"].Load.CPU != 1.2 || llf["l0"].Rate != 240 {
		t.Fatalf("load and rate stay the offered ones: %+v", llf["l0"])
	}
}

func TestExecFallbackAndLifecycle(t *testing.T) {
	clk := fakeclock.New(t0)
	d, err := New(Config{Clock: clk, Cores: 2.5, Arrivals: "deterministic"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// No rate: the model.
	if err := d.Start(ctx, interfaces.Shard{ID: "idle", Job: "j", Load: interfaces.Load{CPU: 1}}, 1); err != nil {
		t.Fatal(err)
	}
	// 0.5 cpu in 50 items/s: 10ms of a 5/6-speed core = 12ms per item, alone.
	if err := d.Start(ctx, interfaces.Shard{ID: "a", Job: "j", Load: interfaces.Load{CPU: 0.5}, InputRate: 50, LatencySLO: time.Second}, 1); err != nil {
		t.Fatal(err)
	}
	if got := d.Measure()["a"].LatencyP99; got != 10*time.Millisecond {
		t.Fatalf("before any item completed: %v, want the model's 10ms", got)
	}
	clk.Advance(3 * time.Second)
	m := d.Measure()
	if m["idle"].LatencyP99 != 10*time.Millisecond {
		t.Fatalf("shard without rate: %v, want the model", m["idle"].LatencyP99)
	}
	if got := m["a"].LatencyP99; got < 12*time.Millisecond || got > 13*time.Millisecond {
		t.Fatalf("alone on the host: p99 %v, want ≈ 12ms", got)
	}
	if _, ok := d.ExecStats("idle"); ok {
		t.Fatal("a shard without rate runs in the core")
	}
	// Scaling to 0 stops arrivals; after the window the model (× 0) is back.
	if err := d.Scale("a", 0); err != nil {
		t.Fatal(err)
	}
	clk.Advance(20 * time.Second)
	if got := d.Measure()["a"].LatencyP99; got != 0 {
		t.Fatalf("scaled to 0: %v", got)
	}
	if err := d.Stop("a"); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.ExecStats("a"); ok {
		t.Fatal("stopped shard still in the core")
	}
	// Restart under a new epoch: a fresh queue.
	_ = d.Scale("a", 1)
	if err := d.Start(ctx, interfaces.Shard{ID: "a", Job: "j", Load: interfaces.Load{CPU: 0.5}, InputRate: 50, LatencySLO: time.Second}, 2); err != nil {
		t.Fatal(err)
	}
	if st, ok := d.ExecStats("a"); !ok || st.Arrived != 0 {
		t.Fatalf("restarted shard: %+v %v", st, ok)
	}
}

func TestExecConfigValidation(t *testing.T) {
	clk := fakeclock.New(t0)
	for _, tc := range []struct {
		cfg   Config
		field string
	}{
		{Config{Clock: clk, Discipline: "edf"}, "synthetic.discipline"},
		{Config{Clock: clk, Arrivals: "bursty"}, "synthetic.arrivals"},
		{Config{Clock: clk, Cores: -1}, "synthetic.cores"},
		{Config{Clock: clk, Window: -time.Second}, "synthetic.window"},
		{Config{Clock: clk, DefaultSLO: -1}, "synthetic.default_slo"},
		{Config{Clock: clk, MaxItemRate: -1}, "synthetic.max_item_rate"},
	} {
		_, err := New(tc.cfg)
		var fe *interfaces.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, interfaces.ErrInvalid) {
			t.Errorf("%+v: got %v, want a field error on %s", tc.cfg, err, tc.field)
		}
	}
	d, err := New(Config{Clock: clk, Cores: 1})
	if err != nil || d.cfg.Discipline != "llf" || d.cfg.Arrivals != "poisson" {
		t.Fatalf("defaults: %+v %v", d.cfg, err)
	}
}
