package hostagent

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/hostagent/driver/synthetic"
	"github.com/strata-sched/strata/coordinator/hostagent/internal/fakeclock"
	"github.com/strata-sched/strata/interfaces"
)

// stickyDriver is the synthetic driver whose next stop of a shard in failNext
// fails (the process does not go away). Stops may run side by side.
type stickyDriver struct {
	*synthetic.Driver
	mu       sync.Mutex
	failNext map[interfaces.ShardID]bool
}

func (d *stickyDriver) failStop(id interfaces.ShardID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failNext[id] = true
}

func (d *stickyDriver) Stop(id interfaces.ShardID) error {
	d.mu.Lock()
	fail := d.failNext[id]
	delete(d.failNext, id)
	d.mu.Unlock()
	if fail {
		return errors.New("kill: operation not permitted")
	}
	return d.Driver.Stop(id)
}

// runs reports the epoch the driver runs shard under (0: not running).
func (d *stickyDriver) runs(shard interfaces.ShardID) interfaces.Epoch { return d.Running()[shard] }

// A stop that fails leaves the shard running in the driver: the agent must keep
// holding it (so it reports it, and a retry stops it), must not acknowledge a
// revoke, must not start a newer epoch beside it, and must keep trying to
// fence it after its lease ran out. Each of these used to drop the shard while
// the driver still ran it: a shard on two hosts.
func TestFailedStopKeepsTheShard(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	d := &stickyDriver{Driver: r.synth, failNext: map[interfaces.ShardID]bool{}}
	a := r.openWith(t, "h1", d)
	defer a.Close()
	now := r.clock.Now()
	if err := a.LeaseGrant(ctx, now, 10*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"a", "b", "c"} {
		if err := a.Assign(ctx, now, spec(s), 1); err != nil {
			t.Fatal(err)
		}
	}
	held := func(shard interfaces.ShardID) (interfaces.Epoch, bool) {
		for _, h := range a.Held() {
			if h.Shard == shard {
				return h.Epoch, h.Fenced
			}
		}
		return 0, false
	}

	// Revoke: refused while the stop fails, the shard held and running; the
	// retry stops it and leaves the tombstone.
	d.failStop("a")
	if err := a.Revoke(ctx, now, "a", 2); err == nil || !strings.Contains(err.Error(), "operation not permitted") {
		t.Fatalf("revoke with a failing stop: %v, want the stop's error", err)
	}
	if e, fenced := held("a"); e != 1 || fenced || d.runs("a") != 1 {
		t.Fatalf("after a failed revoke: held at %d (fenced %v), driver runs it at %d; want held and running at 1", e, fenced, d.runs("a"))
	}
	if _, ok := a.core.Tombstone("a"); ok {
		t.Fatal("a failed revoke left a tombstone")
	}
	if err := a.Revoke(ctx, now, "a", 2); err != nil {
		t.Fatal(err)
	}
	if e, _ := held("a"); e != 0 || d.runs("a") != 0 {
		t.Fatalf("after the retried revoke: held at %d, driver runs it at %d", e, d.runs("a"))
	}
	if tomb, ok := a.core.Tombstone("a"); !ok || tomb != 2 {
		t.Fatalf("tombstone after the revoke: %d %v, want 2", tomb, ok)
	}

	// Assign under a newer epoch: the old run cannot be stopped, so the new
	// one does not start beside it.
	d.failStop("b")
	if err := a.Assign(ctx, now, spec("b"), 3); err == nil {
		t.Fatal("an assign whose old run could not be stopped succeeded")
	}
	if e, fenced := held("b"); e != 1 || fenced || d.runs("b") != 1 {
		t.Fatalf("after a failed re-assign: held at %d (fenced %v), driver runs it at %d; want 1", e, fenced, d.runs("b"))
	}
	if err := a.Assign(ctx, now, spec("b"), 3); err != nil {
		t.Fatal(err)
	}
	if e, _ := held("b"); e != 3 || d.runs("b") != 3 {
		t.Fatalf("after the retried assign: held at %d, driver runs it at %d; want 3", e, d.runs("b"))
	}

	// Self-fence: the lease runs out and the stop of b fails; b stays
	// running (held unfenced, as it is), c is fenced; the next tick stops b.
	late := now.Add(time.Minute)
	d.failStop("b")
	if err := a.Tick(ctx, late); err == nil {
		t.Fatal("a fence with a failing stop reported no error")
	}
	if _, fenced := held("b"); fenced || d.runs("b") != 3 {
		t.Fatalf("after a failed fence stop: b fenced %v, driver runs it at %d; want running at 3", fenced, d.runs("b"))
	}
	if _, fenced := held("c"); !fenced || d.runs("c") != 0 {
		t.Fatalf("c: fenced %v, driver runs it at %d; want fenced and stopped", fenced, d.runs("c"))
	}
	if len(a.Running()) != 1 {
		t.Fatalf("running after the failed fence: %v, want [b]", a.Running())
	}
	if err := a.Tick(ctx, late.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, fenced := held("b"); !fenced || d.runs("b") != 0 {
		t.Fatalf("after the next tick: b fenced %v, driver runs it at %d; want fenced and stopped", fenced, d.runs("b"))
	}
	// The ledger's intervals cover what ran: nothing runs now.
	r.check(t, nil, "h1")
}

// budgetDriver is a driver that says its stops may take 2.5s.
type budgetDriver struct{ *synthetic.Driver }

func (budgetDriver) StopBudget() time.Duration { return 2500 * time.Millisecond }

// The Hello announces the driver's stop budget; a driver that says nothing
// announces none.
func TestHelloAnnouncesTheStopBudget(t *testing.T) {
	r := newRig(t)
	a := r.openWith(t, "h1", budgetDriver{r.synth})
	defer a.Close()
	if got := a.HelloMessage("host", nil).GetHello().GetStopBudgetNanos(); got != int64(2500*time.Millisecond) {
		t.Errorf("hello stop budget %v, want 2.5s", time.Duration(got))
	}
	b := r.open(t, "h2")
	defer b.Close()
	if got := b.HelloMessage("host", nil).GetHello().GetStopBudgetNanos(); got != 0 {
		t.Errorf("synthetic driver's hello stop budget %v, want 0", time.Duration(got))
	}
}

// slowStops is a driver whose every stop takes x on the fake clock (a process
// that ignores SIGTERM: StopTimeout, then the kill). A stop reads the clock,
// waits (in real time, at most a second) until want stops have begun, then
// moves the clock to its start + x: stops run side by side all end at the
// fence's time + x, stops run one after another at + x, + 2x, ….
type slowStops struct {
	*synthetic.Driver
	clk   *fakeclock.Clock
	x     time.Duration
	want  int
	mu    sync.Mutex
	begun int
	all   chan struct{}
}

func (d *slowStops) Stop(id interfaces.ShardID) error {
	start := d.clk.Now()
	d.mu.Lock()
	if d.begun++; d.begun == d.want {
		close(d.all)
	}
	d.mu.Unlock()
	select {
	case <-d.all:
	case <-time.After(time.Second):
	}
	d.mu.Lock()
	if end := start.Add(d.x); end.After(d.clk.Now()) {
		d.clk.Set(end)
	}
	d.mu.Unlock()
	return d.Driver.Stop(id)
}

func (d *slowStops) StopBudget() time.Duration { return d.x }

// A fence stops every running shard within one stop budget, as the parent
// counts it (lease + budget + grace): the stops run side by side. One after
// another, three 5.5s stops took 16.5s and the parent's re-placement overlapped
// the last two (a review's probe).
func TestFenceStopsWithinOneBudget(t *testing.T) {
	r := newRig(t)
	x, ttl := 5500*time.Millisecond, 4*time.Second
	d := &slowStops{Driver: r.synth, clk: r.clock, x: x, want: 3, all: make(chan struct{})}
	a := r.openWith(t, "h1", d)
	defer a.Close()
	now := r.clock.Now()
	if err := a.LeaseGrant(ctx, now, ttl, nil); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"s1", "s2", "s3"} {
		if err := a.Assign(ctx, now, spec(s), 1); err != nil {
			t.Fatal(err)
		}
	}
	fence := now.Add(ttl) // past the deadline (ttl - margin)
	r.clock.Set(fence)
	if err := a.Tick(ctx, fence); err != nil {
		t.Fatal(err)
	}
	if len(a.Running()) != 0 {
		t.Fatalf("running after the fence: %v", a.Running())
	}
	res := r.check(t, nil, "h1")
	for _, iv := range res.Intervals {
		if stop := time.Unix(0, iv.End); stop.After(fence.Add(x)) {
			t.Errorf("%s stopped %v after the fence, past one stop budget (%v)", iv.Shard, stop.Sub(fence), x)
		}
	}
}

// blockingStop is the synthetic driver whose stop of one shard waits until
// release is closed (a process slow to exit).
type blockingStop struct {
	*synthetic.Driver
	shard   interfaces.ShardID
	began   chan struct{}
	release chan struct{}
}

func (d *blockingStop) Stop(id interfaces.ShardID) error {
	if id == d.shard {
		close(d.began)
		<-d.release
	}
	return d.Driver.Stop(id)
}

// A slow stop holds up neither a lease renewal nor a report: the renewal is
// parked and applied, from its receipt, when the stop is done, so the host's
// other shards are not fenced on the deadline of the grant before it. Both
// used to wait for the stop, and a 3s stop fenced the whole host (a review's
// probe on hostd).
func TestSlowStopHoldsUpNoRenewal(t *testing.T) {
	r := newRig(t)
	d := &blockingStop{Driver: r.synth, shard: "a", began: make(chan struct{}), release: make(chan struct{})}
	ag := r.openWith(t, "h1", d)
	defer ag.Close()
	var once sync.Once
	release := func() { once.Do(func() { close(d.release) }) }
	defer release() // before Close, should the test fail with the stop held
	ttl := 4 * time.Second
	t0 := r.clock.Now()
	if err := ag.LeaseGrant(ctx, t0, ttl, nil); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"a", "b"} {
		if err := ag.Assign(ctx, t0, spec(s), 1); err != nil {
			t.Fatal(err)
		}
	}
	revoked := make(chan error, 1)
	go func() { revoked <- ag.Revoke(ctx, t0, "a", 2) }()
	<-d.began
	// The renewal and a report, 3s later, while a's stop is still running.
	t1 := t0.Add(3 * time.Second)
	r.clock.Set(t1)
	done := make(chan struct{})
	go func() {
		if err := ag.LeaseGrant(ctx, t1, ttl, nil); err != nil {
			t.Error(err)
		}
		if rep := ag.Report(t1); len(rep.Shards) != 2 {
			t.Errorf("report during the stop lists %d shards, want a and b", len(rep.Shards))
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		release()
		t.Fatal("a lease renewal or a report waited for a driver stop")
	}
	// The stop ends after the first grant's deadline (t0 + 3.2s).
	t2 := t0.Add(5 * time.Second)
	r.clock.Set(t2)
	release()
	if err := <-revoked; err != nil {
		t.Fatal(err)
	}
	if err := ag.Tick(ctx, t2); err != nil {
		t.Fatal(err)
	}
	if run := ag.Running(); len(run) != 1 || run[0] != "b" {
		t.Fatalf("running at t0+5s: %v; want b, under the renewal of t0+3s", run)
	}
	if dl, ok := ag.LeaseDeadline(t2); !ok || !dl.Equal(t1.Add(ttl-LeaseConfig{}.Margin(ttl))) {
		t.Errorf("lease deadline %v (valid %v), want the renewal's %v", dl, ok, t1.Add(ttl-LeaseConfig{}.Margin(ttl)))
	}
}

// After a failed start and a restart (the failure mark is in memory only),
// the re-sent Assign of that epoch is refused as stale: its ack says the host
// revoked the shard at that epoch, so the parent places it under a new one.
func TestRefusedAssignSaysRevokedAt(t *testing.T) {
	r := newRig(t)
	a := r.open(t, "h1")
	now := r.clock.Now()
	if err := a.LeaseGrant(ctx, now, 10*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	r.synth.FailNextStart(errors.New("boom"))
	if err := a.Assign(ctx, now, spec("s1"), 3); !errors.Is(err, ErrShardFailed) {
		t.Fatalf("failed start: %v", err)
	}
	crash(a)
	b := r.open(t, "h1")
	defer b.Close()
	if err := b.LeaseGrant(ctx, now, 10*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	err := b.Assign(ctx, now, spec("s1"), 3)
	k := b.AssignAck("s1", 3, err).GetAck()
	if k.GetOk() || k.GetRevokedAt() != 3 {
		t.Fatalf("ack of the re-sent assign after a restart: %+v, want refused with revoked_at 3", k)
	}
	if k := b.AssignAck("s1", 4, b.Assign(ctx, now, spec("s1"), 4)).GetAck(); !k.GetOk() || k.GetRevokedAt() != 0 {
		t.Fatalf("a new epoch: %+v", k)
	}
}

// leaseHolding is blockingStop that records the driver.LeaseHolder renewals.
type leaseHolding struct {
	*blockingStop
	mu   sync.Mutex
	left []time.Duration
}

func (d *leaseHolding) RenewLease(left time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.left = append(d.left, left)
}

func (d *leaseHolding) renewals() []time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]time.Duration(nil), d.left...)
}

// A driver whose shards hold the lease (driver.LeaseHolder) hears of every
// grant with the time left to the agent's own fence, and of a grant parked
// behind a slow stop at once, before the stop ends: the shards' own deadline
// would otherwise pass while the core's lease holds.
func TestLeaseHoldersHearEveryRenewal(t *testing.T) {
	r := newRig(t)
	d := &leaseHolding{blockingStop: &blockingStop{Driver: r.synth, shard: "a", began: make(chan struct{}), release: make(chan struct{})}}
	ag := r.openWith(t, "h1", d)
	defer ag.Close()
	var once sync.Once
	release := func() { once.Do(func() { close(d.release) }) }
	defer release()
	ttl := 4 * time.Second
	left := ttl - LeaseConfig{}.Margin(ttl) // 3.2s
	t0 := r.clock.Now()
	if err := ag.LeaseGrant(ctx, t0, ttl, nil); err != nil {
		t.Fatal(err)
	}
	if got := d.renewals(); len(got) != 1 || got[0] != left {
		t.Fatalf("renewals after the first grant: %v, want [%v]", got, left)
	}
	for _, s := range []string{"a", "b"} {
		if err := ag.Assign(ctx, t0, spec(s), 1); err != nil {
			t.Fatal(err)
		}
	}
	revoked := make(chan error, 1)
	go func() { revoked <- ag.Revoke(ctx, t0, "a", 2) }()
	<-d.began
	// Received 1s ago, applied by the agent's clock now: 2.2s are left.
	t1 := t0.Add(3 * time.Second)
	r.clock.Set(t1.Add(time.Second))
	if err := ag.LeaseGrant(ctx, t1, ttl, nil); err != nil {
		t.Fatal(err)
	}
	if got := d.renewals(); len(got) != 2 || got[1] != left-time.Second {
		t.Fatalf("renewals with the grant parked: %v, want a second one of %v", got, left-time.Second)
	}
	release()
	if err := <-revoked; err != nil {
		t.Fatal(err)
	}
	if got := d.renewals(); len(got) != 3 || got[2] != left-time.Second {
		t.Fatalf("renewals once the parked grant is applied: %v", got)
	}
}
