package hostagent

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/hostagent/driver/synthetic"
	"github.com/strata-sched/strata/interfaces"
	bolt "go.etcd.io/bbolt"
)

// Regression tests from a review of the host agent's durability (each failed
// before its fix).

// A re-sent Assign at the held epoch with a changed spec whose persist fails
// dropped the shard from the agent (StartFailed) while the driver still ran it:
// no fence ever stopped it. Now the shard is kept, and the fence stops it.
func TestSpecChangeWhosePersistFailsKeepsTheShard(t *testing.T) {
	r, a, now := runningA(t)
	a.store.db.Close() // disk gone: every write now fails
	s2 := spec("a")
	s2.InputRate = 200 // the parent re-sends the assign with an updated spec
	err := a.Assign(ctx, now, s2, 1)
	t.Logf("ack of the re-sent assign: %v", err)
	later := now.Add(10 * time.Second)
	r.clock.Set(later)
	_ = a.Tick(ctx, later) // lease long over: the fence must stop everything
	if run := r.synth.Running(); len(run) != 0 {
		t.Fatalf("after the lease expired and the agent fenced, the driver still runs %v; agent holds %v, running %v, tombstone %v",
			run, a.Held(), a.Running(), func() interfaces.Epoch { e, _ := a.core.Tombstone("a"); return e }())
	}
}

// A start that fails after the driver half-started it, then a stop that
// fails: the agent forgot the shard (tombstone, ack failed) although the driver
// still ran it, and the fence never stopped it. Now it is kept, and fenced.
type halfStart struct {
	*synthetic.Driver
	mu       sync.Mutex
	failStop bool
}

func (d *halfStart) Start(ctx context.Context, s interfaces.Shard, e interfaces.Epoch) error {
	if err := d.Driver.Start(ctx, s, e); err != nil {
		return err
	}
	return context.DeadlineExceeded // e.g. callback: the worker took the AddShard, its ack was late
}

func (d *halfStart) Stop(id interfaces.ShardID) error {
	d.mu.Lock()
	f := d.failStop
	d.failStop = false
	d.mu.Unlock()
	if f {
		return errors.New("callback: stop: worker did not ack command within 5s")
	}
	return d.Driver.Stop(id)
}

func TestFailedStartWithAFailedStopKeepsTheShard(t *testing.T) {
	r := newRig(t)
	d := &halfStart{Driver: r.synth, failStop: true}
	a := r.openWith(t, "h1", d)
	now := r.clock.Now()
	if err := a.LeaseGrant(ctx, now, 4*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	err := a.Assign(ctx, now, spec("a"), 1)
	t.Logf("ack: %v", err)
	later := now.Add(10 * time.Second)
	r.clock.Set(later)
	_ = a.Tick(ctx, later)
	if run := r.synth.Running(); len(run) != 0 {
		t.Fatalf("after the fence the driver still runs %v; agent holds %v (the shard was acked failed and tombstoned: the parent places it elsewhere)", run, a.Held())
	}
}

// A revoke whose tombstone write fails is refused, and the re-sent revoke was
// acked OK at once (in-memory tombstone) with nothing durable: after a restart
// the tombstone was gone and the delayed Assign the revoke overtook was
// accepted. The re-sent revoke now writes the tombstone again.
func TestResentRevokeWritesItsTombstone(t *testing.T) {
	r := newRig(t)
	a := r.open(t, "h1")
	now := r.clock.Now()
	if err := a.LeaseGrant(ctx, now, 10*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	a.store.db.Close()                 // writes fail from here
	err1 := a.Revoke(ctx, now, "x", 5) // revoke of a shard not held (overtook Assign x@5)
	err2 := a.Revoke(ctx, now, "x", 5) // the parent re-sends it
	if err1 == nil || err2 == nil {
		t.Fatalf("revokes acked without a durable tombstone: first %v, re-sent %v", err1, err2)
	}
	// The disk is back after a restart; the parent, never acked, re-sends the
	// revoke, and its tombstone survives the next restart.
	crash(a)
	b := r.open(t, "h1")
	if err := b.Revoke(ctx, now, "x", 5); err != nil {
		t.Fatal(err)
	}
	crash(b)
	c := r.open(t, "h1")
	defer c.Close()
	_ = c.LeaseGrant(ctx, now, 10*time.Second, nil)
	if err := c.Assign(ctx, now, spec("x"), 5); err == nil {
		t.Errorf("after restart the delayed Assign x@5 (revoked and acked) is accepted and runs: %v", r.synth.Running())
	}
}

// A changed spec whose persist failed was never persisted when the parent
// re-sent it: the core had taken the new spec in memory, saw it unchanged and
// acked OK, and host.db kept the old one (a review's probe). The re-sent
// Assign now persists it.
func TestSpecChangeRetryPersists(t *testing.T) {
	_, a, now := runningA(t)
	a.store.db.Close() // the disk fails for one write
	s2 := spec("a")
	s2.InputRate = 200
	if err := a.Assign(ctx, now, s2, 1); err == nil {
		t.Fatal("the changed spec's failed persist was acked OK")
	}
	db, err := bolt.Open(a.store.path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	a.store.db = db                                   // the disk is back
	if err := a.Assign(ctx, now, s2, 1); err != nil { // the parent re-sends it
		t.Fatal(err)
	}
	st, err := a.store.Load()
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Records[0].Spec.InputRate; got != 200 {
		t.Fatalf("the durable record has input_rate %v after the re-sent Assign was acked, want 200", got)
	}
}

// runningA opens an agent h1 with a 4s lease that runs shard a at epoch 1.
func runningA(t *testing.T) (*rig, *Agent, time.Time) {
	t.Helper()
	r := newRig(t)
	a := r.open(t, "h1")
	now := r.clock.Now()
	if err := a.LeaseGrant(ctx, now, 4*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.Assign(ctx, now, spec("a"), 1); err != nil {
		t.Fatal(err)
	}
	return r, a, now
}
