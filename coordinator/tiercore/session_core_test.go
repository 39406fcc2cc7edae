package tiercore

import (
	"errors"
	"testing"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

var sessT0 = time.Unix(1_000_000, 0)

func TestUplinkRevokeLeavesTombstone(t *testing.T) {
	u := NewUplink(Mutations{})
	if _, err := u.CheckAssign("s", 3); err != nil {
		t.Fatalf("first assign refused: %v", err)
	}
	u.Assigned("s", 3)
	if we, ok := u.WireEpoch("s", 2); !ok || we != 3<<LocalBits|2 {
		t.Errorf("WireEpoch = %d %v", we, ok)
	}
	if err := u.OnRevoke("s", 2, true); !errors.Is(err, interfaces.ErrStaleEpoch) {
		t.Errorf("revoke below the held epoch: %v, want stale", err)
	}
	if err := u.OnRevoke("s", 3, true); err != nil || !u.Leaving("s") {
		t.Fatalf("revoke: %v, leaving %v", err, u.Leaving("s"))
	}
	if e := u.Finished("s"); e != 3 || u.Leaving("s") {
		t.Errorf("Finished = %d, leaving %v", e, u.Leaving("s"))
	}
	// The parent's re-sent Assign of the revoked epoch is refused, with the
	// tombstone; a newer one is taken.
	if at, err := u.CheckAssign("s", 3); !errors.Is(err, interfaces.ErrStaleEpoch) || at != 3 {
		t.Errorf("late assign after the revoke: (%d, %v), want refused at 3", at, err)
	}
	if got := u.GoneEpoch("s"); got != 3<<LocalBits|LocalMask {
		t.Errorf("GoneEpoch = %d", got)
	}
	if _, err := u.CheckAssign("s", 4); err != nil {
		t.Errorf("newer assign refused: %v", err)
	}
	// The mutant takes it (what the simulation must catch).
	m := NewUplink(Mutations{NoRevokeTombstone: true})
	m.Assigned("s", 3)
	_ = m.OnRevoke("s", 3, true)
	m.Finished("s")
	if _, err := m.CheckAssign("s", 3); err != nil {
		t.Errorf("mutant refused the late assign: %v", err)
	}
}

func TestUplinkDisconnectForgetsAssignEpochsNotRevokes(t *testing.T) {
	u := NewUplink(Mutations{})
	u.Assigned("s", 5)
	u.Disconnected()
	if _, ok := u.WireEpoch("s", 1); ok {
		t.Error("an assign epoch is composed after a disconnect, before the parent confirmed the shard")
	}
	if we, ok := u.RevokeEpoch("s", 1); !ok || we != 5<<LocalBits|1 {
		t.Errorf("RevokeEpoch = %d %v, want the last known parent epoch", we, ok)
	}
}

func TestUplinkLease(t *testing.T) {
	u := NewUplink(Mutations{})
	u.OnLease(sessT0, 4*time.Second)
	if left := u.LeaseLeft(sessT0); left != 3*time.Second {
		t.Errorf("LeaseLeft = %v, want 3s (a quarter kept as margin)", left)
	}
	u.OnLease(sessT0.Add(-time.Second), 4*time.Second) // late: renews nothing
	if left := u.LeaseLeft(sessT0); left != 3*time.Second {
		t.Errorf("a late grant shortened the lease: %v", left)
	}
}

func TestLeasesEndNotBeforeLeaseAndMargin(t *testing.T) {
	cfg := LeaseConfig{TTL: 2 * time.Second, DriftMargin: 200 * time.Millisecond, Grace: 500 * time.Millisecond}
	l := NewLeases(cfg)
	if l.Grant("h", 1, false, sessT0) {
		t.Fatal("granted while not leading")
	}
	l.StepUp(1, sessT0)
	if !l.Grant("h", 1, false, sessT0.Add(time.Second)) {
		t.Fatal("grant refused")
	}
	if l.Grant("h", 2, false, sessT0) || l.Grant("h", 1, true, sessT0) {
		t.Error("granted in another term, or to a failed child")
	}
	end := l.LeaseEnd("h", 300*time.Millisecond)
	if want := sessT0.Add(time.Second + 2*time.Second + 300*time.Millisecond + 200*time.Millisecond); !end.Equal(want) {
		t.Errorf("LeaseEnd = %v, want %v", end, want)
	}
	l.SessionLost("h", sessT0.Add(1500*time.Millisecond))
	if got := l.LeaseEnd("h", 300*time.Millisecond); !got.Equal(end) {
		t.Error("a dropped session shortened the lease")
	}
	if l.StartDeclaring("h", 300*time.Millisecond, end.Add(cfg.Grace-time.Millisecond)) {
		t.Error("declared lost before lease + margin + grace")
	}
	if !l.StartDeclaring("h", 300*time.Millisecond, end.Add(cfg.Grace+time.Millisecond)) {
		t.Error("not declared lost after lease + margin + grace")
	}
	if l.Grant("h", 1, false, end) {
		t.Error("granted while being declared lost")
	}
	// A new leader counts from its election, whatever its predecessor granted.
	l.StepUp(2, sessT0.Add(10*time.Second))
	if got := l.LeaseEnd("h", 0); !got.Equal(sessT0.Add(10*time.Second + 2200*time.Millisecond)) {
		t.Errorf("new leader's LeaseEnd = %v", got)
	}
	// The mutant counts the session's end.
	cfg.Mutations.ReplaceOnSessionLoss = true
	m := NewLeases(cfg)
	m.StepUp(1, sessT0)
	m.Grant("h", 1, false, sessT0)
	m.SessionLost("h", sessT0.Add(100*time.Millisecond))
	if got := m.LeaseEnd("h", 0); !got.Equal(sessT0.Add(100 * time.Millisecond)) {
		t.Errorf("mutant LeaseEnd = %v", got)
	}
}

func TestAssignsDue(t *testing.T) {
	var a Assigns
	a.Sent("s", 7, sessT0)
	ri, ttl := time.Second, 2*time.Second
	if a.Due("s", sessT0.Add(7*time.Second), ri, ttl) || !a.Due("s", sessT0.Add(9*time.Second), ri, ttl) {
		t.Error("an unacked assign is due after 4 TTLs")
	}
	if a.Acked("s", 6, true) {
		t.Error("an ack of another epoch matched")
	}
	a.Acked("s", 7, true)
	if a.Due("s", sessT0.Add(2*time.Second), ri, ttl) || !a.Due("s", sessT0.Add(3*time.Second), ri, ttl) {
		t.Error("an acked assign is due after 2 report intervals")
	}
	a.Acked("s", 7, false)
	if !a.Due("s", sessT0, ri, ttl) {
		t.Error("a refused assign is due at once")
	}
}

func TestRevokeAcked(t *testing.T) {
	moving := Shard{ID: "s", Owner: "h1", MovingFrom: "h1", RevokeEpoch: 5}
	for _, tt := range []struct {
		name    string
		s       Shard
		found   bool
		child   interfaces.ChildID
		ack     uint64
		leaving bool
		want    AckAction
	}{
		{"move source acks the revoke", moving, true, "h1", 5, false, AckCompleteMove},
		{"late ack of an older revoke", moving, true, "h1", 4, false, AckIgnore},
		{"ack from another child", moving, true, "h2", 5, false, AckIgnore},
		{"owner acks the parent's revoke", Shard{ID: "s", Owner: "h1", RevokeEpoch: 5}, true, "h1", 5, true, AckFinishRevoke},
		{"former owner acks the parent's revoke", Shard{ID: "s", Owner: "h2", RevokeEpoch: 5}, true, "h1", 5, true, AckIgnore},
		{"no parent revoke", Shard{ID: "s", Owner: "h1", RevokeEpoch: 5}, true, "h1", 5, false, AckIgnore},
		{"parent revoke of an unplaced shard", Shard{ID: "s"}, true, "h1", 1, true, AckFinishRevoke},
		{"parent revoke of a shard gone", Shard{}, false, "h1", 1, true, AckFinishRevoke},
	} {
		if got := RevokeAcked(tt.s, tt.found, tt.child, tt.ack, tt.leaving); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}
