package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-sched/strata/coordinator/acl"
	"github.com/strata-sched/strata/interfaces"
)

func cpu(v float64) interfaces.Load { return interfaces.Load{CPU: v} }

// applyAll applies cmds through the raft entry point (encode → Apply) starting at
// index from, and returns the results.
func applyAll(t tb, f *FSM, from uint64, cmds ...Command) []*Result {
	t.Helper()
	out := make([]*Result, len(cmds))
	for i, c := range cmds {
		b, err := Encode(c)
		if err != nil {
			t.Fatalf("encode %s: %v", c.Type(), err)
		}
		out[i] = f.Apply(&raft.Log{Index: from + uint64(i), Type: raft.LogCommand, Data: b}).(*Result)
	}
	return out
}

// fixture: h1, h2 active (cpu 4), h3 draining; s1 on h1 at epoch 1; s2 never
// placed; s3 on h1 at epoch 1 with a move to h2 in flight; s4 was on h2 and was
// unassigned at epoch 1.
func fixture(t tb) *FSM {
	t.Helper()
	f := New()
	rs := applyAll(t, f, 1,
		&PutChild{Child: interfaces.Child{ID: "h1", Tier: "host", Capacity: cpu(4)}},
		&PutChild{Child: interfaces.Child{ID: "h2", Tier: "host", Capacity: cpu(4)}},
		&PutChild{Child: interfaces.Child{ID: "h3", Tier: "host", Capacity: cpu(4), State: interfaces.ChildDraining}},
		&PutShards{Shards: []interfaces.Shard{
			{ID: "s1", Job: "j", Load: cpu(1)}, {ID: "s2", Job: "j", Load: cpu(1)},
			{ID: "s3", Job: "j", Load: cpu(2)}, {ID: "s4", Job: "j", Load: cpu(0.5)}}},
		&Assign{Shard: "s1", Child: "h1"},
		&Assign{Shard: "s3", Child: "h1"},
		&BeginMove{Move: interfaces.Move{Shard: "s3", From: "h1", To: "h2", Epoch: 1, Reason: "balance"}},
		&Assign{Shard: "s4", Child: "h2"},
		&Unassign{Shard: "s4", Epoch: 1},
	)
	for i, r := range rs {
		if err := r.Err(); err != nil {
			t.Fatalf("fixture command %d: %v", i, err)
		}
	}
	return f
}

const fixtureNext = 10 // the next free index after fixture

func owner(f *FSM, id interfaces.ShardID) string {
	s, ok := f.Shard(id)
	if !ok {
		return "<none>"
	}
	fl := ""
	if s.InFlight != nil {
		fl = "->" + string(s.InFlight.To)
	}
	return fmt.Sprintf("%s@%d%s", s.Owner, s.Epoch, fl)
}

func used(f *FSM, id interfaces.ChildID) string {
	for _, c := range f.Children() {
		if c.Child.ID == id {
			return fmt.Sprintf("%g/%d", c.Used.CPU, c.Shards)
		}
	}
	return "<none>"
}

func TestApplyCommands(t *testing.T) {
	type want struct {
		errs  []error           // per op: nil or the sentinel it must wrap
		state map[string]string // "shard:s1" → owner@epoch[->to], "child:h1" → cpu/shards
	}
	cases := []struct {
		name string
		cmd  Command
		want want
	}{
		// put child
		{"put child new", &PutChild{Child: interfaces.Child{ID: "h4", Tier: "host", Capacity: cpu(2)}},
			want{[]error{nil}, map[string]string{"child:h4": "0/0"}}},
		{"put child update keeps usage", &PutChild{Child: interfaces.Child{ID: "h1", Tier: "host", Capacity: cpu(9), State: interfaces.ChildFailed}},
			want{[]error{nil}, map[string]string{"child:h1": "1/1", "shard:s1": "h1@1"}}},
		// remove child
		{"remove empty child", &RemoveChild{ID: "h3"}, want{[]error{nil}, map[string]string{"child:h3": "<none>"}}},
		{"remove unknown child", &RemoveChild{ID: "hx"}, want{[]error{interfaces.ErrNotFound}, nil}},
		{"remove child with shards", &RemoveChild{ID: "h1"}, want{[]error{interfaces.ErrConflict}, map[string]string{"child:h1": "1/1"}}},
		{"remove child with incoming move", &RemoveChild{ID: "h2"}, want{[]error{interfaces.ErrConflict}, map[string]string{"child:h2": "2/1"}}},
		// put shards
		{"put shards new and update", &PutShards{Shards: []interfaces.Shard{{ID: "s5", Job: "j", Load: cpu(1)}, {ID: "s1", Job: "j", Load: cpu(3)}}},
			want{[]error{nil, nil}, map[string]string{"shard:s5": "@0", "shard:s1": "h1@1", "child:h1": "3/1"}}},
		{"put shard in flight recharges target", &PutShards{Shards: []interfaces.Shard{{ID: "s3", Job: "j", Load: cpu(0.5)}}},
			want{[]error{nil}, map[string]string{"shard:s3": "h1@1->h2", "child:h2": "0.5/1", "child:h1": "1/1"}}},
		// delete shards
		{"delete shards", &DeleteShards{IDs: []interfaces.ShardID{"s1", "s2", "sx", "s3"}},
			want{[]error{nil, nil, interfaces.ErrNotFound, interfaces.ErrConflict},
				map[string]string{"shard:s1": "<none>", "shard:s2": "<none>", "shard:s3": "h1@1->h2", "child:h1": "0/0"}}},
		// assign
		{"assign new shard", &Assign{Shard: "s2", Child: "h2"}, want{[]error{nil}, map[string]string{"shard:s2": "h2@1", "child:h2": "3/2"}}},
		{"assign keeps epoch history", &Assign{Shard: "s4", Child: "h1"}, want{[]error{nil}, map[string]string{"shard:s4": "h1@2"}}},
		{"assign placed shard", &Assign{Shard: "s1", Child: "h2"}, want{[]error{interfaces.ErrConflict}, map[string]string{"shard:s1": "h1@1"}}},
		{"assign unknown shard", &Assign{Shard: "sx", Child: "h1"}, want{[]error{interfaces.ErrNotFound}, nil}},
		{"assign unknown child", &Assign{Shard: "s2", Child: "hx"}, want{[]error{interfaces.ErrNotFound}, map[string]string{"shard:s2": "@0"}}},
		{"assign draining child", &Assign{Shard: "s2", Child: "h3"}, want{[]error{interfaces.ErrConflict}, map[string]string{"shard:s2": "@0"}}},
		// unassign
		{"unassign", &Unassign{Shard: "s1", Epoch: 1}, want{[]error{nil}, map[string]string{"shard:s1": "@1", "child:h1": "0/0"}}},
		{"unassign stale", &Unassign{Shard: "s1", Epoch: 2}, want{[]error{interfaces.ErrStaleEpoch}, map[string]string{"shard:s1": "h1@1"}}},
		{"unassign unassigned", &Unassign{Shard: "s4", Epoch: 1}, want{[]error{interfaces.ErrConflict}, nil}},
		{"unassign in flight", &Unassign{Shard: "s3", Epoch: 1}, want{[]error{interfaces.ErrConflict}, map[string]string{"shard:s3": "h1@1->h2"}}},
		{"unassign unknown", &Unassign{Shard: "sx", Epoch: 0}, want{[]error{interfaces.ErrNotFound}, nil}},
		// move (epoch compare-and-set)
		{"move", &Move{Move: interfaces.Move{Shard: "s1", From: "h1", To: "h2", Epoch: 1}},
			want{[]error{nil}, map[string]string{"shard:s1": "h2@2", "child:h1": "0/0", "child:h2": "3/2"}}},
		{"move stale epoch", &Move{Move: interfaces.Move{Shard: "s1", From: "h1", To: "h2", Epoch: 0}},
			want{[]error{interfaces.ErrStaleEpoch}, map[string]string{"shard:s1": "h1@1", "child:h1": "1/1"}}},
		{"move wrong owner", &Move{Move: interfaces.Move{Shard: "s1", From: "h2", To: "h3", Epoch: 1}},
			want{[]error{interfaces.ErrConflict}, map[string]string{"shard:s1": "h1@1"}}},
		{"move unassigned", &Move{Move: interfaces.Move{Shard: "s4", From: "h2", To: "h1", Epoch: 1}},
			want{[]error{interfaces.ErrConflict}, map[string]string{"shard:s4": "@1"}}},
		{"move in flight", &Move{Move: interfaces.Move{Shard: "s3", From: "h1", To: "h2", Epoch: 1}},
			want{[]error{interfaces.ErrConflict}, map[string]string{"shard:s3": "h1@1->h2"}}},
		{"move to draining", &Move{Move: interfaces.Move{Shard: "s1", From: "h1", To: "h3", Epoch: 1}},
			want{[]error{interfaces.ErrConflict}, map[string]string{"shard:s1": "h1@1"}}},
		{"move to unknown child", &Move{Move: interfaces.Move{Shard: "s1", From: "h1", To: "hx", Epoch: 1}},
			want{[]error{interfaces.ErrNotFound}, map[string]string{"shard:s1": "h1@1"}}},
		{"move unknown shard", &Move{Move: interfaces.Move{Shard: "sx", From: "h1", To: "h2"}},
			want{[]error{interfaces.ErrNotFound}, nil}},
		// begin / complete / abort
		{"begin move", &BeginMove{Move: interfaces.Move{Shard: "s1", From: "h1", To: "h2", Epoch: 1}},
			want{[]error{nil}, map[string]string{"shard:s1": "h1@1->h2", "child:h1": "0/0", "child:h2": "3/2"}}},
		{"begin move stale", &BeginMove{Move: interfaces.Move{Shard: "s1", From: "h1", To: "h2", Epoch: 5}},
			want{[]error{interfaces.ErrStaleEpoch}, map[string]string{"shard:s1": "h1@1"}}},
		{"begin move twice", &BeginMove{Move: interfaces.Move{Shard: "s3", From: "h1", To: "h2", Epoch: 1}},
			want{[]error{interfaces.ErrConflict}, map[string]string{"shard:s3": "h1@1->h2"}}},
		{"complete move", &CompleteMove{Shard: "s3", Epoch: 1},
			want{[]error{nil}, map[string]string{"shard:s3": "h2@2", "child:h1": "1/1", "child:h2": "2/1"}}},
		{"complete stale", &CompleteMove{Shard: "s3", Epoch: 0}, want{[]error{interfaces.ErrStaleEpoch}, map[string]string{"shard:s3": "h1@1->h2"}}},
		{"complete without move", &CompleteMove{Shard: "s1", Epoch: 1}, want{[]error{interfaces.ErrConflict}, map[string]string{"shard:s1": "h1@1"}}},
		{"complete unknown", &CompleteMove{Shard: "sx", Epoch: 1}, want{[]error{interfaces.ErrNotFound}, nil}},
		{"abort move", &AbortMove{Shard: "s3", Epoch: 1},
			want{[]error{nil}, map[string]string{"shard:s3": "h1@1", "child:h1": "3/2", "child:h2": "0/0"}}},
		{"abort stale", &AbortMove{Shard: "s3", Epoch: 2}, want{[]error{interfaces.ErrStaleEpoch}, map[string]string{"shard:s3": "h1@1->h2"}}},
		{"abort without move", &AbortMove{Shard: "s1", Epoch: 1}, want{[]error{interfaces.ErrConflict}, nil}},
		// apply plan: each move on its own
		{"apply plan mixed", &ApplyPlan{Tier: "region", Moves: []interfaces.Move{
			{Shard: "s2", To: "h1"},                       // assign: ok
			{Shard: "s1", From: "h1", To: "h2", Epoch: 1}, // move: ok
			{Shard: "s1", From: "h1", To: "h2", Epoch: 1}, // same again: now stale
			{Shard: "s3", From: "h1", To: "h2", Epoch: 1}, // in flight
			{Shard: "s4", From: "h2", To: "h1", Epoch: 1}, // unassigned
			{Shard: "sx", To: "h1"},                       // unknown
			{Shard: "s4", To: "h3"},                       // draining target
		}}, want{[]error{nil, nil, interfaces.ErrStaleEpoch, interfaces.ErrConflict, interfaces.ErrConflict, interfaces.ErrNotFound, interfaces.ErrConflict},
			map[string]string{"shard:s2": "h1@1", "shard:s1": "h2@2", "shard:s4": "@1", "child:h1": "1/1", "child:h2": "3/2"}}},
		{"apply plan begin", &ApplyPlan{Tier: "region", Begin: true, Moves: []interfaces.Move{
			{Shard: "s1", From: "h1", To: "h2", Epoch: 1},
			{Shard: "s2", To: "h2"},
		}}, want{[]error{nil, nil}, map[string]string{"shard:s1": "h1@1->h2", "shard:s2": "h2@1", "child:h2": "4/3", "child:h1": "0/0"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := fixture(t)
			before := f.Hash()
			r := applyAll(t, f, fixtureNext, tc.cmd)[0]
			if r.Index != fixtureNext || r.Type != tc.cmd.Type() {
				t.Errorf("result index/type = %d/%s, want %d/%s", r.Index, r.Type, fixtureNext, tc.cmd.Type())
			}
			if len(r.Ops) != len(tc.want.errs) {
				t.Fatalf("%d op results, want %d: %+v", len(r.Ops), len(tc.want.errs), r.Ops)
			}
			for i, op := range r.Ops {
				w := tc.want.errs[i]
				switch {
				case w == nil && op.Err != nil:
					t.Errorf("op %d (%s): unexpected error %v", i, op.ID, op.Err)
				case w != nil && !errors.Is(op.Err, w):
					t.Errorf("op %d (%s): error %v, want one wrapping %v", i, op.ID, op.Err, w)
				}
			}
			for key, wantV := range tc.want.state {
				kind, id, _ := strings.Cut(key, ":")
				var got string
				if kind == "shard" {
					got = owner(f, interfaces.ShardID(id))
				} else {
					got = used(f, interfaces.ChildID(id))
				}
				if got != wantV {
					t.Errorf("%s = %s, want %s", key, got, wantV)
				}
			}
			if r.Failed() == len(r.Ops) {
				// A fully rejected command changes nothing but the applied index.
				g := fixture(t)
				applyAll(t, g, fixtureNext, &PutChild{Child: interfaces.Child{ID: "h1", Tier: "host", Capacity: cpu(4)}})
				if f.Hash() != g.Hash() {
					t.Errorf("a rejected command changed the state")
				}
				if f.Hash() == before {
					t.Errorf("the applied index did not advance")
				}
			}
			checkInvariants(t, f)
		})
	}
}

// checkInvariants recomputes the derived per-child counts and the in-flight count
// from the shards and compares them with what the FSM maintains incrementally.
func checkInvariants(t tb, f *FSM) {
	t.Helper()
	f.mu.RLock()
	defer f.mu.RUnlock()
	counts := map[interfaces.ChildID]int{}
	outgoing := map[interfaces.ChildID]int{}
	loads := map[interfaces.ChildID]float64{}
	flights := 0
	for i, r := range f.st.shards {
		if f.st.index[r.id] != int32(i) {
			t.Errorf("index of %q is %d, want %d", r.id, f.st.index[r.id], i)
		}
		if r.owner != "" && f.st.children[r.owner] == nil {
			t.Errorf("shard %q is owned by unknown child %q", r.id, r.owner)
		}
		if r.flight != nil {
			flights++
			outgoing[r.owner]++
			if r.owner == "" || r.flight.From != r.owner {
				t.Errorf("shard %q: in-flight move from %q, owner %q", r.id, r.flight.From, r.owner)
			}
		}
		if e := r.effective(); e != "" {
			counts[e]++
			loads[e] += r.load.CPU
		}
	}
	if len(f.st.index) != len(f.st.shards) {
		t.Errorf("index has %d entries, slice %d", len(f.st.index), len(f.st.shards))
	}
	if flights != f.st.inflight {
		t.Errorf("in-flight count %d, shards hold %d", f.st.inflight, flights)
	}
	for id, c := range f.st.children {
		if c.outgoing != outgoing[id] {
			t.Errorf("child %q: outgoing %d, shards say %d", id, c.outgoing, outgoing[id])
		}
		if c.shards != counts[id] {
			t.Errorf("child %q: count %d, shards say %d", id, c.shards, counts[id])
		}
		if d := c.used.CPU - loads[id]; d > 1e-9 || d < -1e-9 {
			t.Errorf("child %q: used cpu %g, shards say %g", id, c.used.CPU, loads[id])
		}
	}
}

func TestPlanLogRecordsChanges(t *testing.T) {
	f := fixture(t)
	applyAll(t, f, fixtureNext,
		&CompleteMove{Shard: "s3", Epoch: 1},
		&ApplyPlan{Tier: "region", Moves: []interfaces.Move{{Shard: "s3", From: "h2", To: "h1", Epoch: 2, Reason: "back", Goal: "balance", Delta: -1}}},
		&Move{Move: interfaces.Move{Shard: "s3", From: "h1", To: "h2", Epoch: 1}}, // stale: not logged
	)
	h := f.History("s3")
	want := []string{
		"6 assign ->h1 e1",
		"7 begin h1->h2 e1",
		"10 complete h1->h2 e2",
		"11 move h2->h1 e3 region back balance -1",
	}
	if len(h) != len(want) {
		t.Fatalf("history has %d entries, want %d: %+v", len(h), len(want), h)
	}
	for i, e := range h {
		got := fmt.Sprintf("%d %s %s->%s e%d", e.Index, e.Change, e.From, e.To, e.Epoch)
		if e.Tier != "" {
			got += fmt.Sprintf(" %s %s %s %g", e.Tier, e.Reason, e.Goal, e.Delta)
		}
		if got != want[i] {
			t.Errorf("history[%d] = %q, want %q", i, got, want[i])
		}
	}
}

func TestPlanLogIsBounded(t *testing.T) {
	f := NewWithOptions(Options{PlanLogSize: 3})
	applyAll(t, f, 1,
		&PutChild{Child: interfaces.Child{ID: "a", Tier: "host", Capacity: cpu(1)}},
		&PutChild{Child: interfaces.Child{ID: "b", Tier: "host", Capacity: cpu(1)}},
		&PutShards{Shards: []interfaces.Shard{{ID: "s", Job: "j"}}},
		&Assign{Shard: "s", Child: "a"})
	for i := 0; i < 5; i++ {
		from, to := interfaces.ChildID("a"), interfaces.ChildID("b")
		if i%2 == 1 {
			from, to = to, from
		}
		r := applyAll(t, f, uint64(5+i), &Move{Move: interfaces.Move{Shard: "s", From: from, To: to, Epoch: interfaces.Epoch(i + 1)}})
		if err := r[0].Err(); err != nil {
			t.Fatal(err)
		}
	}
	log := f.PlanLog()
	if len(log) != 3 {
		t.Fatalf("plan log holds %d entries, want 3", len(log))
	}
	for i, e := range log {
		if want := uint64(7 + i); e.Index != want || e.Epoch != interfaces.Epoch(4+i) {
			t.Errorf("log[%d] = index %d epoch %d, want index %d epoch %d", i, e.Index, e.Epoch, want, 4+i)
		}
	}
}

func TestApplyPanicsOnUndecodableEntry(t *testing.T) {
	f := fixture(t)
	defer func() {
		p := recover()
		if p == nil {
			t.Fatal("Apply accepted an undecodable committed entry")
		}
		msg := fmt.Sprint(p)
		if !strings.Contains(msg, "index 42") || !strings.Contains(msg, "cannot be decoded") {
			t.Errorf("panic message %q does not say which entry and why", msg)
		}
	}()
	f.Apply(&raft.Log{Index: 42, Type: raft.LogCommand, Data: []byte{250, 1, 2, 3}})
}

func TestApplyBatchMatchesApply(t *testing.T) {
	f, g := New(), New()
	var logs []*raft.Log
	for i, c := range sampleWorkload() {
		logs = append(logs, &raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: MustEncode(c)})
	}
	// A configuration entry in the middle gets a nil response and changes nothing.
	logs = append(logs[:3], append([]*raft.Log{{Index: 99, Type: raft.LogConfiguration}}, logs[3:]...)...)
	var single []interface{}
	for _, l := range logs {
		if l.Type == raft.LogCommand {
			single = append(single, f.Apply(l))
		} else {
			single = append(single, nil)
		}
	}
	batch := g.ApplyBatch(logs)
	if len(batch) != len(logs) {
		t.Fatalf("%d responses for %d logs", len(batch), len(logs))
	}
	for i := range batch {
		if fmt.Sprint(batch[i]) != fmt.Sprint(single[i]) {
			t.Errorf("response %d: batch %v, single %v", i, batch[i], single[i])
		}
	}
	if f.Hash() != g.Hash() {
		t.Error("ApplyBatch and Apply left different states")
	}
}

// sampleWorkload is a short valid command sequence touching every command type.
func sampleWorkload() []Command {
	return []Command{
		&PutChild{Child: interfaces.Child{ID: "a", Tier: "host", Capacity: cpu(4), Labels: map[string]string{"z": "1"}}},
		&PutChild{Child: interfaces.Child{ID: "b", Tier: "host", Capacity: interfaces.Load{CPU: 4, Extra: map[string]float64{"gpu": 1}}}},
		&PutChild{Child: interfaces.Child{ID: "c", Tier: "host", Capacity: cpu(4)}},
		&PutShards{Shards: []interfaces.Shard{{ID: "s1", Job: "j", Load: cpu(1)}, {ID: "s2", Job: "j", Load: interfaces.Load{CPU: 1, Extra: map[string]float64{"gpu": 0.5}}}, {ID: "s3", Job: "k", Load: cpu(1)}}},
		&Assign{Shard: "s1", Child: "a", Reason: "place"},
		&Assign{Shard: "s2", Child: "b"},
		&BeginMove{Move: interfaces.Move{Shard: "s1", From: "a", To: "b", Epoch: 1}},
		&CompleteMove{Shard: "s1", Epoch: 1},
		&BeginMove{Move: interfaces.Move{Shard: "s2", From: "b", To: "a", Epoch: 1}},
		&AbortMove{Shard: "s2", Epoch: 1, Reason: "timeout"},
		&ApplyPlan{Tier: "region", Moves: []interfaces.Move{{Shard: "s3", To: "c"}, {Shard: "s2", From: "b", To: "c", Epoch: 1}}},
		&Unassign{Shard: "s3", Epoch: 1},
		&Move{Move: interfaces.Move{Shard: "s2", From: "c", To: "a", Epoch: 2}},
		&DeleteShards{IDs: []interfaces.ShardID{"s3"}},
		&RemoveChild{ID: "c"},
		&Move{Move: interfaces.Move{Shard: "s2", From: "c", To: "a", Epoch: 2}}, // rejected: stale
	}
}

// A child whose only shard is moving away still owns it until the move completes:
// it cannot be removed (found by the snapshot property test).
func TestRemoveChildWithShardMovingOut(t *testing.T) {
	f := fixture(t)
	rs := applyAll(t, f, fixtureNext,
		&Move{Move: interfaces.Move{Shard: "s1", From: "h1", To: "h2", Epoch: 1}},
		&RemoveChild{ID: "h1"}, // s3 is still on h1, moving to h2
		&CompleteMove{Shard: "s3", Epoch: 1},
		&RemoveChild{ID: "h1"},
	)
	if err := rs[0].Err(); err != nil {
		t.Fatal(err)
	}
	if err := rs[1].Err(); !errors.Is(err, interfaces.ErrConflict) {
		t.Fatalf("removing a child that owns a shard moving out: err = %v, want ErrConflict", err)
	}
	if err := rs[2].Err(); err != nil {
		t.Fatal(err)
	}
	if err := rs[3].Err(); err != nil {
		t.Fatalf("removing the emptied child: %v", err)
	}
	checkInvariants(t, f)
}

func TestApplyCommandCopiesInput(t *testing.T) {
	f := New()
	allowed := []interfaces.ChildID{"a"}
	labels := map[string]string{"zone": "x"}
	if _, err := f.ApplyCommand(1, &PutShards{Shards: []interfaces.Shard{{ID: "s", Job: "j",
		Constraints: interfaces.ShardConstraints{Allowed: allowed, Labels: labels}}}}); err != nil {
		t.Fatal(err)
	}
	allowed[0] = "zz"
	labels["zone"] = "changed"
	st, _ := f.Shard("s")
	if st.Spec.Constraints.Allowed[0] != "a" || st.Spec.Constraints.Labels["zone"] != "x" {
		t.Fatalf("the FSM shares the caller's slices/maps: %+v", st.Spec.Constraints)
	}
	if _, err := f.ApplyCommand(2, &Assign{Shard: "s"}); !errors.Is(err, interfaces.ErrInvalid) {
		t.Fatalf("invalid command: err = %v, want ErrInvalid", err)
	}
	if f.AppliedIndex() != 1 {
		t.Fatalf("an invalid command moved the applied index to %d", f.AppliedIndex())
	}
}

// Readers on other goroutines while Raft's goroutine applies and snapshots; run
// with -race to check the locking.
func TestConcurrentReadsDuringApply(t *testing.T) {
	f := New()
	applyAll(t, f, 1, sampleWorkload()[:4]...)
	done := make(chan struct{})
	errs := make(chan error, 4)
	for g := 0; g < 3; g++ {
		go func() {
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				_ = f.View("t", "i")
				_, _ = f.Shard("s1")
				_ = f.History("s1")
				_ = f.Hash()
				_ = f.VerifyPlan([]interfaces.Move{{Shard: "s1", From: "a", To: "b", Epoch: 1}})
				if st := f.Stats(); st.Shards < 3 {
					errs <- fmt.Errorf("a reader saw %d shards", st.Shards)
					return
				}
			}
		}()
	}
	idx := uint64(100)
	for i := 0; i < 200; i++ {
		from, to := interfaces.ChildID("a"), interfaces.ChildID("b")
		if i%2 == 0 {
			from, to = to, from
		}
		if i == 0 {
			applyAll(t, f, idx, &Assign{Shard: "s1", Child: "a"})
			idx++
			continue
		}
		r := applyAll(t, f, idx, &Move{Move: interfaces.Move{Shard: "s1", From: from, To: to, Epoch: interfaces.Epoch(i)}})
		idx++
		if err := r[0].Err(); err != nil {
			t.Fatal(err)
		}
		if i%50 == 0 {
			b := snapshotBytes(t, f)
			if err := f.Restore(nopCloser{bytesReader(b)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(done)
	for g := 0; g < 3; g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestLogEntriesCarryAppendTime: every log entry is stamped with its Raft
// entry's AppendedAt (what strata explain shows as the time of a change), the
// stamp survives a snapshot (written as version 3) and a restore, and a
// command applied outside Raft carries none (its snapshot stays version 1).
func TestLogEntriesCarryAppendTime(t *testing.T) {
	f := New()
	base := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	for i, c := range sampleWorkload() {
		at := base.Add(time.Duration(i) * time.Second)
		f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: MustEncode(c), AppendedAt: at})
	}
	h := f.History("s2")
	if len(h) == 0 {
		t.Fatal("no history for s2")
	}
	for _, e := range h {
		if want := base.Add(time.Duration(e.Index-1) * time.Second).UnixNano(); e.At != want {
			t.Errorf("entry at index %d (%s): at %d, want %d", e.Index, e.Change, e.At, want)
		}
	}
	var b bytes.Buffer
	if _, err := f.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	if v := b.Bytes()[len(snapMagic)]; v != snapVersion3 {
		t.Errorf("snapshot version %d, want %d", v, snapVersion3)
	}
	g := New()
	if err := g.Restore(nopCloser{bytesReader(b.Bytes())}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g.History("s2"), h) {
		t.Errorf("restored history %+v, want %+v", g.History("s2"), h)
	}
	if f.Hash() != g.Hash() {
		t.Error("restored state hashes differently")
	}
	u := New()
	for i, c := range sampleWorkload() {
		if _, err := u.ApplyCommand(uint64(i+1), c); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range u.History("s2") {
		if e.At != 0 {
			t.Errorf("entry applied outside Raft stamped %d", e.At)
		}
	}
	b.Reset()
	if _, err := u.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	if v := b.Bytes()[len(snapMagic)]; v != snapVersion {
		t.Errorf("unstamped snapshot version %d, want %d", v, snapVersion)
	}
}

// TestDropShardsIsAllOrNone: a batch with a missing shard changes nothing; a
// whole batch aborts the in-flight move it meets and deletes every shard.
func TestDropShardsIsAllOrNone(t *testing.T) {
	f := fixture(t)
	before := []string{owner(f, "s1"), owner(f, "s3"), used(f, "h1"), used(f, "h2")}
	rs := applyAll(t, f, fixtureNext, &DropShards{IDs: []interfaces.ShardID{"s1", "s3", "nope"}, Reason: "job deleted"})
	ops := rs[0].Ops
	if !errors.Is(ops[2].Err, interfaces.ErrNotFound) || !errors.Is(ops[0].Err, interfaces.ErrConflict) || !errors.Is(ops[1].Err, interfaces.ErrConflict) {
		t.Fatalf("a batch with a missing shard: %v / %v / %v", ops[0].Err, ops[1].Err, ops[2].Err)
	}
	if after := []string{owner(f, "s1"), owner(f, "s3"), used(f, "h1"), used(f, "h2")}; !reflect.DeepEqual(after, before) {
		t.Fatalf("a refused batch changed the state: %v → %v", before, after)
	}
	rs = applyAll(t, f, fixtureNext+1, &DropShards{IDs: []interfaces.ShardID{"s1", "s3"}, Reason: "job deleted"})
	if err := rs[0].Err(); err != nil {
		t.Fatal(err)
	}
	if owner(f, "s1") != "<none>" || owner(f, "s3") != "<none>" {
		t.Fatalf("after the drop: s1 %s, s3 %s", owner(f, "s1"), owner(f, "s3"))
	}
	if used(f, "h1") != "0/0" || used(f, "h2") != "0/0" {
		t.Fatalf("loads after the drop: h1 %s, h2 %s", used(f, "h1"), used(f, "h2"))
	}
	aborted := false
	for _, e := range f.PlanLog() {
		if e.Change == ChangeAbort && e.Shard == "s3" && e.Reason == "job deleted" {
			aborted = true
		}
	}
	if !aborted {
		t.Error("the placement log has no abort of s3's move")
	}
	checkInvariants(t, f)
}

// TestPlanBatch: the drains are all or none with the moves; the moves apply
// as ApplyPlan's, begun or direct as flagged.
func TestPlanBatch(t *testing.T) {
	f := fixture(t)
	moves := []interfaces.Move{
		{Shard: "s2", To: "h2", Reason: "place"},
		{Shard: "s1", From: "h1", To: "h2", Epoch: 1, Reason: "drain h1"},
	}
	rs := applyAll(t, f, fixtureNext, &PlanBatch{Tier: "region", Drain: []interfaces.ChildID{"h1", "h9"}, Moves: moves, Begin: []bool{false, true}})
	if err := rs[0].Ops[1].Err; !errors.Is(err, interfaces.ErrNotFound) {
		t.Fatalf("drain of a missing child: %v", err)
	}
	for i, op := range rs[0].Ops {
		if op.Err == nil {
			t.Errorf("op %d of a refused batch succeeded", i)
		}
	}
	if c, _ := f.Child("h1"); c.State != interfaces.ChildActive || owner(f, "s2") != "@0" || owner(f, "s1") != "h1@1" {
		t.Fatalf("a refused batch changed the state: h1 %s, s2 %s, s1 %s", c.State, owner(f, "s2"), owner(f, "s1"))
	}
	rs = applyAll(t, f, fixtureNext+1, &PlanBatch{Tier: "region", Drain: []interfaces.ChildID{"h1", "h3"}, Moves: moves, Begin: []bool{false, true}})
	if err := rs[0].Err(); err != nil {
		t.Fatal(err)
	}
	if len(rs[0].Ops) != 4 {
		t.Fatalf("%d ops, want 2 drains + 2 moves", len(rs[0].Ops))
	}
	if c, _ := f.Child("h1"); c.State != interfaces.ChildDraining {
		t.Errorf("h1 is %s, want draining", c.State)
	}
	if c, _ := f.Child("h3"); c.State != interfaces.ChildDraining {
		t.Errorf("h3 (draining already) is %s", c.State)
	}
	if owner(f, "s2") != "h2@1" || owner(f, "s1") != "h1@1->h2" {
		t.Errorf("after the batch: s2 %s (want placed directly), s1 %s (want begun)", owner(f, "s2"), owner(f, "s1"))
	}
	// A move to a child the batch drains is refused on its own, like any
	// move to a draining child.
	rs = applyAll(t, f, fixtureNext+2, &PlanBatch{Tier: "region", Drain: []interfaces.ChildID{"h2"}, Moves: []interfaces.Move{{Shard: "s4", To: "h2"}}, Begin: []bool{false}})
	if err := rs[0].Ops[0].Err; err != nil {
		t.Fatal(err)
	}
	if err := rs[0].Ops[1].Err; !errors.Is(err, interfaces.ErrConflict) {
		t.Errorf("a move to a child drained by the same batch: %v", err)
	}
	checkInvariants(t, f)
}

// TestRetiredEpochsOnlyGrow: a shard re-created under the ID of a shard
// retired with RetireShards starts above every epoch the old one had, on this
// replica and on one restored from a snapshot; DropShards (a region's drop)
// leaves the floor alone, and a refused batch retires nothing.
func TestRetiredEpochsOnlyGrow(t *testing.T) {
	f := fixture(t)
	idx := uint64(fixtureNext)
	next := func() uint64 { idx++; return idx - 1 }
	for range 3 { // s1 reaches epoch 4 on h1 or h2
		st, _ := f.Shard("s1")
		to := interfaces.ChildID("h2")
		if st.Owner == "h2" {
			to = "h1"
		}
		mustApply(t, f, next(), &Move{Move: interfaces.Move{Shard: "s1", From: st.Owner, To: to, Epoch: st.Epoch}})
	}
	old, _ := f.Shard("s1")
	if old.Epoch != 4 {
		t.Fatalf("s1 at epoch %d, want 4", old.Epoch)
	}
	rs := applyAll(t, f, next(), &RetireShards{DropShards{IDs: []interfaces.ShardID{"s1", "nope"}, Reason: "job deleted"}})
	if rs[0].Err() == nil {
		t.Fatal("a batch with a missing shard was applied")
	}
	if b := snapshotBytes(t, f); b[len(snapMagic)] == snapVersion4 {
		t.Error("a refused RetireShards raised the floor (snapshot version 4)")
	}
	mustApply(t, f, next(), &RetireShards{DropShards{IDs: []interfaces.ShardID{"s1", "s2"}, Reason: "job deleted"}})
	b := snapshotBytes(t, f)
	if v := b[len(snapMagic)]; v != snapVersion4 {
		t.Errorf("snapshot with a floor has version %d, want %d", v, snapVersion4)
	}
	g := restore(t, b)
	for name, fsm := range map[string]*FSM{"this replica": f, "a restored replica": g} {
		i := idx
		mustApply(t, fsm, i, &PutShards{Shards: []interfaces.Shard{{ID: "s1", Job: "j", Load: cpu(1)}, {ID: "s9", Job: "k", Load: cpu(1)}}})
		mustApply(t, fsm, i+1, &Assign{Shard: "s1", Child: "h2"})
		if st, _ := fsm.Shard("s1"); st.Epoch <= old.Epoch {
			t.Errorf("%s: the re-created s1 placed at epoch %d, not above the retired one's %d", name, st.Epoch, old.Epoch)
		}
	}
	if f.Hash() != g.Hash() {
		t.Error("the restored replica diverged")
	}
	// A region's drop (DropShards) does not retire: its local epochs restart.
	mustApply(t, f, idx+2, &DropShards{IDs: []interfaces.ShardID{"s1"}, Reason: "revoked by the parent tier"})
	mustApply(t, f, idx+3, &PutShards{Shards: []interfaces.Shard{{ID: "s1", Job: "j", Load: cpu(1)}}})
	if st, _ := f.Shard("s1"); st.Epoch != old.Epoch {
		t.Errorf("after a DropShards the re-created s1 is at epoch %d, want the floor %d (unchanged)", st.Epoch, old.Epoch)
	}
	checkInvariants(t, f)
}

func mustApply(t tb, f *FSM, idx uint64, c Command) {
	t.Helper()
	if err := applyAll(t, f, idx, c)[0].Err(); err != nil {
		t.Fatalf("%s at %d: %v", c.Type(), idx, err)
	}
}

// TestTokens: a token is created once (its ID and its secret's hash are
// unique), found by the hash of its secret, revoked once, and kept by a
// snapshot; a refused write changes no token.
func TestTokens(t *testing.T) {
	f := New()
	tok := acl.Token{ID: "ci", Policy: acl.PolicyRead, Hash: acl.HashSecret("secret-1")}
	mustApply(t, f, 1, &PutToken{Token: tok})
	for i, c := range []Command{
		&PutToken{Token: acl.Token{ID: "ci", Policy: acl.PolicyAdmin, Hash: acl.HashSecret("secret-2")}},
		&PutToken{Token: acl.Token{ID: "other", Policy: acl.PolicyAdmin, Hash: acl.HashSecret("secret-1")}},
		&DeleteToken{ID: "nope"},
	} {
		if err := applyAll(t, f, uint64(2+i), c)[0].Err(); err == nil {
			t.Errorf("%s %+v: accepted", c.Type(), c)
		}
	}
	if got := f.Tokens(); len(got) != 1 || got[0] != tok {
		t.Fatalf("tokens after the refused writes: %+v", got)
	}
	if got, ok := f.TokenByHash(acl.HashSecret("secret-1")); !ok || got != tok {
		t.Fatalf("TokenByHash = %+v, %v", got, ok)
	}
	var buf bytes.Buffer
	if _, err := f.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	g := New()
	if err := g.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatal(err)
	}
	if got := g.Tokens(); len(got) != 1 || got[0] != tok {
		t.Fatalf("restored tokens %+v", got)
	}
	mustApply(t, f, 10, &DeleteToken{ID: "ci"})
	if _, ok := f.TokenByHash(acl.HashSecret("secret-1")); ok || len(f.Tokens()) != 0 {
		t.Fatal("revoked token still found")
	}
}
