package hostagent

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/hostagent/driver"
	"github.com/strata-sched/strata/coordinator/hostagent/driver/synthetic"
	"github.com/strata-sched/strata/coordinator/hostagent/internal/fakeclock"
	"github.com/strata-sched/strata/coordinator/hostagent/ledger"
	"github.com/strata-sched/strata/interfaces"
)

type rig struct {
	dir   string
	clock *fakeclock.Clock
	synth *synthetic.Driver
	scfg  synthetic.Config
}

func newRig(t *testing.T) *rig {
	clk := fakeclock.New(t0)
	scfg := synthetic.Config{Clock: clk, Seed: 42, Wave: 0.1, Noise: 0.05}
	d, err := synthetic.New(scfg)
	if err != nil {
		t.Fatal(err)
	}
	return &rig{dir: t.TempDir(), clock: clk, synth: d, scfg: scfg}
}

func (r *rig) open(t *testing.T, host string) *Agent {
	t.Helper()
	return r.openWith(t, host, r.synth)
}

func (r *rig) openWith(t *testing.T, host string, d driver.Driver) *Agent {
	t.Helper()
	a, err := Open(Config{
		Host:       interfaces.ChildID(host),
		StorePath:  filepath.Join(r.dir, host+".db"),
		LedgerPath: filepath.Join(r.dir, host+".ledger"),
		Driver:     d,
		Clock:      r.clock,
		Capacity:   interfaces.Load{CPU: 8, Mem: 1 << 34, Net: 1e9, Tasks: 100},
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// crash releases the agent's files without stopping anything, as kill -9 would.
func crash(a *Agent) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	a.store.Close()
	a.ledger.Close()
}

func (r *rig) check(t *testing.T, expect []interfaces.ShardID, hosts ...string) *ledger.Result {
	t.Helper()
	var files []string
	for _, h := range hosts {
		files = append(files, filepath.Join(r.dir, h+".ledger"))
	}
	res, err := ledger.Check(files...)
	if err != nil {
		t.Fatal(err)
	}
	res.ExpectRunning(expect)
	return res
}

var ctx = context.Background()

func TestAgentAssignRevokeReport(t *testing.T) {
	r := newRig(t)
	a := r.open(t, "h1")
	defer a.Close()
	if h := a.Hello(); h.Host != "h1" || len(h.Held) != 0 {
		t.Fatalf("hello: %+v", h)
	}
	now := r.clock.Now()
	if err := a.LeaseGrant(ctx, now, 10*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"a", "b", "c"} {
		if err := a.Assign(ctx, now, spec(id), interfaces.Epoch(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Revoke(ctx, now, "c", 3); err != nil {
		t.Fatal(err)
	}
	run := r.synth.Running()
	if len(run) != 2 || run["a"] != 1 || run["b"] != 2 {
		t.Fatalf("driver runs %v", run)
	}
	r.clock.Advance(1500 * time.Millisecond)
	rep := a.Report(r.clock.Now())
	if rep.Child != "h1" || rep.Epoch != 1 || len(rep.Shards) != 2 {
		t.Fatalf("report: %+v", rep)
	}
	var used interfaces.Load
	var thr float64
	for i, id := range []string{"a", "b"} {
		want := synthetic.LoadAt(r.scfg, spec(id), 1, synthetic.Profile{}, r.clock.Now())
		if got := rep.Shards[i]; got.Shard != interfaces.ShardID(id) || !got.Load.Equal(want.Load) || got.Rate != want.Rate {
			t.Fatalf("shard %s: got %+v want %+v", id, got, want)
		}
		used = used.Add(want.Load)
		thr += want.Rate
	}
	if !rep.Used.Equal(used) || rep.Throughput != thr {
		t.Fatalf("used %+v thr %v, want %+v %v", rep.Used, rep.Throughput, used, thr)
	}
	if !rep.Headroom.Equal(rep.Capacity.Sub(used)) || len(rep.Hints) != 1 || rep.Hints[0].Kind != interfaces.HintHeadroom {
		t.Fatalf("headroom/hints: %+v %+v", rep.Headroom, rep.Hints)
	}
	if rep.LatencyP99 < rep.LatencyP50 || rep.LatencyP99 == 0 {
		t.Fatalf("latencies p50 %v p99 %v", rep.LatencyP50, rep.LatencyP99)
	}
	// Overload a: the report asks to shed it.
	if err := r.synth.Scale("a", 20); err != nil {
		t.Fatal(err)
	}
	rep = a.Report(r.clock.Now())
	if rep.Epoch != 2 || len(rep.Hints) != 2 || rep.Hints[1].Kind != interfaces.HintShed ||
		len(rep.Hints[1].Shards) != 1 || rep.Hints[1].Shards[0] != "a" || rep.Headroom.CPU != 0 {
		t.Fatalf("overloaded report: %+v", rep)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if res := r.check(t, nil, "h1"); !res.OK() || len(res.Running) != 0 || len(res.Intervals) != 3 {
		t.Fatalf("ledger: %v running=%v intervals=%d", res.Err(), res.Running, len(res.Intervals))
	}
}

func TestAgentRestartResumesOnConfirm(t *testing.T) {
	r := newRig(t)
	a := r.open(t, "h1")
	now := r.clock.Now()
	if err := a.LeaseGrant(ctx, now, 10*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	_ = a.Assign(ctx, now, spec("a"), 3)
	_ = a.Assign(ctx, now, spec("b"), 5)
	_ = a.Revoke(ctx, now, "z", 7)
	crash(a)
	// The process died with the agent: a fresh driver runs nothing.
	r.synth, _ = synthetic.New(r.scfg)
	r.clock.Advance(30 * time.Second)

	a = r.open(t, "h1")
	defer a.Close()
	held := a.Hello().Held
	if len(held) != 2 || held[0] != (Held{Shard: "a", Epoch: 3, Fenced: true}) || held[1] != (Held{Shard: "b", Epoch: 5, Fenced: true}) {
		t.Fatalf("held after restart: %+v", held)
	}
	if len(r.synth.Running()) != 0 || len(a.Running()) != 0 {
		t.Fatal("nothing may run before a lease")
	}
	// The recovered stops are at the persisted deadline (t0+8s), not at restart.
	evs, err := ledger.ReadFile(filepath.Join(r.dir, "h1.ledger"))
	if err != nil {
		t.Fatal(err)
	}
	var recovered int
	for _, e := range evs {
		if e.Recovered {
			recovered++
			if e.TS != t0.Add(8*time.Second).UnixNano() {
				t.Fatalf("recovered stop at %d, want the lease deadline", e.TS)
			}
		}
	}
	if recovered != 2 {
		t.Fatalf("recovered stops: %d, want 2", recovered)
	}
	now = r.clock.Now()
	if err := a.Assign(ctx, now, spec("z"), 7); !errors.Is(err, interfaces.ErrStaleEpoch) {
		t.Fatalf("tombstone lost across restart: %v", err)
	}
	if err := a.LeaseGrant(ctx, now, 10*time.Second, []interfaces.Assignment{{Shard: "a", Epoch: 3}}); err != nil {
		t.Fatal(err)
	}
	if run := r.synth.Running(); len(run) != 1 || run["a"] != 3 {
		t.Fatalf("after confirm driver runs %v", run)
	}
	if err := a.Revoke(ctx, now, "b", 5); err != nil {
		t.Fatal(err)
	}
	if h := a.Held(); len(h) != 1 || h[0].Shard != "a" || h[0].Fenced {
		t.Fatalf("held: %+v", h)
	}
	if res := r.check(t, []interfaces.ShardID{"a"}, "h1"); !res.OK() {
		t.Fatal(res.Err())
	}
}

func TestAgentSelfFencesViaRun(t *testing.T) {
	r := newRig(t)
	a := r.open(t, "h1")
	now := r.clock.Now()
	_ = a.LeaseGrant(ctx, now, 10*time.Second, nil)
	_ = a.Assign(ctx, now, spec("a"), 1)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx, func(err error) { t.Error(err) }) }()

	// Advance in tick-sized steps until the run loop has fenced the agent.
	deadline := t0.Add(8 * time.Second)
	giveUp := time.Now().Add(30 * time.Second)
	for len(a.Running()) > 0 {
		if time.Now().After(giveUp) {
			t.Fatal("run loop never fenced")
		}
		if r.clock.Waiters() > 0 {
			r.clock.Advance(50 * time.Millisecond)
		}
		time.Sleep(time.Microsecond)
	}
	if r.clock.Now().Before(deadline) {
		t.Fatalf("fenced at %v, before the deadline %v", r.clock.Now(), deadline)
	}
	if len(r.synth.Running()) != 0 {
		t.Fatal("driver still runs after the fence")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("run returned %v", err)
	}
	a.Close()
	st, err := OpenStore(filepath.Join(r.dir, "h1.db"), "h1")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, err := st.Load()
	if err != nil || len(s.Records) != 1 || !s.Records[0].Fenced {
		t.Fatalf("store after fence: %+v %v", s, err)
	}
}

func TestAgentStartFailure(t *testing.T) {
	r := newRig(t)
	a := r.open(t, "h1")
	defer a.Close()
	now := r.clock.Now()
	_ = a.LeaseGrant(ctx, now, 10*time.Second, nil)
	boom := errors.New("no slots")
	r.synth.FailNextStart(boom)
	err := a.Assign(ctx, now, spec("a"), 1)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "start a@1") {
		t.Fatalf("assign with failing driver: %v", err)
	}
	if len(a.Held()) != 0 {
		t.Fatal("failed shard must be dropped")
	}
	if err := a.Assign(ctx, now, spec("a"), 2); err != nil {
		t.Fatalf("a newer epoch after a failed start: %v", err)
	}
	if res := r.check(t, []interfaces.ShardID{"a"}, "h1"); !res.OK() || len(res.Intervals) != 2 {
		t.Fatalf("ledger: %v, %d intervals", res.Err(), len(res.Intervals))
	}
}

// TestHandoverRespectsLease plays the parent's side of a move after a silent
// child: the parent re-places only after ttl + grace from its own send time. The
// ledgers of both hosts show no overlap. Re-placing before the old owner's fence
// is caught by the checker.
func TestHandoverRespectsLease(t *testing.T) {
	for _, tc := range []struct {
		name    string
		replace time.Duration // after the parent's send time
		clean   bool
	}{
		{"after ttl+grace", 10*time.Second + 2*time.Second, true},
		{"too early", 5 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			d2, _ := synthetic.New(r.scfg)
			h1, h2 := r.open(t, "h1"), r.openWith(t, "h2", d2)
			defer h1.Close()
			defer h2.Close()
			send := r.clock.Now()
			recv := send.Add(20 * time.Millisecond) // delivery delay
			_ = h1.LeaseGrant(ctx, recv, 10*time.Second, nil)
			_ = h1.Assign(ctx, recv, spec("s1"), 1)
			// h1 goes silent; its own ticks fence it.
			for now := recv; now.Before(send.Add(tc.replace)); now = now.Add(50 * time.Millisecond) {
				r.clock.Set(now)
				if err := h1.Tick(ctx, now); err != nil {
					t.Fatal(err)
				}
			}
			at := send.Add(tc.replace)
			r.clock.Set(at)
			_ = h2.LeaseGrant(ctx, at, 10*time.Second, nil)
			if err := h2.Assign(ctx, at, spec("s1"), 2); err != nil {
				t.Fatal(err)
			}
			res := r.check(t, []interfaces.ShardID{"s1"}, "h1", "h2")
			if res.OK() != tc.clean {
				t.Fatalf("clean=%v want %v: %v", res.OK(), tc.clean, res.Err())
			}
			if !tc.clean && (len(res.Violations) != 1 || res.Violations[0].Kind != ledger.KindOverlap) {
				t.Fatalf("want one overlap, got %v", res.Violations)
			}
		})
	}
}

func TestOpenValidates(t *testing.T) {
	r := newRig(t)
	base := Config{Host: "h1", StorePath: filepath.Join(r.dir, "x.db"), LedgerPath: filepath.Join(r.dir, "x.l"),
		Driver: r.synth, Clock: r.clock, Capacity: interfaces.Load{CPU: 1}}
	for field, mut := range map[string]func(*Config){
		"host":          func(c *Config) { c.Host = "" },
		"driver":        func(c *Config) { c.Driver = nil },
		"clock":         func(c *Config) { c.Clock = nil },
		"store_path":    func(c *Config) { c.StorePath = "" },
		"ledger_path":   func(c *Config) { c.LedgerPath = "" },
		"capacity":      func(c *Config) { c.Capacity = interfaces.Load{} },
		"tick_interval": func(c *Config) { c.TickInterval = -1 },
	} {
		c := base
		mut(&c)
		if _, err := Open(c); !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v", field, err)
		}
	}
}

// blockingDriver's Start waits until its context ends.
type blockingDriver struct{ synthetic.Driver }

func (b *blockingDriver) Start(ctx context.Context, _ interfaces.Shard, _ interfaces.Epoch) error {
	<-ctx.Done()
	return ctx.Err()
}

func TestStartCannotOutlastLease(t *testing.T) {
	r := newRig(t)
	a := r.openWith(t, "h1", &blockingDriver{})
	defer a.Close()
	_ = a.LeaseGrant(ctx, r.clock.Now(), 500*time.Millisecond, nil) // fence in 400ms
	err := a.Assign(ctx, r.clock.Now(), spec("a"), 1)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("blocked start: %v", err)
	}
	if len(a.Held()) != 0 {
		t.Fatal("a start that ran out of lease must drop the shard")
	}
}

func TestPersistFailureCancelsStart(t *testing.T) {
	r := newRig(t)
	a := r.open(t, "h1")
	now := r.clock.Now()
	_ = a.LeaseGrant(ctx, now, 10*time.Second, nil)
	a.store.Close() // every write now fails
	err := a.Assign(ctx, now, spec("a"), 1)
	if err == nil || !strings.Contains(err.Error(), "persist a@1") {
		t.Fatalf("assign with a dead store: %v", err)
	}
	if len(r.synth.Running()) != 0 || len(a.Held()) != 0 {
		t.Fatalf("a shard started without a durable record: driver %v held %v", r.synth.Running(), a.Held())
	}
	a.ledger.Close()
	a.closed = true
	res := r.check(t, nil, "h1")
	if !res.OK() || len(res.Intervals) != 0 {
		t.Fatalf("ledger must show no run: %v %+v", res.Err(), res.Intervals)
	}
}
