package hostagent

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/strata-sched/strata/interfaces"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func spec(id string) interfaces.Shard {
	return interfaces.Shard{ID: interfaces.ShardID(id), Job: "job1", Load: interfaces.Load{CPU: 1, Mem: 1 << 20}, InputRate: 100}
}

func effs(es []Effect) string {
	parts := make([]string, len(es))
	for i, e := range es {
		if e.Kind == EffLease {
			parts[i] = "lease"
			continue
		}
		parts[i] = e.String()
	}
	return strings.Join(parts, " ")
}

func mustEffs(t *testing.T, got []Effect, err error, want string) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	if g := effs(got); g != want {
		t.Fatalf("effects:\n got %q\nwant %q", g, want)
	}
}

func leased(t *testing.T) *Core {
	c := NewCore(LeaseConfig{}, nil, nil)
	e, err := c.LeaseGrant(t0, 10*time.Second, nil)
	mustEffs(t, e, err, "lease")
	return c
}

func TestAssignNeedsLease(t *testing.T) {
	c := NewCore(LeaseConfig{}, nil, nil)
	e, err := c.Assign(t0, spec("s1"), 1)
	if !errors.Is(err, ErrNoLease) || !errors.Is(err, interfaces.ErrConflict) || len(e) != 0 {
		t.Fatalf("assign without lease: effects %v, err %v", e, err)
	}
	if len(c.Held()) != 0 {
		t.Fatal("a refused assign must not be held")
	}
}

func TestAssignOrderIdempotenceAndStale(t *testing.T) {
	c := leased(t)
	e, err := c.Assign(t0, spec("s1"), 3)
	mustEffs(t, e, err, "persist(s1@3 fenced=false) start(s1@3)")
	e, err = c.Assign(t0, spec("s1"), 3)
	mustEffs(t, e, err, "")
	// Same epoch with a changed spec: persisted, not restarted.
	s := spec("s1")
	s.InputRate = 7
	e, err = c.Assign(t0, s, 3)
	mustEffs(t, e, err, "persist(s1@3 fenced=false)")

	e, err = c.Assign(t0, spec("s1"), 2)
	if !errors.Is(err, interfaces.ErrStaleEpoch) || len(e) != 0 {
		t.Fatalf("stale assign: %v %v", e, err)
	}
	if !strings.Contains(err.Error(), "held epoch 3, got 2") {
		t.Fatalf("stale message must say held vs got: %v", err)
	}
	e, err = c.Assign(t0, spec("s1"), 4)
	mustEffs(t, e, err, "stop(s1@3) persist(s1@4 fenced=false) start(s1@4)")
	if r, _ := c.Record("s1"); r.Epoch != 4 || r.Fenced {
		t.Fatalf("record after re-assign: %+v", r)
	}
}

func TestAssignValidates(t *testing.T) {
	c := leased(t)
	bad := spec("s1")
	bad.Load.CPU = -1
	if _, err := c.Assign(t0, bad, 1); !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), "shard.load.cpu") {
		t.Fatalf("negative cpu: %v", err)
	}
	if _, err := c.Assign(t0, spec("s1"), 0); !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), "epoch") {
		t.Fatalf("epoch 0: %v", err)
	}
	if _, err := c.Revoke(t0, "", 1); !errors.Is(err, interfaces.ErrInvalid) {
		t.Fatalf("empty shard id: %v", err)
	}
	if len(c.Held()) != 0 {
		t.Fatal("invalid input must not change state")
	}
}

func TestRevokeAndTombstones(t *testing.T) {
	c := leased(t)
	_, _ = c.Assign(t0, spec("s1"), 5)
	if _, err := c.Revoke(t0, "s1", 4); !errors.Is(err, interfaces.ErrStaleEpoch) || !strings.Contains(err.Error(), "held epoch 5, got 4") {
		t.Fatalf("stale revoke: %v", err)
	}
	e, err := c.Revoke(t0, "s1", 5)
	mustEffs(t, e, err, "stop(s1@5) delete(s1@5)")
	// Idempotent repeat (the tombstone written again, in case the first write
	// failed), then a delayed assign of the revoked epoch is refused.
	e, err = c.Revoke(t0, "s1", 5)
	mustEffs(t, e, err, "delete(s1@5)")
	if _, err := c.Assign(t0, spec("s1"), 5); !errors.Is(err, interfaces.ErrStaleEpoch) || !strings.Contains(err.Error(), "revoked at epoch 5, got 5") {
		t.Fatalf("assign of a revoked epoch: %v", err)
	}
	e, err = c.Assign(t0, spec("s1"), 6)
	mustEffs(t, e, err, "persist(s1@6 fenced=false) start(s1@6)")

	// A revoke that overtakes its assign leaves a tombstone that refuses it.
	e, err = c.Revoke(t0, "s2", 2)
	mustEffs(t, e, err, "delete(s2@2)")
	if _, err := c.Assign(t0, spec("s2"), 2); !errors.Is(err, interfaces.ErrStaleEpoch) {
		t.Fatalf("assign after overtaking revoke: %v", err)
	}
	if _, err := c.Revoke(t0, "s2", 1); !errors.Is(err, interfaces.ErrStaleEpoch) {
		t.Fatalf("revoke older than tombstone: %v", err)
	}
}

func TestLeaseFenceAndReconfirm(t *testing.T) {
	c := leased(t) // ttl 10s, margin 2s → fence at t0+8s
	_, _ = c.Assign(t0, spec("a"), 1)
	_, _ = c.Assign(t0, spec("b"), 2)
	if d, ok := c.Deadline(); !ok || !d.Equal(t0.Add(8*time.Second)) {
		t.Fatalf("deadline = %v %v, want t0+8s", d, ok)
	}
	mustEffs(t, c.Tick(t0.Add(8*time.Second-1)), nil, "")
	mustEffs(t, c.Tick(t0.Add(8*time.Second)), nil,
		"stop(a@1) persist(a@1 fenced=true) stop(b@2) persist(b@2 fenced=true)")
	if len(c.Running()) != 0 || len(c.Held()) != 2 {
		t.Fatalf("after fence: running %v held %v", c.Running(), c.Held())
	}
	mustEffs(t, c.Tick(t0.Add(9*time.Second)), nil, "")
	if _, err := c.Assign(t0.Add(9*time.Second), spec("c"), 1); !errors.Is(err, ErrNoLease) {
		t.Fatalf("assign after fence: %v", err)
	}
	// A new lease alone resumes nothing.
	now := t0.Add(20 * time.Second)
	e, err := c.LeaseGrant(now, 10*time.Second, nil)
	mustEffs(t, e, err, "lease")
	if len(c.Running()) != 0 {
		t.Fatal("shards resumed without confirmation")
	}
	// Re-confirm a via the grant, b via an Assign of the same epoch; a stale
	// and an unknown confirmation are reported.
	e, err = c.LeaseGrant(now, 10*time.Second, []interfaces.Assignment{{Shard: "a", Epoch: 1}, {Shard: "b", Epoch: 1}, {Shard: "zz", Epoch: 1}})
	if !errors.Is(err, interfaces.ErrStaleEpoch) || !errors.Is(err, interfaces.ErrNotFound) {
		t.Fatalf("grant errors: %v", err)
	}
	if g := effs(e); g != "lease persist(a@1 fenced=false) start(a@1)" {
		t.Fatalf("grant effects %q", g)
	}
	e, err = c.Assign(now, spec("b"), 2)
	mustEffs(t, e, err, "persist(b@2 fenced=false) start(b@2)")
	if got := fmt.Sprint(c.Running()); got != "[a b]" {
		t.Fatalf("running %s", got)
	}
}

func TestLateInputFencesFirst(t *testing.T) {
	c := leased(t)
	_, _ = c.Assign(t0, spec("a"), 1)
	// No tick happened; an input arriving after the deadline fences first.
	e, err := c.Revoke(t0.Add(time.Minute), "x", 1)
	mustEffs(t, e, err, "stop(a@1) persist(a@1 fenced=true) delete(x@1)")
}

func TestLeaseMarginRules(t *testing.T) {
	lc := LeaseConfig{}
	if m := lc.Margin(10 * time.Second); m != 2*time.Second {
		t.Fatalf("margin(10s) = %v", m)
	}
	if m := lc.Margin(200 * time.Millisecond); m != 100*time.Millisecond {
		t.Fatalf("margin(200ms) = %v (min margin)", m)
	}
	c := NewCore(lc, nil, nil)
	if _, err := c.LeaseGrant(t0, -time.Millisecond, nil); !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), "lease.ttl") {
		t.Fatalf("negative ttl: %v", err)
	}
	// A grant too short to keep the margin is no error (a parent tier passes
	// on what its own lease has left: hosts logged "lease.ttl: must be > the
	// safety margin 100ms (got 57ms)" every report); it renews nothing.
	e, err := c.LeaseGrant(t0, 100*time.Millisecond, nil)
	mustEffs(t, e, err, "")
	if c.LeaseValid(t0) {
		t.Fatal("a grant shorter than the margin must not lease")
	}
	e, err = c.LeaseGrant(t0, time.Second, nil)
	mustEffs(t, e, err, "lease")
	e, err = c.LeaseGrant(t0.Add(500*time.Millisecond), 57*time.Millisecond, nil)
	mustEffs(t, e, err, "")
	if d, ok := c.Deadline(); !ok || !d.Equal(t0.Add(800*time.Millisecond)) {
		t.Fatalf("after a short grant the lease ends at %v (valid %t), want the held one's end %v", d, ok, t0.Add(800*time.Millisecond))
	}
	// A grant that would end sooner (one answering an older report) never
	// shortens the lease held.
	e, err = c.LeaseGrant(t0.Add(-time.Second), time.Second, nil)
	mustEffs(t, e, err, "")
	if d, _ := c.Deadline(); !d.Equal(t0.Add(800 * time.Millisecond)) {
		t.Fatalf("an earlier-ending grant moved the deadline to %v", d)
	}
}

func TestLoadedStartsFenced(t *testing.T) {
	c := NewCore(LeaseConfig{}, []Record{{Spec: spec("a"), Epoch: 4}, {Spec: spec("b"), Epoch: 2, Fenced: true}},
		map[interfaces.ShardID]interfaces.Epoch{"z": 9})
	h := c.Held()
	if len(h) != 2 || !h[0].Fenced || !h[1].Fenced || h[0].Epoch != 4 {
		t.Fatalf("held after load: %+v", h)
	}
	if len(c.Running()) != 0 {
		t.Fatal("loaded shards must not run before a lease")
	}
	e, err := c.LeaseGrant(t0, 10*time.Second, []interfaces.Assignment{{Shard: "a", Epoch: 4}, {Shard: "b", Epoch: 3}})
	mustEffs(t, e, err, "lease persist(a@4 fenced=false) start(a@4) persist(b@3 fenced=false) start(b@3)")
	if tb, ok := c.Tombstone("z"); !ok || tb != 9 {
		t.Fatal("tombstone not loaded")
	}
}

func TestStartFailedDrops(t *testing.T) {
	c := leased(t)
	_, _ = c.Assign(t0, spec("a"), 1)
	mustEffs(t, c.StartFailed("a", 2), nil, "") // wrong epoch: ignored
	mustEffs(t, c.StartFailed("a", 1), nil, "delete(a@1)")
	if _, err := c.Assign(t0, spec("a"), 1); !errors.Is(err, interfaces.ErrStaleEpoch) {
		t.Fatalf("retry of failed epoch: %v", err)
	}
}

// TestCoreProperties drives the core with random inputs and checks, against a
// model driver that applies the effects: starts are always preceded by a persist
// of the same shard and epoch in the same call; what runs equals Running(); no
// shard runs while the lease is invalid; held epochs never decrease; every
// refused input leaves state unchanged.
func TestCoreProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := NewCore(LeaseConfig{}, nil, nil)
		running := map[interfaces.ShardID]interfaces.Epoch{}
		maxEpoch := map[interfaces.ShardID]interfaces.Epoch{}
		now := t0
		ids := []string{"a", "b", "c"}
		for i := 0; i < 60; i++ {
			now = now.Add(time.Duration(rapid.IntRange(0, 3000).Draw(t, "dt")) * time.Millisecond)
			var es []Effect
			var err error
			before := fmt.Sprint(c.Held(), c.tombs)
			op := rapid.IntRange(0, 3).Draw(t, "op")
			switch op {
			case 0:
				es, err = c.Assign(now, spec(rapid.SampledFrom(ids).Draw(t, "id")), interfaces.Epoch(rapid.IntRange(0, 5).Draw(t, "ep")))
			case 1:
				es, err = c.Revoke(now, interfaces.ShardID(rapid.SampledFrom(ids).Draw(t, "id")), interfaces.Epoch(rapid.IntRange(0, 5).Draw(t, "ep")))
			case 2:
				var conf []interfaces.Assignment
				for _, h := range c.Held() {
					if rapid.Bool().Draw(t, "confirm") {
						conf = append(conf, interfaces.Assignment{Shard: h.Shard, Epoch: h.Epoch})
					}
				}
				es, err = c.LeaseGrant(now, time.Duration(rapid.IntRange(1, 5).Draw(t, "ttl"))*time.Second, conf)
			case 3:
				es = c.Tick(now)
			}
			persisted := map[string]bool{}
			for _, e := range es {
				key := fmt.Sprint(e.Shard, e.Epoch)
				switch e.Kind {
				case EffPersist:
					persisted[key] = !e.Record.Fenced
				case EffStart:
					if !persisted[key] {
						t.Fatalf("start %s without a prior persist in %s", key, effs(es))
					}
					if _, ok := running[e.Shard]; ok {
						t.Fatalf("start of running %s", e.Shard)
					}
					running[e.Shard] = e.Epoch
				case EffStop:
					if running[e.Shard] != e.Epoch {
						t.Fatalf("stop %s@%d but it runs @%d", e.Shard, e.Epoch, running[e.Shard])
					}
					delete(running, e.Shard)
				}
			}
			if got, want := fmt.Sprint(c.Running()), fmt.Sprint(sortedKeys(running)); got != want {
				t.Fatalf("core running %s, model %s", got, want)
			}
			if !c.LeaseValid(now) && len(running) != 0 {
				t.Fatalf("shards %v run without a valid lease", running)
			}
			for _, h := range c.Held() {
				if h.Epoch < maxEpoch[h.Shard] {
					t.Fatalf("held epoch of %s went down: %d < %d", h.Shard, h.Epoch, maxEpoch[h.Shard])
				}
				maxEpoch[h.Shard] = h.Epoch
			}
			if op <= 1 && err != nil && len(es) == 0 {
				if after := fmt.Sprint(c.Held(), c.tombs); after != before {
					t.Fatalf("refused input (%v) changed state: %s → %s", err, before, after)
				}
			}
		}
	})
}

func sortedKeys(m map[interfaces.ShardID]interfaces.Epoch) []interfaces.ShardID {
	c := NewCore(LeaseConfig{}, nil, nil)
	for k, e := range m {
		c.shards[k] = &Record{Epoch: e}
	}
	return c.Running()
}
