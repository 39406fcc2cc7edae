package exec

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func sid(p string, i int) interfaces.ShardID { return interfaces.ShardID(fmt.Sprintf("%s%d", p, i)) }

// mixed runs a 4-core host near saturation (0.95): one tight shard (0.2 cores,
// items of 2ms, SLO 20ms) and three loose shards (1.2 cores each, items of 5ms,
// SLO looseSLO) for a minute, and returns every shard's stats.
func mixed(t *testing.T, d Discipline, seed uint64, looseSLO time.Duration) map[interfaces.ShardID]Stats {
	t.Helper()
	c, err := New(Config{Cores: 4, Discipline: d, Seed: seed, Window: 40 * time.Second}, t0)
	if err != nil {
		t.Fatal(err)
	}
	must(t, c.Add(t0, "tight", Params{Rate: 100, Cost: 2 * time.Millisecond, SLO: 20 * time.Millisecond}))
	for i := range 3 {
		must(t, c.Add(t0, sid("loose", i), Params{Rate: 240, Cost: 5 * time.Millisecond, SLO: looseSLO}))
	}
	c.Advance(t0.Add(time.Minute))
	out := map[interfaces.ShardID]Stats{}
	for id := range c.shards {
		out[id], _ = c.Stats(id)
	}
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func totalMissed(m map[interfaces.ShardID]Stats) (missed, completed uint64) {
	for _, s := range m {
		missed += s.Missed
		completed += s.Completed
	}
	return
}

// TestLLFMeetsTightSLOWhereFIFOMisses: with a loose neighbour (SLO 1s) LLF keeps
// the tight shard's p99 within its SLO while FIFO does not, and LLF misses no
// more in total; with competing deadlines (loose SLO 50ms) LLF still misses no
// more than FIFO in total.
func TestLLFMeetsTightSLOWhereFIFOMisses(t *testing.T) {
	const slo = 20 * time.Millisecond
	for seed := uint64(1); seed <= 3; seed++ {
		llf, fifo := mixed(t, LLF, seed, time.Second), mixed(t, FIFO, seed, time.Second)
		lt, ft := llf["tight"], fifo["tight"]
		t.Logf("seed %d loose 1s: tight p99 llf %v fifo %v; tight misses llf %d fifo %d of %d", seed, lt.Window.P99, ft.Window.P99, lt.Missed, ft.Missed, lt.Arrived)
		if lt.Window.Completed < 1000 || ft.Window.Completed < 1000 {
			t.Fatalf("seed %d: too few items in the window: llf %d fifo %d", seed, lt.Window.Completed, ft.Window.Completed)
		}
		if lt.Window.P99 > slo {
			t.Errorf("seed %d: LLF tight p99 %v > SLO %v", seed, lt.Window.P99, slo)
		}
		if ft.Window.P99 <= slo {
			t.Errorf("seed %d: FIFO tight p99 %v ≤ SLO %v: the scenario does not stress the host", seed, ft.Window.P99, slo)
		}
		lm, lc := totalMissed(llf)
		fm, fc := totalMissed(fifo)
		if lm > fm {
			t.Errorf("seed %d: LLF missed %d > FIFO %d", seed, lm, fm)
		}
		// Same offered work, same cores: both disciplines keep up.
		if lc+20 < fc || fc+20 < lc {
			t.Errorf("seed %d: completed llf %d vs fifo %d", seed, lc, fc)
		}

		llf, fifo = mixed(t, LLF, seed, 50*time.Millisecond), mixed(t, FIFO, seed, 50*time.Millisecond)
		lm, _ = totalMissed(llf)
		fm, _ = totalMissed(fifo)
		t.Logf("seed %d loose 50ms: total misses llf %d fifo %d", seed, lm, fm)
		if lm > fm {
			t.Errorf("seed %d, loose SLO 50ms: LLF missed %d > FIFO %d", seed, lm, fm)
		}
	}
}

func TestDeterministicAndSeeded(t *testing.T) {
	a, b := mixed(t, LLF, 5, time.Second), mixed(t, LLF, 5, time.Second)
	for id := range a {
		if a[id] != b[id] {
			t.Fatalf("same seed, different stats for %s: %+v vs %+v", id, a[id], b[id])
		}
	}
	c := mixed(t, LLF, 6, time.Second)
	if c["tight"].Arrived == a["tight"].Arrived && c["loose0"].Arrived == a["loose0"].Arrived {
		t.Fatal("another seed gave the same arrivals")
	}
}

func TestDeterministicArrivalsExactLatency(t *testing.T) {
	// One shard, one core, an item every 10ms costing 4ms: nobody waits, every
	// latency is exactly 4ms.
	c, err := New(Config{Cores: 1, Arrivals: Deterministic}, t0)
	must(t, err)
	must(t, c.Add(t0, "a", Params{Rate: 100, Cost: 4 * time.Millisecond, SLO: 5 * time.Millisecond}))
	c.Advance(t0.Add(5*time.Second + 5*time.Millisecond))
	st, _ := c.Stats("a")
	if st.Arrived != 500 || st.Completed != 500 || st.Missed != 0 || st.Running != 0 || st.Queued != 0 {
		t.Fatalf("stats %+v", st)
	}
	if st.Window.P50 < 4*time.Millisecond || st.Window.P99 > 4*time.Millisecond*17/16+time.Microsecond*2 {
		t.Fatalf("p50 %v p99 %v, want ≈ 4ms (bucket upper edge)", st.Window.P50, st.Window.P99)
	}
	// Speed 0.5 doubles the service time: 8ms > SLO 5ms, every item misses.
	c2, _ := New(Config{Cores: 1, Speed: 0.5, Arrivals: Deterministic}, t0)
	must(t, c2.Add(t0, "a", Params{Rate: 100, Cost: 4 * time.Millisecond, SLO: 5 * time.Millisecond}))
	c2.Advance(t0.Add(time.Second + 10*time.Millisecond))
	if st, _ := c2.Stats("a"); st.Completed != 100 || st.Missed != 100 || st.Window.P50 < 8*time.Millisecond {
		t.Fatalf("speed 0.5: %+v", st)
	}
}

func TestWindowSlidesAndOldestQueued(t *testing.T) {
	c, _ := New(Config{Cores: 1, Arrivals: Deterministic, Window: 4 * time.Second}, t0)
	must(t, c.Add(t0, "a", Params{Rate: 10, Cost: time.Millisecond, SLO: time.Second}))
	c.Advance(t0.Add(2 * time.Second)) // the item arriving at 2s is still running
	if st, _ := c.Stats("a"); st.Window.Completed != 19 || st.Running != 1 {
		t.Fatalf("window %+v", st.Window)
	}
	must(t, c.Update(t0.Add(2*time.Second), "a", Params{Rate: 0, Cost: time.Millisecond, SLO: time.Second}))
	c.Advance(t0.Add(7 * time.Second))
	if st, _ := c.Stats("a"); st.Window.Completed != 0 || st.Window.P99 != 0 || st.Completed != 20 {
		t.Fatalf("after the window passed with no arrivals: %+v", st)
	}
	// A shard heavier than the host: the queue grows and its head ages.
	must(t, c.Update(t0.Add(7*time.Second), "a", Params{Rate: 100, Cost: 20 * time.Millisecond, SLO: time.Second}))
	c.Advance(t0.Add(9 * time.Second))
	st, _ := c.Stats("a")
	if st.Queued != 100 || st.OldestQueued < 900*time.Millisecond || st.Running != 1 {
		t.Fatalf("overloaded shard: %+v", st)
	}
	if st.Arrived != st.Completed+uint64(st.Running)+uint64(st.Queued)+st.Dropped {
		t.Fatalf("accounting: %+v", st)
	}
}

func TestMaxQueuedDropsAndMaxStepCuts(t *testing.T) {
	c, _ := New(Config{Cores: 1, Arrivals: Deterministic, MaxQueued: 10, MaxStep: time.Second}, t0)
	must(t, c.Add(t0, "a", Params{Rate: 100, Cost: time.Second, SLO: time.Second}))
	c.Advance(t0.Add(time.Hour))
	st, _ := c.Stats("a")
	// Only the last second of the hour is simulated: 100 arrivals.
	if st.Arrived != 100 || st.Queued != 10 || st.Running != 1 || st.Dropped != 89 || st.Completed != 0 {
		t.Fatalf("stats %+v", st)
	}
	if got := c.Now(); got != int64(time.Second) {
		t.Fatalf("core time %v after a cut hour, want 1s", time.Duration(got))
	}
	// Later times keep counting from the cut timeline.
	c.Advance(t0.Add(time.Hour + time.Second))
	if st, _ := c.Stats("a"); st.Completed != 1 {
		t.Fatalf("one more second: %+v", st)
	}
}

func TestRemoveFreesCoresForOthers(t *testing.T) {
	c, _ := New(Config{Cores: 1, Arrivals: Deterministic}, t0)
	must(t, c.Add(t0, "hog", Params{Rate: 1000, Cost: time.Second, SLO: time.Hour}))
	must(t, c.Add(t0, "b", Params{Rate: 10, Cost: time.Millisecond, SLO: time.Hour}))
	c.Advance(t0.Add(500 * time.Millisecond))
	if st, _ := c.Stats("b"); st.Completed != 0 {
		t.Fatalf("b ran while the hog held the only core: %+v", st)
	}
	fin, err := c.Remove(t0.Add(500*time.Millisecond), "hog")
	must(t, err)
	if fin.Running != 1 || fin.Queued == 0 {
		t.Fatalf("hog's final stats %+v", fin)
	}
	c.Advance(t0.Add(510 * time.Millisecond))
	if st, _ := c.Stats("b"); st.Completed != 5 || st.Queued != 0 || st.Running != 0 {
		t.Fatalf("b did not run once the hog left: %+v", st)
	}
	if _, err := c.Remove(t0, "hog"); !errors.Is(err, interfaces.ErrNotFound) {
		t.Fatalf("second remove: %v", err)
	}
	if err := c.Add(t0, "b", Params{Rate: 1, Cost: 1, SLO: 1}); !errors.Is(err, interfaces.ErrConflict) {
		t.Fatalf("duplicate add: %v", err)
	}
	if err := c.Update(t0, "zz", Params{Rate: 1, Cost: 1, SLO: 1}); !errors.Is(err, interfaces.ErrNotFound) {
		t.Fatalf("update of unknown: %v", err)
	}
}

func TestValidationNamesField(t *testing.T) {
	for _, tc := range []struct {
		cfg   Config
		field string
	}{
		{Config{}, "exec.cores"},
		{Config{Cores: 1, Discipline: "edf"}, "exec.discipline"},
		{Config{Cores: 1, Arrivals: "bursty"}, "exec.arrivals"},
		{Config{Cores: 1, Speed: -1}, "exec.speed"},
		{Config{Cores: 1, Window: -1}, "exec.window/max_queued/max_step"},
	} {
		_, err := New(tc.cfg, t0)
		var fe *interfaces.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, interfaces.ErrInvalid) {
			t.Errorf("%+v: got %v, want a field error on %s", tc.cfg, err, tc.field)
		}
	}
	c, _ := New(Config{Cores: 1}, t0)
	for _, tc := range []struct {
		p     Params
		field string
	}{
		{Params{Rate: -1, Cost: 1, SLO: 1}, "exec.shard[x].rate"},
		{Params{Rate: 1, Cost: 0, SLO: 1}, "exec.shard[x].cost"},
		{Params{Rate: 1, Cost: 1, SLO: 0}, "exec.shard[x].slo"},
	} {
		err := c.Add(t0, "x", tc.p)
		var fe *interfaces.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%+v: got %v, want a field error on %s", tc.p, err, tc.field)
		}
	}
	if d, err := ParseDiscipline("synthetic.discipline", ""); d != LLF || err != nil {
		t.Fatalf("default discipline %q %v", d, err)
	}
}

func TestBuckets(t *testing.T) {
	prev := -1
	for _, ns := range []int64{0, 1, 1023, 1024, 5000, 16 << 10, 17 << 10, 1e6, 123456789, 1e9, 60e9, 1e12} {
		b := bucketOf(ns)
		if b < prev {
			t.Fatalf("bucket of %d = %d below the previous %d", ns, b, prev)
		}
		prev = b
		up := int64(upperOf(b))
		if ns <= 1<<(maxExp+unitBits) && (up < ns || float64(up) > float64(ns)*17/16+1024) {
			t.Fatalf("latency %d → bucket %d with upper edge %d", ns, b, up)
		}
		if b > 0 && int64(upperOf(b-1)) >= ns {
			t.Fatalf("latency %d belongs below bucket %d", ns, b)
		}
	}
	if bucketOf(1<<62) != buckets-1 {
		t.Fatal("huge latency not in the last bucket")
	}
}
