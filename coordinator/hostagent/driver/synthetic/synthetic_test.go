package synthetic

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/hostagent/internal/fakeclock"
	"github.com/strata-sched/strata/interfaces"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func sp(id string) interfaces.Shard {
	return interfaces.Shard{ID: interfaces.ShardID(id), Job: "j", Load: interfaces.Load{CPU: 2, Mem: 100, Net: 10, Tasks: 1}, InputRate: 50}
}

func TestDeterministicAndBounded(t *testing.T) {
	clk := fakeclock.New(t0)
	cfg := Config{Clock: clk, Seed: 7, Wave: 0.2, Noise: 0.1}
	d1, _ := New(cfg)
	d2, _ := New(cfg)
	ctx := context.Background()
	for _, d := range []*Driver{d1, d2} {
		for _, id := range []string{"a", "b"} {
			if err := d.Start(ctx, sp(id), 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	distinct := map[float64]bool{}
	for i := 0; i < 50; i++ {
		clk.Advance(1300 * time.Millisecond)
		m1, m2 := d1.Measure(), d2.Measure()
		for id, l := range m1 {
			if !l.Load.Equal(m2[id].Load) || l.Rate != m2[id].Rate || l.LatencyP99 != m2[id].LatencyP99 {
				t.Fatalf("same seed and clock gave different loads for %s: %+v vs %+v", id, l, m2[id])
			}
			// |wave| ≤ 0.2, |noise| ≤ 0.1 → cpu within 2·[0.8·0.9, 1.2·1.1].
			if l.Load.CPU < 2*0.8*0.9 || l.Load.CPU > 2*1.2*1.1 || l.Load.Mem != 100 || l.Load.Tasks != 1 {
				t.Fatalf("load out of bounds: %+v", l.Load)
			}
			distinct[l.Load.CPU] = true
		}
	}
	if len(distinct) < 50 {
		t.Fatalf("wave+noise produced only %d distinct cpu values over 100 samples", len(distinct))
	}
	d3, _ := New(Config{Clock: clk, Seed: 8, Wave: 0.2, Noise: 0.1})
	_ = d3.Start(ctx, sp("a"), 1)
	if d3.Measure()["a"].Load.CPU == d1.Measure()["a"].Load.CPU {
		t.Fatal("a different seed gave the same load")
	}
}

func TestScaleProfileAndLifecycle(t *testing.T) {
	clk := fakeclock.New(t0)
	d, _ := New(Config{Clock: clk})
	ctx := context.Background()
	if err := d.Start(ctx, sp("a"), 1); err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx, sp("a"), 1); err != nil {
		t.Fatalf("same-epoch start must be a no-op: %v", err)
	}
	if err := d.Start(ctx, sp("a"), 2); !errors.Is(err, interfaces.ErrConflict) {
		t.Fatalf("other-epoch start: %v", err)
	}
	base := d.Measure()["a"]
	if base.Load.CPU != 2 || base.Rate != 50 || base.LatencyP99 != 10*time.Millisecond {
		t.Fatalf("flat config must give the spec load: %+v", base)
	}
	if err := d.Scale("a", 2); err != nil {
		t.Fatal(err)
	}
	dbl := d.Measure()["a"]
	if !dbl.Load.Equal(base.Load.Scale(2).With("tasks", 1)) || dbl.Rate != 100 || dbl.LatencyP99 != 20*time.Millisecond {
		t.Fatalf("double: %+v", dbl)
	}
	if err := d.SetProfile("a", Profile{CPU: 0.5}); err != nil {
		t.Fatal(err)
	}
	if got := d.Measure()["a"].Load.CPU; got != 1 {
		t.Fatalf("profile cpu 0.5 scaled ×2 = %v", got)
	}
	if err := d.Scale("a", -1); !errors.Is(err, interfaces.ErrInvalid) {
		t.Fatalf("negative scale: %v", err)
	}
	if err := d.SetProfile("a", Profile{Mem: -1}); !errors.Is(err, interfaces.ErrInvalid) {
		t.Fatalf("negative profile: %v", err)
	}
	if err := d.Stop("a"); err != nil {
		t.Fatal(err)
	}
	if err := d.Stop("a"); !errors.Is(err, interfaces.ErrNotFound) {
		t.Fatalf("second stop: %v", err)
	}
	if len(d.Measure()) != 0 {
		t.Fatal("stopped shard still measured")
	}
	// Scale persists across restarts of the shard.
	_ = d.Start(ctx, sp("a"), 3)
	if got := d.Measure()["a"].Load.CPU; got != 1 {
		t.Fatalf("after restart cpu %v, want the kept profile×scale 1", got)
	}
	if _, err := New(Config{Clock: clk, Wave: 1.5}); !errors.Is(err, interfaces.ErrInvalid) {
		t.Fatalf("wave 1.5: %v", err)
	}
	if _, err := New(Config{}); !errors.Is(err, interfaces.ErrInvalid) {
		t.Fatal("missing clock accepted")
	}
}
