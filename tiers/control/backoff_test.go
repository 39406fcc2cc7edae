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
// view (an allowed rule without the target) and dropped from plans — then
// planned again; another reason starts the count again, and an accepted move
// of the shard forgets it. Time comes in as now (deterministic).
func TestBackoffHoldsAMoveRejectedInARow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := Backoff{After: 3, Hold: time.Minute}
	v := &interfaces.View{Children: []interfaces.Child{{ID: "h1"}, {ID: "h2"}, {ID: "h3"}}}
	mv := []interfaces.Move{{Shard: "u", To: "h1"}, {Shard: "u", To: "h2"}, {Shard: "w", To: "h1"}}
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
	if kept, n := b.Drop(round(6), mv); n != 1 || len(kept) != 2 || kept[0].To != "h2" {
		t.Errorf("drop: kept %v (%d dropped), want u→h1 dropped only", kept, n)
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
	if kept, n := b.Drop(end, mv); n != 0 || len(kept) != 3 {
		t.Errorf("drop after the hold: %v, %d", kept, n)
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
