package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"pgregory.net/rapid"

	"github.com/strata-sched/strata/coordinator/acl"
	"github.com/strata-sched/strata/interfaces"
)

// memSink is a raft.SnapshotSink in memory.
type memSink struct {
	bytes.Buffer
	closed, cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Close() error  { s.closed = true; return nil }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }

var _ raft.SnapshotSink = (*memSink)(nil)

func persist(t tb, snap raft.FSMSnapshot) []byte {
	t.Helper()
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatalf("Persist: %v", err)
	}
	snap.Release()
	if !sink.closed || sink.cancelled {
		t.Fatalf("Persist left the sink closed=%v cancelled=%v", sink.closed, sink.cancelled)
	}
	return sink.Bytes()
}

func snapshotBytes(t tb, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return persist(t, snap)
}

func restore(t tb, b []byte) *FSM {
	t.Helper()
	g := New()
	if err := g.Restore(nopCloser{bytes.NewReader(b)}); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	return g
}

// readAll gathers everything the read API shows, for deep comparison.
type readAll struct {
	Stats       Stats
	Children    []ChildUsage
	Assignments []interfaces.Assignment
	InFlight    []interfaces.Move
	PlanLog     []LogEntry
	View        *interfaces.View
	Shards      []ShardState
	Tokens      []acl.Token
}

func read(f *FSM) readAll {
	r := readAll{Stats: f.Stats(), Children: f.Children(), Assignments: f.Assignments(),
		InFlight: f.InFlight(), PlanLog: f.PlanLog(), View: f.View("t", "i"), Tokens: f.Tokens()}
	for _, s := range r.View.Shards {
		st, _ := f.Shard(s.ID)
		r.Shards = append(r.Shards, st)
	}
	return r
}

// genCommand draws a command over small ID spaces so that commands collide: most
// domain rejections (stale epochs, wrong owners, moves in flight) happen often.
func genCommand(t *rapid.T) Command {
	childIDs := []interfaces.ChildID{"c0", "c1", "c2", "c3"}
	shardIDs := []interfaces.ShardID{"s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7"}
	child := func(l string) interfaces.ChildID { return rapid.SampledFrom(childIDs).Draw(t, l) }
	shard := func(l string) interfaces.ShardID { return rapid.SampledFrom(shardIDs).Draw(t, l) }
	epoch := func(l string) interfaces.Epoch { return interfaces.Epoch(rapid.IntRange(0, 4).Draw(t, l)) }
	load := func(l string) interfaces.Load {
		ld := interfaces.Load{CPU: float64(rapid.IntRange(0, 8).Draw(t, l+".cpu")) / 4,
			Mem: float64(rapid.IntRange(0, 3).Draw(t, l+".mem")) * 1e9}
		if rapid.Bool().Draw(t, l+".extra") {
			ld.Extra = map[string]float64{"gpu": float64(rapid.IntRange(0, 2).Draw(t, l+".gpu"))}
		}
		return ld
	}
	reason := func() string {
		return rapid.SampledFrom([]string{"", "balance", "drain", "ünïcode"}).Draw(t, "reason")
	}
	move := func() interfaces.Move {
		m := interfaces.Move{Shard: shard("shard"), To: child("to"), Epoch: epoch("epoch"), Reason: reason(),
			Goal: rapid.SampledFrom([]string{"", "balance"}).Draw(t, "goal"), Delta: float64(rapid.IntRange(-4, 4).Draw(t, "delta")) / 2}
		if rapid.IntRange(0, 3).Draw(t, "first") > 0 {
			m.From = child("from")
		}
		return m
	}
	switch ty := rapid.IntRange(1, int(cmdEnd)-1).Draw(t, "type"); ty {
	case 1:
		c := interfaces.Child{ID: child("id"), Tier: "host", Capacity: load("cap").Add(cpu(1)),
			State: interfaces.ChildState(rapid.IntRange(0, 2).Draw(t, "state"))}
		if rapid.Bool().Draw(t, "labels") {
			c.Labels = map[string]string{"zone": rapid.SampledFrom([]string{"a", "b"}).Draw(t, "zone"), "rack": "r"}
		}
		return &PutChild{Child: c}
	case 2:
		return &RemoveChild{ID: child("id")}
	case 3:
		n := rapid.IntRange(1, 4).Draw(t, "n")
		seen := map[interfaces.ShardID]bool{}
		ps := &PutShards{}
		for i := 0; i < n; i++ {
			id := shard("id")
			if seen[id] {
				continue
			}
			seen[id] = true
			s := interfaces.Shard{ID: id, Job: rapid.SampledFrom([]string{"j1", "j2"}).Draw(t, "job"), Load: load("load"),
				InputRate: float64(rapid.IntRange(0, 100).Draw(t, "rate")), StateBytes: int64(rapid.IntRange(0, 1<<20).Draw(t, "bytes"))}
			if rapid.Bool().Draw(t, "cons") {
				s.Constraints = interfaces.ShardConstraints{Allowed: []interfaces.ChildID{child("allowed")},
					Labels: map[string]string{"zone": "a"}, AntiAffinity: "g", MaxPerChild: 2}
			}
			ps.Shards = append(ps.Shards, s)
		}
		return ps
	case 4:
		return &DeleteShards{IDs: []interfaces.ShardID{shard("id")}}
	case 5:
		return &Assign{Shard: shard("shard"), Child: child("child"), Reason: reason()}
	case 6:
		return &Unassign{Shard: shard("shard"), Epoch: epoch("epoch"), Reason: reason()}
	case 7:
		return &Move{Move: move()}
	case 8:
		return &BeginMove{Move: move()}
	case 9:
		return &CompleteMove{Shard: shard("shard"), Epoch: epoch("epoch")}
	case 10:
		return &AbortMove{Shard: shard("shard"), Epoch: epoch("epoch"), Reason: reason()}
	case 12:
		return &Quarantine{Shard: shard("shard"), Reason: "doctor", Release: rapid.Bool().Draw(t, "release")}
	case 14:
		pb := &PlanBatch{Tier: "region"}
		if rapid.Bool().Draw(t, "drain") {
			pb.Drain = []interfaces.ChildID{child("drain")}
		}
		for i := rapid.IntRange(0, 3).Draw(t, "moves"); i > 0; i-- {
			pb.Moves = append(pb.Moves, move())
			pb.Begin = append(pb.Begin, rapid.Bool().Draw(t, "begin"))
		}
		return pb
	case 16:
		id := rapid.SampledFrom([]string{"t0", "t1", "t2"}).Draw(t, "token")
		return &PutToken{Token: acl.Token{ID: id, Policy: acl.Policy(rapid.IntRange(1, 3).Draw(t, "policy")),
			Hash: acl.HashSecret(rapid.SampledFrom([]string{"a", "b", "c", "d"}).Draw(t, "secret")), Description: reason()}}
	case 17:
		return &DeleteToken{ID: rapid.SampledFrom([]string{"t0", "t1", "t2"}).Draw(t, "token")}
	case 13, 15:
		ds := DropShards{IDs: []interfaces.ShardID{shard("id")}, Reason: reason()}
		if id := shard("id2"); id != ds.IDs[0] {
			ds.IDs = append(ds.IDs, id)
		}
		if CmdType(ty) == CmdRetireShards {
			return &RetireShards{DropShards: ds}
		}
		return &ds
	default:
		n := rapid.IntRange(1, 5).Draw(t, "moves")
		ap := &ApplyPlan{Tier: "region", Begin: rapid.Bool().Draw(t, "begin")}
		for i := 0; i < n; i++ {
			ap.Moves = append(ap.Moves, move())
		}
		return ap
	}
}

// genSmart draws a command that is likely to succeed against f's current state:
// it picks a real shard with its real owner and epoch. Mixed with genCommand it
// drives sequences deep into the move protocol (begin → complete/abort).
func genSmart(t *rapid.T, f *FSM) Command {
	v := f.View("t", "i")
	if len(v.Children) == 0 || len(v.Shards) == 0 {
		return genCommand(t)
	}
	active := []interfaces.ChildID{}
	for _, c := range v.Children {
		if c.State == interfaces.ChildActive {
			active = append(active, c.ID)
		}
	}
	s := rapid.SampledFrom(v.Shards).Draw(t, "smart.shard")
	st, _ := f.Shard(s.ID)
	if st.InFlight != nil {
		if rapid.Bool().Draw(t, "smart.complete") {
			return &CompleteMove{Shard: s.ID, Epoch: st.Epoch}
		}
		return &AbortMove{Shard: s.ID, Epoch: st.Epoch, Reason: "smart"}
	}
	if len(active) == 0 {
		return genCommand(t)
	}
	to := rapid.SampledFrom(active).Draw(t, "smart.to")
	if st.Owner == "" {
		return &Assign{Shard: s.ID, Child: to, Reason: "smart"}
	}
	if to == st.Owner {
		return &Unassign{Shard: s.ID, Epoch: st.Epoch}
	}
	m := interfaces.Move{Shard: s.ID, From: st.Owner, To: to, Epoch: st.Epoch, Reason: "smart"}
	switch rapid.IntRange(0, 2).Draw(t, "smart.kind") {
	case 0:
		return &Move{Move: m}
	case 1:
		return &BeginMove{Move: m}
	}
	return &ApplyPlan{Tier: "region", Begin: rapid.Bool().Draw(t, "smart.begin"), Moves: []interfaces.Move{m}}
}

// genApply draws n valid commands, half of them smart, applies each to f from
// index from as it goes, and returns them and their results.
func genApply(t *rapid.T, f *FSM, from uint64, n int) ([]Command, []*Result) {
	var cmds []Command
	var res []*Result
	for len(cmds) < n {
		var c Command
		if rapid.Bool().Draw(t, "smart") {
			c = genSmart(t, f)
		} else {
			c = genCommand(t)
		}
		if c.validate() != nil {
			continue
		}
		cmds = append(cmds, c)
		res = append(res, applyAll(t, f, from+uint64(len(cmds)-1), c)[0])
	}
	return cmds, res
}

func TestSnapshotRestoreRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		logSize := rapid.SampledFrom([]int{-1, 2, 16, 0}).Draw(rt, "logSize")
		f := NewWithOptions(Options{PlanLogSize: logSize})
		cmds, _ := genApply(rt, f, 1, rapid.IntRange(0, 60).Draw(rt, "len"))
		checkInvariants(rt, f)

		b := snapshotBytes(rt, f)
		g := restore(rt, b)
		if got, want := read(g), read(f); !reflect.DeepEqual(got, want) {
			rt.Fatalf("restored state differs:\n got %+v\nwant %+v", got, want)
		}
		if b2 := snapshotBytes(rt, g); !bytes.Equal(b, b2) {
			rt.Fatalf("snapshot of the restored FSM differs from the original snapshot")
		}
		checkInvariants(rt, g)

		// The restored replica must behave exactly like the original from here on.
		next := uint64(len(cmds) + 1)
		more, rf := genApply(rt, f, next, rapid.IntRange(0, 20).Draw(rt, "more"))
		rg := applyAll(rt, g, next, more...)
		for i := range rf {
			if fmt.Sprint(rf[i]) != fmt.Sprint(rg[i]) {
				rt.Fatalf("command %d after restore: original %v, restored %v", i, rf[i], rg[i])
			}
		}
		if f.Hash() != g.Hash() {
			rt.Fatalf("original and restored replicas diverged after %d more commands", len(more))
		}
	})
}

func TestSameCommandsGiveIdenticalSnapshots(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		f0 := New()
		cmds, _ := genApply(rt, f0, 1, rapid.IntRange(1, 80).Draw(rt, "len"))
		first := snapshotBytes(rt, f0)
		for replica := 1; replica < 3; replica++ {
			f := New()
			applyAll(rt, f, 1, cmds...)
			if b := snapshotBytes(rt, f); !bytes.Equal(first, b) {
				rt.Fatalf("replica %d produced a different snapshot from the same commands", replica)
			}
		}
	})
}

// A snapshot is an immutable view: Applies that happen between Snapshot and
// Persist (raft runs them concurrently) must not leak into it.
func TestSnapshotIsolatedFromLaterApplies(t *testing.T) {
	f := New()
	applyAll(t, f, 1, sampleWorkload()...)
	want := snapshotBytes(t, f)
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan []byte)
	go func() { done <- persist(t, snap) }()
	applyAll(t, f, 100,
		&PutShards{Shards: []interfaces.Shard{{ID: "s1", Job: "j", Load: cpu(3)}, {ID: "s9", Job: "j"}}},
		&Move{Move: interfaces.Move{Shard: "s1", From: "b", To: "a", Epoch: 2}},
		&PutChild{Child: interfaces.Child{ID: "a", Tier: "host", Capacity: cpu(1), State: interfaces.ChildFailed}},
		&DeleteShards{IDs: []interfaces.ShardID{"s2"}},
	)
	got := <-done
	if !bytes.Equal(got, want) {
		t.Fatal("the persisted snapshot includes changes applied after Snapshot()")
	}
	if bytes.Equal(snapshotBytes(t, f), want) {
		t.Fatal("test setup: the later commands did not change the state")
	}
}

func TestRestoreRejectsCorruptSnapshots(t *testing.T) {
	src := New()
	applyAll(t, src, 1, sampleWorkload()...)
	good := snapshotBytes(t, src)

	victim := fixture(t)
	before := victim.Hash()
	check := func(name string, b []byte) {
		t.Helper()
		err := victim.Restore(nopCloser{bytes.NewReader(b)})
		if err == nil {
			t.Fatalf("%s: Restore accepted a corrupt snapshot", name)
		}
		if victim.Hash() != before {
			t.Fatalf("%s: a failed Restore changed the state", name)
		}
	}
	for i := 0; i < len(good); i++ {
		check(fmt.Sprintf("truncated at %d", i), good[:i])
		bad := append([]byte(nil), good...)
		bad[i] ^= 0x10
		check(fmt.Sprintf("bit flip at %d", i), bad)
	}
	check("trailing byte", append(append([]byte(nil), good...), 0))
	if err := victim.Restore(nopCloser{bytes.NewReader(good)}); err != nil {
		t.Fatalf("the uncorrupted snapshot does not restore: %v", err)
	}
	if victim.Hash() != src.Hash() {
		t.Fatal("restored state differs from the source")
	}
}

func TestRestoreRejectsInconsistentState(t *testing.T) {
	// Build a snapshot whose shard names an owner that is not a child, with a
	// valid checksum, by encoding a hand-made state.
	f := New()
	applyAll(t, f, 1, sampleWorkload()...)
	f.mu.Lock()
	r := *f.st.shard("s1")
	r.owner = "ghost"
	f.st.put(&r)
	f.mu.Unlock()
	var buf bytes.Buffer
	if _, err := f.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	err := New().Restore(nopCloser{&buf})
	if err == nil || !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), "ghost") {
		t.Fatalf("Restore of a dangling owner: err = %v, want ErrInvalid naming the owner", err)
	}
}

// Released snapshots hand their pointer slice to the next one; a snapshot that is
// still being persisted must never share it.
func TestSnapshotBufferReuse(t *testing.T) {
	f := New()
	applyAll(t, f, 1, sampleWorkload()...)
	a, _ := f.Snapshot()
	wantA := snapshotBytes(t, f) // takes, persists and releases its own snapshot
	applyAll(t, f, 100, &PutShards{Shards: []interfaces.Shard{{ID: "s7", Job: "j"}, {ID: "s8", Job: "j"}}})
	b, _ := f.Snapshot() // may reuse the slice released just above, never a's
	wantB := snapshotBytes(t, f)
	if gotA := persist(t, a); !bytes.Equal(gotA, wantA) {
		t.Error("snapshot a changed after later snapshots")
	}
	if gotB := persist(t, b); !bytes.Equal(gotB, wantB) {
		t.Error("snapshot b does not hold the state it was taken at")
	}
	if bytes.Equal(wantA, wantB) {
		t.Fatal("test setup: the state did not change between the snapshots")
	}
}

func TestLeanRestore(t *testing.T) {
	src := New()
	applyAll(t, src, 1, sampleWorkload()...)
	good := snapshotBytes(t, src)

	f := NewWithOptions(Options{LeanRestore: true})
	applyAll(t, f, 1, &PutChild{Child: interfaces.Child{ID: "old", Tier: "host", Capacity: cpu(1)}})
	if err := f.Restore(nopCloser{bytes.NewReader(good)}); err != nil {
		t.Fatal(err)
	}
	if f.Hash() != src.Hash() {
		t.Fatal("lean restore differs from the source")
	}
	// A failed lean restore leaves the FSM empty (documented), not half-restored.
	if err := f.Restore(nopCloser{bytes.NewReader(good[:len(good)-3])}); err == nil {
		t.Fatal("truncated snapshot accepted")
	}
	if st := f.Stats(); st.Shards != 0 || st.Children != 0 || st.AppliedIndex != 0 {
		t.Fatalf("after a failed lean restore the FSM holds %+v, want empty", st)
	}
}

// TestLoadsAtTheLimitStayRestorable: loads are bounded (interfaces.MaxQuantity)
// so that a child's used load, a sum of them, stays finite: before the bound,
// two shards re-specified at 1.5e308 each made a child's used +Inf through
// valid commands, and no snapshot restored after that (a review's probe).
func TestLoadsAtTheLimitStayRestorable(t *testing.T) {
	if _, err := Encode(&PutShards{Shards: []interfaces.Shard{{ID: "a", Job: "j", Load: interfaces.Load{Mem: 1.5e308}}}}); err == nil {
		t.Fatal("a shard load of 1.5e308 was accepted")
	}
	f := New()
	big := interfaces.Load{Mem: interfaces.MaxQuantity}
	mustApply(t, f, 1, &PutChild{Child: interfaces.Child{ID: "h1", Tier: "host", Capacity: big}})
	mustApply(t, f, 2, &PutShards{Shards: []interfaces.Shard{{ID: "a", Job: "j", Load: cpu(1)}, {ID: "b", Job: "j", Load: cpu(1)}}})
	mustApply(t, f, 3, &Assign{Shard: "a", Child: "h1"})
	mustApply(t, f, 4, &Assign{Shard: "b", Child: "h1"})
	mustApply(t, f, 5, &PutShards{Shards: []interfaces.Shard{{ID: "a", Job: "j", Load: big}, {ID: "b", Job: "j", Load: big}}})
	g := restore(t, snapshotBytes(t, f))
	if f.Hash() != g.Hash() {
		t.Error("the restored replica differs")
	}
}

// TestSnapshotVersionCoversItsLogEntries: a released quarantine leaves no
// quarantined shard but quarantine and release entries in the plan log, which
// version 1 readers reject (unknown change 7); the snapshot is written as
// version 2 at least (a review's probe, checked against the pre-quarantine
// binary).
func TestSnapshotVersionCoversItsLogEntries(t *testing.T) {
	f := fixture(t)
	mustApply(t, f, fixtureNext, &Quarantine{Shard: "s2", Reason: "doctor"})
	mustApply(t, f, fixtureNext+1, &Quarantine{Shard: "s2", Reason: "operator", Release: true})
	if len(f.Quarantined()) != 0 {
		t.Fatal("s2 still quarantined")
	}
	if v := snapshotBytes(t, f)[len(snapMagic)]; v < snapVersion2 {
		t.Errorf("snapshot version %d with quarantine entries in its log, want ≥ %d", v, snapVersion2)
	}
	if v := snapshotBytes(t, fixture(t))[len(snapMagic)]; v != snapVersion {
		t.Errorf("snapshot of the fixture has version %d, want %d", v, snapVersion)
	}
}

// TestRestoreAllocatesNoLogAhead: a snapshot's plan-log capacity (up to 2³⁰,
// from the configuration or a corrupt meta record read before the checksum)
// is a limit, not an allocation: restoring one with the largest capacity
// allowed and two entries succeeds. Before, Restore allocated the whole ring
// (~146 GB) and the process died of it (a review's probe).
func TestRestoreAllocatesNoLogAhead(t *testing.T) {
	f := fixture(t)
	s := f.snapshot()
	s.logCap = 1 << 30
	var b bytes.Buffer
	if _, err := s.writeTo(&b); err != nil {
		t.Fatal(err)
	}
	g := restore(t, b.Bytes())
	if got, want := len(g.PlanLog()), len(f.PlanLog()); got != want {
		t.Errorf("restored %d log entries, want %d", got, want)
	}
}
