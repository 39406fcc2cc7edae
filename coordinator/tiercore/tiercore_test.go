package tiercore

import (
	"errors"
	"reflect"
	"testing"

	"github.com/strata-sched/strata/interfaces"
)

type state map[interfaces.ShardID]Shard

func (s state) lookup(id interfaces.ShardID) (Shard, bool) { v, ok := s[id]; return v, ok }

func (s state) owned(child interfaces.ChildID) []Shard {
	var out []Shard
	for _, id := range []interfaces.ShardID{"a", "b", "c", "d", "e", "f", "g"} {
		if v, ok := s[id]; ok && v.Owner == child {
			out = append(out, v)
		}
	}
	return out
}

func TestReconcileHello(t *testing.T) {
	st := state{
		"a": {ID: "a", Owner: "r1", AssignEpoch: 5, RevokeEpoch: 5},                   // r1's, held older
		"b": {ID: "b", Owner: "r1", AssignEpoch: 3, RevokeEpoch: 3},                   // r1's, held current
		"c": {ID: "c", Owner: "r1", MovingFrom: "r1", AssignEpoch: 4, RevokeEpoch: 4}, // moving away, held
		"d": {ID: "d", Owner: "r1", MovingFrom: "r1", AssignEpoch: 2, RevokeEpoch: 2}, // moving away, not held
		"e": {ID: "e", Owner: "r2", AssignEpoch: 7, RevokeEpoch: 7},                   // r2's, held by r1
		"f": {ID: "f", Owner: "r1", AssignEpoch: 0, RevokeEpoch: 0},                   // r1's, epoch unknown
		"g": {ID: "g", Owner: "r1", Leaving: true, AssignEpoch: 9, RevokeEpoch: 9},    // leaving, held
	}
	got := Reconcile(Input{
		Child:        "r1",
		Held:         map[interfaces.ShardID]uint64{"a": 0, "b": 3, "c": 4, "e": 6, "g": 9, "gone": 0, "gone2": 0},
		EpochsStated: true,
		Owned:        st.owned("r1"),
		Lookup:       st.lookup,
		Gone: func(id interfaces.ShardID) uint64 {
			if id == "gone" {
				return 11
			}
			return 0 // gone2: no epoch known, no revoke the child would take
		},
	})
	want := []Msg{
		{Assign, "a", 5},
		{Revoke, "c", 4},
		{Revoke, "e", 7},
		{Revoke, "g", 9},
		{Revoke, "gone", 11},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Reconcile =\n%v\nwant\n%v", got, want)
	}
}

// TestNeverAssignsAMoveSource: the source of an in-flight move is never sent
// an Assign of the shard, held or not, at any epoch (issue 20: the re-sent
// Assign of such a shard, accepted by a region, made two owners).
func TestNeverAssignsAMoveSource(t *testing.T) {
	s := Shard{ID: "s", Owner: "r2", MovingFrom: "r2", AssignEpoch: 3, RevokeEpoch: 3}
	for _, held := range []map[interfaces.ShardID]uint64{nil, {"s": 0}, {"s": 2}, {"s": 3}} {
		for _, stated := range []bool{true, false} {
			for _, m := range Reconcile(Input{Child: "r2", Held: held, EpochsStated: stated, Owned: []Shard{s}}) {
				if m.Kind == Assign {
					t.Errorf("held %v (epochs stated %v): %v sent to the move's source", held, stated, m)
				}
			}
		}
	}
}

func TestReconcileReport(t *testing.T) {
	st := state{
		"a": {ID: "a", Owner: "h1", AssignEpoch: 5, RevokeEpoch: 5}, // not running, due
		"b": {ID: "b", Owner: "h1", AssignEpoch: 6, RevokeEpoch: 6}, // not running, not due
		"c": {ID: "c", Owner: "h1", AssignEpoch: 7, RevokeEpoch: 7}, // running
		"e": {ID: "e", Owner: "h2", AssignEpoch: 8, RevokeEpoch: 8}, // h2's, running on h1
	}
	got := Reconcile(Input{
		Child:  "h1",
		Held:   map[interfaces.ShardID]uint64{"c": 0, "e": 0, "gone": 0},
		Owned:  st.owned("h1"),
		Lookup: st.lookup,
		Gone:   func(interfaces.ShardID) uint64 { return 4 },
		Due:    func(id interfaces.ShardID) bool { return id == "a" },
	})
	want := []Msg{{Assign, "a", 5}, {Revoke, "e", 8}, {Revoke, "gone", 4}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Reconcile =\n%v\nwant\n%v", got, want)
	}
}

// TestRevokeNeverBelowHeld: a revoke carries at least the epoch the child
// holds (the child refuses an older one as stale).
func TestRevokeNeverBelowHeld(t *testing.T) {
	st := state{"e": {ID: "e", Owner: "r2", AssignEpoch: 2, RevokeEpoch: 2}}
	got := Reconcile(Input{Child: "r1", Held: map[interfaces.ShardID]uint64{"e": 5}, EpochsStated: true, Lookup: st.lookup})
	if want := []Msg{{Revoke, "e", 5}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Reconcile = %v, want %v", got, want)
	}
}

func TestTombstones(t *testing.T) {
	var ts Tombstones
	if _, err := ts.Refuse("s", 1); err != nil {
		t.Fatalf("empty table refused: %v", err)
	}
	ts.Revoked("s", 5)
	ts.Revoked("s", 3) // a tombstone only grows
	for _, e := range []uint64{1, 5} {
		at, err := ts.Refuse("s", e)
		if !errors.Is(err, interfaces.ErrStaleEpoch) || at != 5 {
			t.Errorf("assign at %d: (%d, %v), want refused at tombstone 5", e, at, err)
		}
	}
	ts.Assigned("s", 4) // below: no effect
	if at, ok := ts.Epoch("s"); !ok || at != 5 {
		t.Errorf("tombstone after an assign below it: %d %v", at, ok)
	}
	if _, err := ts.Refuse("s", 6); err != nil {
		t.Errorf("assign above the tombstone refused: %v", err)
	}
	ts.Assigned("s", 6)
	if ts.Len() != 0 {
		t.Errorf("a newer assign left %d tombstones", ts.Len())
	}
	ts.Revoked("z", 0)
	if ts.Len() != 0 {
		t.Error("a tombstone at epoch 0 (unknown) was kept")
	}
}

func TestAdmitHello(t *testing.T) {
	for _, tt := range []struct {
		last, term, want uint64
		refused          bool
	}{
		{0, 0, 0, false},
		{0, 3, 3, false},
		{3, 3, 3, false},
		{3, 4, 4, false},
		{4, 3, 4, true},
		{4, 0, 4, false}, // not a group: unchecked, remembered term kept
	} {
		got, err := AdmitHello("r1", tt.last, tt.term)
		if got != tt.want || (err != nil) != tt.refused {
			t.Errorf("AdmitHello(last %d, term %d) = %d, %v; want %d, refused %v", tt.last, tt.term, got, err, tt.want, tt.refused)
		}
		if err != nil && !errors.Is(err, interfaces.ErrStaleEpoch) {
			t.Errorf("refusal %v does not wrap ErrStaleEpoch", err)
		}
	}
}

// TestReportLeavesMovingShardsToTheirRevoke: from a Report (no epochs), a
// shard moving away from the child or being taken back is neither assigned
// nor revoked (its revoke is re-sent on its own timer); from a Hello it is
// revoked once.
func TestReportLeavesMovingShardsToTheirRevoke(t *testing.T) {
	owned := []Shard{
		{ID: "m", Owner: "h1", MovingFrom: "h1", AssignEpoch: 3, RevokeEpoch: 3},
		{ID: "l", Owner: "h1", Leaving: true, AssignEpoch: 4, RevokeEpoch: 4},
	}
	held := map[interfaces.ShardID]uint64{"m": 3, "l": 4}
	if got := Reconcile(Input{Child: "h1", Held: held, Owned: owned}); len(got) != 0 {
		t.Errorf("from a Report: %v, want nothing", got)
	}
	got := Reconcile(Input{Child: "h1", Held: held, EpochsStated: true, Owned: owned})
	if want := []Msg{{Revoke, "l", 4}, {Revoke, "m", 3}}; !reflect.DeepEqual(got, want) {
		t.Errorf("from a Hello: %v, want %v", got, want)
	}
}

func TestMayAssign(t *testing.T) {
	base := Shard{ID: "s", Owner: "c", AssignEpoch: 2}
	for _, tt := range []struct {
		name string
		mod  func(*Shard)
		want bool
	}{
		{"owner", func(*Shard) {}, true},
		{"another child's", func(s *Shard) { s.Owner = "d" }, false},
		{"unassigned", func(s *Shard) { s.Owner = "" }, false},
		{"moving away", func(s *Shard) { s.MovingFrom = "c" }, false},
		{"moving from another", func(s *Shard) { s.MovingFrom = "d" }, true},
		{"leaving", func(s *Shard) { s.Leaving = true }, false},
		{"epoch unknown", func(s *Shard) { s.AssignEpoch = 0 }, false},
	} {
		s := base
		tt.mod(&s)
		if got := MayAssign(s, "c"); got != tt.want {
			t.Errorf("%s: MayAssign = %v, want %v", tt.name, got, tt.want)
		}
	}
}
