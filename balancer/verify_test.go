package balancer_test

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/interfaces"
)

func cpu(v float64) interfaces.Load { return interfaces.Load{CPU: v} }

// verifyView: children a, b (active, cpu 4), d (draining), f (failed), g (gpu=1,
// zone=x); shards s1 (cpu 1, on a@3), s2 (cpu 2, on a@1, in flight to b),
// s3 (cpu 1, unassigned), s4 (cpu 3, on b@2), p (pinned to a, unassigned),
// l (needs zone=x, unassigned), big (cpu 5, unassigned).
//
// Used: a = 1 (s1; s2 counts on b), b = 3 + 2 = 5 > 4 (already over).
func verifyView() *interfaces.View {
	return &interfaces.View{
		Children: []interfaces.Child{
			{ID: "a", Capacity: cpu(4)},
			{ID: "b", Capacity: cpu(6)},
			{ID: "d", Capacity: cpu(4), State: interfaces.ChildDraining},
			{ID: "f", Capacity: cpu(4), State: interfaces.ChildFailed},
			{ID: "g", Capacity: interfaces.Load{CPU: 4, Extra: map[string]float64{"gpu": 1}}, Labels: map[string]string{"zone": "x"}},
		},
		Shards: []interfaces.Shard{
			{ID: "s1", Load: cpu(1)},
			{ID: "s2", Load: cpu(2)},
			{ID: "s3", Load: cpu(1)},
			{ID: "s4", Load: cpu(3)},
			{ID: "p", Load: cpu(1), Constraints: interfaces.ShardConstraints{Pinned: "a"}},
			{ID: "l", Load: cpu(1), Constraints: interfaces.ShardConstraints{Labels: map[string]string{"zone": "x"}}},
			{ID: "al", Load: cpu(1), Constraints: interfaces.ShardConstraints{Allowed: []interfaces.ChildID{"b"}}},
			{ID: "big", Load: cpu(5)},
			{ID: "gpu", Load: interfaces.Load{CPU: 0.1, Extra: map[string]float64{"gpu": 2}}},
		},
		Assignments: []interfaces.Assignment{
			{Shard: "s1", Child: "a", Epoch: 3},
			{Shard: "s2", Child: "a", Epoch: 1},
			{Shard: "s4", Child: "b", Epoch: 2},
		},
		InFlight: []interfaces.Move{{Shard: "s2", From: "a", To: "b", Epoch: 1}},
	}
}

func TestVerifyRules(t *testing.T) {
	type mv = interfaces.Move
	cases := []struct {
		name  string
		moves []mv
		want  []balancer.RejectCode // per move: 0 = accepted
	}{
		{"first placement", []mv{{Shard: "s3", To: "a"}}, []balancer.RejectCode{0}},
		{"move with current epoch", []mv{{Shard: "s1", From: "a", To: "g", Epoch: 3}}, []balancer.RejectCode{0}},
		{"no target", []mv{{Shard: "s3"}}, []balancer.RejectCode{balancer.RejectInvalid}},
		{"target is source", []mv{{Shard: "s1", From: "a", To: "a", Epoch: 3}}, []balancer.RejectCode{balancer.RejectInvalid}},
		// A move the tier could not commit is rejected on its own (not with its
		// batch, by the state machine), and the rest of the plan goes ahead.
		{"infinite delta", []mv{{Shard: "s3", To: "a", Delta: math.Inf(-1)}, {Shard: "p", To: "a"}},
			[]balancer.RejectCode{balancer.RejectInvalid, 0}},
		{"NaN delta", []mv{{Shard: "s3", To: "a", Delta: math.NaN()}}, []balancer.RejectCode{balancer.RejectInvalid}},
		{"reason over the limit", []mv{{Shard: "s3", To: "a", Reason: strings.Repeat("r", interfaces.MaxTextLen+1)}, {Shard: "p", To: "a"}},
			[]balancer.RejectCode{balancer.RejectInvalid, 0}},
		{"goal over the limit", []mv{{Shard: "s3", To: "a", Goal: strings.Repeat("g", interfaces.MaxTextLen+1)}},
			[]balancer.RejectCode{balancer.RejectInvalid}},
		{"reason at the limit", []mv{{Shard: "s3", To: "a", Reason: strings.Repeat("r", interfaces.MaxTextLen), Delta: -1e300}},
			[]balancer.RejectCode{0}},
		{"unknown shard", []mv{{Shard: "zz", To: "a"}}, []balancer.RejectCode{balancer.RejectUnknownShard}},
		{"unknown child", []mv{{Shard: "s3", To: "zz"}}, []balancer.RejectCode{balancer.RejectUnknownChild}},
		{"stale epoch", []mv{{Shard: "s1", From: "a", To: "g", Epoch: 2}}, []balancer.RejectCode{balancer.RejectStaleEpoch}},
		{"wrong owner", []mv{{Shard: "s1", From: "b", To: "g", Epoch: 3}}, []balancer.RejectCode{balancer.RejectWrongOwner}},
		{"placing a placed shard", []mv{{Shard: "s1", To: "g"}}, []balancer.RejectCode{balancer.RejectWrongOwner}},
		{"moving an unassigned shard", []mv{{Shard: "s3", From: "a", To: "g"}}, []balancer.RejectCode{balancer.RejectWrongOwner}},
		{"in flight", []mv{{Shard: "s2", From: "a", To: "g", Epoch: 1}}, []balancer.RejectCode{balancer.RejectInFlight}},
		{"draining target", []mv{{Shard: "s3", To: "d"}}, []balancer.RejectCode{balancer.RejectTargetInactive}},
		{"failed target", []mv{{Shard: "s3", To: "f"}}, []balancer.RejectCode{balancer.RejectTargetInactive}},
		{"pinned elsewhere", []mv{{Shard: "p", To: "g"}}, []balancer.RejectCode{balancer.RejectConstraint}},
		{"pinned here", []mv{{Shard: "p", To: "a"}}, []balancer.RejectCode{0}},
		{"label missing", []mv{{Shard: "l", To: "a"}}, []balancer.RejectCode{balancer.RejectConstraint}},
		{"label present", []mv{{Shard: "l", To: "g"}}, []balancer.RejectCode{0}},
		{"not allowed", []mv{{Shard: "al", To: "a"}}, []balancer.RejectCode{balancer.RejectConstraint}},
		{"too big", []mv{{Shard: "big", To: "a"}}, []balancer.RejectCode{balancer.RejectCapacity}},
		{"extra dimension over", []mv{{Shard: "gpu", To: "g"}}, []balancer.RejectCode{balancer.RejectCapacity}},
		{"extra dimension absent", []mv{{Shard: "gpu", To: "a"}}, []balancer.RejectCode{balancer.RejectCapacity}},
		// b: cap 6, used 3 (s4) + 2 (s2 in flight counts as landed) = 5.
		{"in-flight load counts on target", []mv{{Shard: "s3", To: "b"}, {Shard: "p", To: "a"}}, []balancer.RejectCode{0, 0}},
		{"in-flight load fills target", []mv{{Shard: "s3", To: "b"}, {Shard: "l", To: "g"}, {Shard: "s1", From: "a", To: "b", Epoch: 3}},
			[]balancer.RejectCode{0, 0, balancer.RejectCapacity}},
		// a: cap 4, used 1. s3 (1) + p (1) fit, big would not; accepted moves count.
		{"accepted moves count", []mv{{Shard: "s3", To: "a"}, {Shard: "p", To: "a"}, {Shard: "al", To: "b"}, {Shard: "l", To: "a"}},
			[]balancer.RejectCode{0, 0, 0, balancer.RejectConstraint}},
		{"accepted moves fill", []mv{{Shard: "s3", To: "a"}, {Shard: "p", To: "a"}, {Shard: "s4", From: "b", To: "a", Epoch: 2}},
			[]balancer.RejectCode{0, 0, balancer.RejectCapacity}},
		// b: 5 + s3 = 6 is full, so s1 does not fit; moving s4 (3) off b to a
		// (1 + 3 = 4) frees room for al: 6 - 3 + 1 = 4 ≤ 6.
		{"freed capacity counts", []mv{{Shard: "s3", To: "b"}, {Shard: "s1", From: "a", To: "b", Epoch: 3},
			{Shard: "s4", From: "b", To: "a", Epoch: 2}, {Shard: "al", To: "b"}},
			[]balancer.RejectCode{0, balancer.RejectCapacity, 0, 0}},
		{"duplicate", []mv{{Shard: "s3", To: "a"}, {Shard: "s3", To: "g"}}, []balancer.RejectCode{0, balancer.RejectDuplicate}},
		{"duplicate after rejection", []mv{{Shard: "s3", To: "d"}, {Shard: "s3", To: "a"}},
			[]balancer.RejectCode{balancer.RejectTargetInactive, balancer.RejectDuplicate}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := balancer.VerifyView(verifyView(), tc.moves)
			if err != nil {
				t.Fatal(err)
			}
			var wantAcc []interfaces.Move
			var wantRej []balancer.RejectCode
			for i, c := range tc.want {
				if c == 0 {
					wantAcc = append(wantAcc, tc.moves[i])
				} else {
					wantRej = append(wantRej, c)
				}
			}
			if !reflect.DeepEqual(v.Accepted, wantAcc) {
				t.Errorf("accepted %v, want %v (rejected %+v)", v.Accepted, wantAcc, v.Rejected)
			}
			var gotRej []balancer.RejectCode
			for _, r := range v.Rejected {
				gotRej = append(gotRej, r.Code)
				if r.Reason == "" || !strings.Contains(r.Err().Error(), string(r.Move.Shard)) {
					t.Errorf("rejection %+v lacks a reason naming the shard", r)
				}
			}
			if !reflect.DeepEqual(gotRej, wantRej) {
				t.Errorf("rejected %v, want %v (%+v)", gotRej, wantRej, v.Rejected)
			}
		})
	}
}

func TestRejectionErrorsWrapSentinels(t *testing.T) {
	want := map[balancer.RejectCode]error{
		balancer.RejectInvalid:        interfaces.ErrInvalid,
		balancer.RejectUnknownShard:   interfaces.ErrNotFound,
		balancer.RejectUnknownChild:   interfaces.ErrNotFound,
		balancer.RejectStaleEpoch:     interfaces.ErrStaleEpoch,
		balancer.RejectInFlight:       interfaces.ErrConflict,
		balancer.RejectWrongOwner:     interfaces.ErrConflict,
		balancer.RejectDuplicate:      interfaces.ErrConflict,
		balancer.RejectTargetInactive: interfaces.ErrConflict,
		balancer.RejectConstraint:     interfaces.ErrConflict,
		balancer.RejectCapacity:       interfaces.ErrConflict,
	}
	for code, sentinel := range want {
		err := balancer.Rejection{Move: interfaces.Move{Shard: "s"}, Code: code, Reason: "r"}.Err()
		if !errors.Is(err, sentinel) {
			t.Errorf("%s: %v does not wrap %v", code, err, sentinel)
		}
		if code.String() == "unknown" || !strings.Contains(err.Error(), code.String()) {
			t.Errorf("%s: error %q does not name the code", code, err)
		}
	}
}

func TestNewViewStateRejectsInconsistentViews(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(v *interfaces.View)
		field string
	}{
		{"duplicate child", func(v *interfaces.View) { v.Children = append(v.Children, v.Children[0]) }, "view.children[5]"},
		{"duplicate shard", func(v *interfaces.View) { v.Shards = append(v.Shards, v.Shards[0]) }, "view.shards[9]"},
		{"assignment of unknown shard", func(v *interfaces.View) {
			v.Assignments = append(v.Assignments, interfaces.Assignment{Shard: "zz", Child: "a"})
		}, "view.assignments[3]"},
		{"double assignment", func(v *interfaces.View) { v.Assignments = append(v.Assignments, v.Assignments[0]) }, "view.assignments[3]"},
		{"move of unknown shard", func(v *interfaces.View) { v.InFlight = append(v.InFlight, interfaces.Move{Shard: "zz"}) }, "view.in_flight[1]"},
		{"two moves in flight", func(v *interfaces.View) { v.InFlight = append(v.InFlight, v.InFlight[0]) }, "view.in_flight[1]"},
	}
	if _, err := balancer.VerifyView(nil, nil); !errors.Is(err, interfaces.ErrInvalid) {
		t.Errorf("nil view: err = %v, want ErrInvalid", err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := verifyView()
			tc.edit(v)
			_, err := balancer.VerifyView(v, nil)
			if !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(fmt.Sprint(err), tc.field) {
				t.Fatalf("err = %v, want ErrInvalid naming %s", err, tc.field)
			}
		})
	}
}

// Properties over random states and plans: every move comes out exactly once, in
// plan order; Verify does not modify the view and returns the same verdict twice;
// and applying the accepted moves never pushes a child that was within capacity
// over it, never places on an inactive child, never moves a shard twice.
func TestVerifyProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		nc := rapid.IntRange(1, 5).Draw(rt, "children")
		ns := rapid.IntRange(1, 12).Draw(rt, "shards")
		v := &interfaces.View{}
		for i := 0; i < nc; i++ {
			v.Children = append(v.Children, interfaces.Child{ID: interfaces.ChildID(fmt.Sprintf("c%d", i)),
				Capacity: cpu(float64(rapid.IntRange(1, 8).Draw(rt, "cap"))),
				State:    interfaces.ChildState(rapid.IntRange(0, 4).Draw(rt, "state") / 3)})
		}
		owner := map[interfaces.ShardID]interfaces.ChildID{}
		for i := 0; i < ns; i++ {
			id := interfaces.ShardID(fmt.Sprintf("s%d", i))
			v.Shards = append(v.Shards, interfaces.Shard{ID: id, Load: cpu(float64(rapid.IntRange(0, 6).Draw(rt, "load")) / 2)})
			if c := rapid.IntRange(-1, nc-1).Draw(rt, "owner"); c >= 0 {
				owner[id] = v.Children[c].ID
				v.Assignments = append(v.Assignments, interfaces.Assignment{Shard: id, Child: owner[id], Epoch: interfaces.Epoch(rapid.IntRange(1, 3).Draw(rt, "epoch"))})
				if rapid.IntRange(0, 4).Draw(rt, "inflight") == 0 {
					v.InFlight = append(v.InFlight, interfaces.Move{Shard: id, From: owner[id], To: v.Children[rapid.IntRange(0, nc-1).Draw(rt, "ifto")].ID})
				}
			}
		}
		var moves []interfaces.Move
		for i, n := 0, rapid.IntRange(0, 15).Draw(rt, "moves"); i < n; i++ {
			s := v.Shards[rapid.IntRange(0, ns-1).Draw(rt, "mshard")]
			m := interfaces.Move{Shard: s.ID, To: v.Children[rapid.IntRange(0, nc-1).Draw(rt, "mto")].ID,
				Epoch: interfaces.Epoch(rapid.IntRange(0, 3).Draw(rt, "mepoch"))}
			if rapid.Bool().Draw(rt, "realfrom") {
				m.From = owner[s.ID]
			} else if rapid.Bool().Draw(rt, "randfrom") {
				m.From = v.Children[rapid.IntRange(0, nc-1).Draw(rt, "mfrom")].ID
			}
			moves = append(moves, m)
		}

		st, err := balancer.NewViewState(v)
		if err != nil {
			rt.Fatal(err)
		}
		before := fmt.Sprintf("%+v", *v)
		got := balancer.Verify(st, moves)
		if again := balancer.Verify(st, moves); !reflect.DeepEqual(got, again) {
			rt.Fatal("Verify is not deterministic")
		}
		if fmt.Sprintf("%+v", *v) != before {
			rt.Fatal("Verify modified the view")
		}
		// Every move once, in order.
		ai, ri := 0, 0
		for i, m := range moves {
			switch {
			case ai < len(got.Accepted) && reflect.DeepEqual(got.Accepted[ai], m):
				ai++
			case ri < len(got.Rejected) && reflect.DeepEqual(got.Rejected[ri].Move, m):
				ri++
			default:
				rt.Fatalf("move %d %+v is missing or out of order", i, m)
			}
		}
		if ai != len(got.Accepted) || ri != len(got.Rejected) {
			rt.Fatalf("verdict has %d+%d moves, plan %d", len(got.Accepted), len(got.Rejected), len(moves))
		}
		// Apply the accepted moves to the used loads.
		used := map[interfaces.ChildID]float64{}
		for _, c := range v.Children {
			used[c.ID] = st.Used(c.ID).CPU
		}
		load := map[interfaces.ShardID]float64{}
		for _, s := range v.Shards {
			load[s.ID] = s.Load.CPU
		}
		moved := map[interfaces.ShardID]bool{}
		for _, m := range got.Accepted {
			if moved[m.Shard] {
				rt.Fatalf("shard %s accepted twice", m.Shard)
			}
			moved[m.Shard] = true
			if m.From != owner[m.Shard] {
				rt.Fatalf("accepted %+v but the shard is on %q", m, owner[m.Shard])
			}
			used[m.To] += load[m.Shard]
			if m.From != "" {
				used[m.From] -= load[m.Shard]
			}
		}
		for _, c := range v.Children {
			if st.Used(c.ID).CPU <= c.Capacity.CPU && used[c.ID] > c.Capacity.CPU+1e-9 {
				rt.Fatalf("child %s: accepted moves raise it to %g over capacity %g", c.ID, used[c.ID], c.Capacity.CPU)
			}
		}
		for _, m := range got.Accepted {
			for _, c := range v.Children {
				if c.ID == m.To && c.State != interfaces.ChildActive {
					rt.Fatalf("accepted a move onto %s child %s", c.State, c.ID)
				}
			}
		}
	})
}

// The tier-level rules a policy is given (View.Constraints) hold at commit as
// the shard's own constraints do: before, Verify checked only the latter, so
// a policy or plugin that ignored an operator's pin or capacity limit had its
// moves committed.
func TestVerifyTierRules(t *testing.T) {
	type mv = interfaces.Move
	type ck = interfaces.Constraint
	pin := ck{Kind: interfaces.ConstraintPin, Shards: []interfaces.ShardID{"s3"}, Children: []interfaces.ChildID{"g"}, Reason: "operator pin"}
	allowed := ck{Kind: interfaces.ConstraintAllowed, Shards: []interfaces.ShardID{"s3", "gone"}, Children: []interfaces.ChildID{"b", "g"}, Reason: "zone"}
	// a: capacity 4, used 1 (s1); the rule makes 2 usable.
	limit := ck{Kind: interfaces.ConstraintCapacity, Children: []interfaces.ChildID{"a"}, Limit: cpu(2), Reason: "operator: a usable cpu 2"}
	// s1 is on a, s2 in flight to b: one of the group per child.
	anti := ck{Kind: interfaces.ConstraintAntiAffinity, Shards: []interfaces.ShardID{"s1", "s2", "s3", "p"}, Reason: "keep apart"}
	anti2 := anti
	anti2.Max = 2
	soft := []ck{{Kind: interfaces.ConstraintAvoid, Shards: []interfaces.ShardID{"s3"}, Children: []interfaces.ChildID{"a"}},
		{Kind: interfaces.ConstraintMaxMoves, Max: 1}}
	cases := []struct {
		name  string
		rules []ck
		moves []mv
		want  []balancer.RejectCode
	}{
		{"pin elsewhere", []ck{pin}, []mv{{Shard: "s3", To: "a"}}, []balancer.RejectCode{balancer.RejectConstraint}},
		{"pin here", []ck{pin}, []mv{{Shard: "s3", To: "g"}}, []balancer.RejectCode{0}},
		{"pin of another shard", []ck{pin}, []mv{{Shard: "p", To: "a"}}, []balancer.RejectCode{0}},
		{"not allowed", []ck{allowed}, []mv{{Shard: "s3", To: "a"}}, []balancer.RejectCode{balancer.RejectConstraint}},
		{"allowed", []ck{allowed}, []mv{{Shard: "s3", To: "g"}}, []balancer.RejectCode{0}},
		{"within the limit", []ck{limit}, []mv{{Shard: "s3", To: "a"}}, []balancer.RejectCode{0}},
		{"over the limit", []ck{limit}, []mv{{Shard: "s3", To: "a"}, {Shard: "p", To: "a"}},
			[]balancer.RejectCode{0, balancer.RejectCapacity}},
		{"limit of another child", []ck{limit}, []mv{{Shard: "s3", To: "b"}}, []balancer.RejectCode{0}},
		{"anti-affinity: a holds s1", []ck{anti}, []mv{{Shard: "s3", To: "a"}}, []balancer.RejectCode{balancer.RejectConstraint}},
		{"anti-affinity: b holds s2 in flight", []ck{anti}, []mv{{Shard: "s3", To: "b"}}, []balancer.RejectCode{balancer.RejectConstraint}},
		{"anti-affinity: accepted moves count", []ck{anti}, []mv{{Shard: "s3", To: "g"}, {Shard: "p", To: "a"}, {Shard: "s1", From: "a", To: "g", Epoch: 3}},
			[]balancer.RejectCode{0, balancer.RejectConstraint, balancer.RejectConstraint}},
		{"anti-affinity: a move out makes room", []ck{anti}, []mv{{Shard: "s1", From: "a", To: "g", Epoch: 3}, {Shard: "s3", To: "a"}},
			[]balancer.RejectCode{0, 0}},
		{"anti-affinity max 2", []ck{anti2}, []mv{{Shard: "s3", To: "a"}, {Shard: "p", To: "a"}},
			[]balancer.RejectCode{0, balancer.RejectConstraint}},
		{"avoid and max_moves are not checked", soft, []mv{{Shard: "s3", To: "a"}, {Shard: "s1", From: "a", To: "g", Epoch: 3}},
			[]balancer.RejectCode{0, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := verifyView()
			v.Constraints = tc.rules
			got, err := balancer.VerifyViewRules(v, tc.moves)
			if err != nil {
				t.Fatal(err)
			}
			// Accepted and Rejected are both in plan order: merge them back.
			var codes []balancer.RejectCode
			acc, rej := 0, 0
			for _, m := range tc.moves {
				if acc < len(got.Accepted) && got.Accepted[acc] == m {
					codes = append(codes, 0)
					acc++
					continue
				}
				if rej < len(got.Rejected) {
					r := got.Rejected[rej]
					codes = append(codes, r.Code)
					if why := tc.rules[0].Reason; why != "" && !strings.Contains(r.Reason, why) {
						t.Errorf("rejection %q does not name the rule's reason %q", r.Reason, why)
					}
					rej++
				}
			}
			if !reflect.DeepEqual(codes, tc.want) {
				t.Errorf("codes %v, want %v (%+v)", codes, tc.want, got.Rejected)
			}
			// Without the rules (Verify) every move here is accepted.
			plain, _ := balancer.VerifyView(v, tc.moves)
			if len(plain.Rejected) != 0 {
				t.Fatalf("the case should test only the tier rules: Verify rejects %+v", plain.Rejected)
			}
		})
	}
}

// TestScreen: the moves refused whatever else the plan does go, in plan
// order, with their codes; capacity and constraint refusals, which depend on
// the other moves, stay for Verify.
func TestScreen(t *testing.T) {
	st, err := balancer.NewViewState(verifyView())
	if err != nil {
		t.Fatal(err)
	}
	moves := []interfaces.Move{
		{Shard: "big", To: "a"},                     // capacity: kept (a move out of a may come first)
		{Shard: "s1", From: "a", To: "b", Epoch: 2}, // stale epoch
		{Shard: "p", To: "b"},                       // pinned elsewhere: kept (constraint)
		{Shard: "zz", To: "a"},                      // unknown shard
		{Shard: "s3", To: "d"},                      // draining target
		{Shard: "s3", To: "a"},                      // s3 again
		{Shard: "s2", From: "a", To: "a", Epoch: 1}, // invalid
	}
	kept, refused := balancer.Screen(st, moves)
	var keptIDs []interfaces.ShardID
	for _, m := range kept {
		keptIDs = append(keptIDs, m.Shard)
	}
	if want := []interfaces.ShardID{"big", "p"}; !slices.Equal(keptIDs, want) {
		t.Errorf("kept %v, want %v", keptIDs, want)
	}
	var codes []balancer.RejectCode
	for _, r := range refused {
		codes = append(codes, r.Code)
	}
	want := []balancer.RejectCode{balancer.RejectStaleEpoch, balancer.RejectUnknownShard, balancer.RejectTargetInactive, balancer.RejectDuplicate, balancer.RejectInvalid}
	if !slices.Equal(codes, want) {
		t.Errorf("refused %v, want %v", codes, want)
	}
}

// CommitRules keeps every tier rule but the capacity limits, in order, and
// leaves its input alone.
func TestCommitRules(t *testing.T) {
	in := []interfaces.Constraint{
		{Kind: interfaces.ConstraintPin, Reason: "p"},
		{Kind: interfaces.ConstraintCapacity, Reason: "c"},
		{Kind: interfaces.ConstraintAntiAffinity, Reason: "a"},
		{Kind: interfaces.ConstraintMaxMoves, Reason: "m"},
	}
	var got []string
	for _, k := range balancer.CommitRules(in) {
		got = append(got, k.Reason)
	}
	if strings.Join(got, ",") != "p,a,m" || len(in) != 4 || in[1].Reason != "c" {
		t.Fatalf("CommitRules = %v (input %+v)", got, in)
	}
}
