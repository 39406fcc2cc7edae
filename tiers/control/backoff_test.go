package control

import (
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/interfaces"
)

func rej(shard, to string, code balancer.RejectCode) balancer.Rejection {
	return balancer.Rejection{Move: interfaces.Move{Shard: interfaces.ShardID(shard), To: interfaces.ChildID(to)}, Code: code, Reason: "target child would carry cpu=32.386, capacity 32"}
}

// The backstop of issue 20, item 6: a move the commit rejects for the same
// reason After rounds in a row is held for Hold — kept out of the policy's
// view (an allowed rule without the target) — then
// planned again; another reason starts the count again, and an accepted move
// of the shard forgets it. Time comes in as now (deterministic).
func TestBackoffHoldsAMoveRejectedInARow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := Backoff{After: 3, Hold: time.Minute}
	v := &interfaces.View{Children: []interfaces.Child{{ID: "h1"}, {ID: "h2"}, {ID: "h3"}}}
	round := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }

	if h := b.Observe(round(1), []balancer.Rejection{rej("u", "h1", balancer.RejectCapacity)}, nil); len(h) != 0 {
		t.Fatalf("held after one rejection: %v", h)
	}
	// Another reason starts the count again.
	b.Observe(round(2), []balancer.Rejection{rej("u", "h1", balancer.RejectConstraint)}, nil)
	b.Observe(round(3), []balancer.Rejection{rej("u", "h1", balancer.RejectCapacity)}, nil)
	b.Observe(round(4), []balancer.Rejection{rej("u", "h1", balancer.RejectCapacity)}, nil)
	if h := b.Held(round(4)); len(h) != 0 {
		t.Fatalf("held after two rejections in a row for the same reason: %v", h)
	}
	h := b.Observe(round(5), []balancer.Rejection{rej("u", "h1", balancer.RejectCapacity)}, nil)
	if len(h) != 1 || h[0].Shard != "u" || h[0].To != "h1" || h[0].Rejections != 3 || !h[0].Until.Equal(round(5).Add(time.Minute)) {
		t.Fatalf("after the third rejection in a row: %+v, want u→h1 held until %v", h, round(5).Add(time.Minute))
	}
	if s := h[0].String(); !strings.Contains(s, "capacity") || !strings.Contains(s, "3 times in a row") {
		t.Errorf("explanation %q does not say why", s)
	}
	rules := b.Rules(round(6), v)
	if len(rules) != 1 || rules[0].Kind != interfaces.ConstraintAllowed || len(rules[0].Shards) != 1 || rules[0].Shards[0] != "u" ||
		len(rules[0].Children) != 2 || rules[0].Children[0] != "h2" || rules[0].Children[1] != "h3" || !strings.Contains(rules[0].Reason, "backoff") {
		t.Fatalf("rules %+v: want u allowed on h2, h3 only", rules)
	}
	// The same observations give the same holds.
	b2 := Backoff{After: 3, Hold: time.Minute}
	for i, r := range []balancer.RejectCode{balancer.RejectCapacity, balancer.RejectConstraint, balancer.RejectCapacity, balancer.RejectCapacity, balancer.RejectCapacity} {
		b2.Observe(round(i+1), []balancer.Rejection{rej("u", "h1", r)}, nil)
	}
	if a, c := b.Held(round(6)), b2.Held(round(6)); len(a) != 1 || len(c) != 1 || a[0] != c[0] {
		t.Errorf("not deterministic: %+v vs %+v", a, c)
	}
	// The hold ends: planned again, counted from zero.
	end := round(5).Add(time.Minute)
	if h := b.Held(end); len(h) != 0 {
		t.Errorf("still held at its end: %v", h)
	}
	// An accepted move of the shard forgets its counts.
	b.Observe(end, []balancer.Rejection{rej("u", "h1", balancer.RejectCapacity), rej("u", "h1", balancer.RejectCapacity)}, nil)
	b.Observe(end.Add(time.Second), nil, []interfaces.Move{{Shard: "u", To: "h3"}})
	b.Observe(end.Add(2*time.Second), []balancer.Rejection{rej("u", "h1", balancer.RejectCapacity)}, nil)
	if h := b.Held(end.Add(2 * time.Second)); len(h) != 0 {
		t.Errorf("held although u moved in between: %v", h)
	}
	// Held off every child: allowed none.
	all := Backoff{After: 1}
	all.Observe(t0, []balancer.Rejection{rej("w", "h1", balancer.RejectCapacity), rej("w", "h2", balancer.RejectCapacity), rej("w", "h3", balancer.RejectCapacity)}, nil)
	if r := all.Rules(t0, v); len(r) != 1 || r[0].Children == nil || len(r[0].Children) != 0 {
		t.Errorf("rules %+v: want w allowed on no child", r)
	}
}

// Through the controller (what the daemons and the simulator run): the
// commit's rejections come back in RoundResult.Rejected; after HoldAfter
// rounds in a row the next decision carries the rule that keeps the policy
// off the move, Admit refuses it, the record counts it, and once HoldFor
// has passed the move may be planned again.
func TestControllerHoldsWhatTheCommitKeepsRejecting(t *testing.T) {
	cfg := DefaultConfig()
	cfg.HoldAfter, cfg.HoldFor = 3, time.Minute
	c := mustNew(t, cfg)
	v := tier(2, 8, []float64{9}, []int{-1}) // s000 unplaced, larger than any child
	move := interfaces.Move{Shard: "s000", To: "h00"}
	plan := interfaces.Plan{Moves: []interfaces.Move{move}}
	step := func(i int) Decision {
		d, err := c.Step(Input{Now: t0.Add(time.Duration(i) * time.Second), View: v})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	observe := func(d Decision, rejected bool) {
		r := RoundResult{Round: d.Round}
		if rejected {
			r.Rejected = []balancer.Rejection{{Move: move, Code: balancer.RejectCapacity, Reason: "target child \"h00\" would carry cpu=9, capacity 8"}}
		}
		if err := c.Observe(r); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 3; i++ {
		d := step(i)
		if d.Mode != ModeEmergency {
			t.Fatalf("round %d: mode %s, want emergency (an unplaced shard)", i, d.Mode)
		}
		if ok, _ := d.Admit(v, plan); len(ok) != 1 {
			t.Fatalf("round %d: the move is refused before it was rejected three times", i)
		}
		observe(d, true)
	}
	d := step(4)
	ok, refused := d.Admit(v, plan)
	if len(ok) != 0 || len(refused) != 1 || !strings.Contains(refused[0].Why, "backoff") {
		t.Errorf("round 4: admitted %v, refused %+v; want the held move refused", ok, refused)
	}
	found := false
	for _, k := range d.Constraints {
		found = found || (k.Kind == interfaces.ConstraintAllowed && len(k.Shards) == 1 && k.Shards[0] == "s000" && len(k.Children) == 1 && k.Children[0] == "h01")
	}
	if !found || d.Record.Held != 1 || len(c.Held(t0.Add(4*time.Second))) != 1 {
		t.Errorf("round 4: constraints %+v, record held %d: want s000 allowed on h01 only, one held", d.Constraints, d.Record.Held)
	}
	observe(d, false)
	// After HoldFor (from round 3): planned again.
	d = step(3 + 60)
	if ok, _ := d.Admit(v, plan); len(ok) != 1 {
		t.Errorf("after the hold: the move is still refused")
	}
	observe(d, false)
}
