package wire_test

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

// The wire enums must mirror the Go constants exactly: the same numbers and, after
// the prefix, the same names, and no value on one side missing on the other.
func TestEnumMappingIsExact(t *testing.T) {
	cases := []struct {
		name   string
		wire   map[int32]string
		prefix string
		domain func(i int) string
	}{
		{"ChildState", wire.ChildState_name, "CHILD_STATE_", func(i int) string { return interfaces.ChildState(i).String() }},
		{"HintKind", wire.HintKind_name, "HINT_KIND_", func(i int) string { return interfaces.HintKind(i).String() }},
		{"ConstraintKind", wire.ConstraintKind_name, "CONSTRAINT_KIND_", func(i int) string { return interfaces.ConstraintKind(i).String() }},
		{"PlanStatus", wire.PlanStatus_name, "PLAN_STATUS_", func(i int) string { return interfaces.Status(i).String() }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i := 0; i < len(c.wire); i++ {
				w, ok := c.wire[int32(i)]
				if !ok {
					t.Fatalf("wire enum has no value %d (values must be 0..%d with no gaps)", i, len(c.wire)-1)
				}
				if got, want := c.domain(i), strings.ToLower(strings.TrimPrefix(w, c.prefix)); got != want {
					t.Errorf("value %d: Go says %q, wire says %q", i, got, want)
				}
			}
			if got := c.domain(len(c.wire)); got != "unknown" {
				t.Errorf("Go has value %d (%q) that the wire enum lacks", len(c.wire), got)
			}
		})
	}
}

// Every enum conversion accepts exactly the declared values: it must also refuse
// numbers that would wrap around into a valid uint8 (256 → 0).
func TestEnumFromWireRejectsUndeclared(t *testing.T) {
	for _, n := range []int32{-1, 3, 4, 6, 255, 256, 258, math.MaxInt32} {
		_, errChild := wire.ChildStateFromWire("s", wire.ChildState(n))
		_, errHint := wire.HintKindFromWire("k", wire.HintKind(n))
		_, errCons := wire.ConstraintKindFromWire("k", wire.ConstraintKind(n))
		_, errStatus := wire.StatusFromWire("s", wire.PlanStatus(n))
		declared := map[string]bool{
			"child":      n >= 0 && n <= 2,
			"hint":       n >= 0 && n <= 3,
			"constraint": n >= 0 && n <= 5,
			"status":     n >= 0 && n <= 2,
		}
		for what, err := range map[string]error{"child": errChild, "hint": errHint, "constraint": errCons, "status": errStatus} {
			if declared[what] && err != nil {
				t.Errorf("%s %d: declared value refused: %v", what, n, err)
			}
			if !declared[what] && !errors.Is(err, interfaces.ErrInvalid) {
				t.Errorf("%s %d: undeclared value accepted (err %v)", what, n, err)
			}
		}
	}
	_, err := wire.ChildStateFromWire("child.state", 7)
	if want := "child.state: must be one of active, draining, failed (got 7)"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
}

func TestLoadConversion(t *testing.T) {
	l := interfaces.Load{CPU: 2, Mem: 4e9, Net: 1e6, Tasks: 3, Extra: map[string]float64{"gpu": 1, "disk_iops": 500}}
	m := wire.LoadToWire(l)
	if m.Cpu != 2 || m.Mem != 4e9 || m.Net != 1e6 || m.Tasks != 3 || len(m.Extra) != 2 || m.Extra["gpu"] != 1 || m.Extra["disk_iops"] != 500 {
		t.Fatalf("LoadToWire = %v", m)
	}
	m.Extra["gpu"] = 9 // the wire map must not alias the domain one
	if l.Extra["gpu"] != 1 {
		t.Fatal("LoadToWire aliases Extra")
	}
	back, err := wire.LoadFromWire(&wire.Load{Cpu: 1, Extra: map[string]float64{}})
	if err != nil || back.Extra != nil || back.CPU != 1 {
		t.Fatalf("empty extra must come back nil: %#v, %v", back, err)
	}
	if z, err := wire.LoadFromWire(nil); err != nil || !reflect.DeepEqual(z, interfaces.Load{}) {
		t.Fatalf("nil load = %#v, %v; want the zero load", z, err)
	}
}

func TestTimeConversion(t *testing.T) {
	if n, err := wire.TimeToWire("now", time.Time{}); n != nil || err != nil {
		t.Fatalf("zero time: %v, %v; want absent", n, err)
	}
	epoch, err := wire.TimeToWire("now", time.Unix(0, 0))
	if err != nil || epoch == nil || *epoch != 0 {
		t.Fatalf("Unix epoch: %v, %v; want present 0", epoch, err)
	}
	if got := wire.TimeFromWire(epoch); !got.Equal(time.Unix(0, 0)) || got.IsZero() {
		t.Fatalf("Unix epoch came back as %v", got)
	}
	if got := wire.TimeFromWire(nil); !got.IsZero() {
		t.Fatalf("absent came back as %v", got)
	}
	zoned := time.Date(2026, 11, 29, 20, 0, 0, 123, time.FixedZone("x", 5*3600))
	n, _ := wire.TimeToWire("now", zoned)
	back := wire.TimeFromWire(n)
	if !back.Equal(zoned) || back.Location() != time.UTC {
		t.Fatalf("zoned instant came back as %v", back)
	}
	_, err = wire.TimeToWire("view.now", time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC))
	if err == nil || !strings.HasPrefix(err.Error(), "view.now: must be between 1677-09-21") || !errors.Is(err, interfaces.ErrInvalid) {
		t.Fatalf("year 3000: %v", err)
	}
}

// A worked example through every field of a view, checked field by field against
// the wire message.
func TestViewToWireFields(t *testing.T) {
	now := time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	con := interfaces.Constraint{Kind: interfaces.ConstraintAvoid, Shards: []interfaces.ShardID{"s1"}, Children: []interfaces.ChildID{"h2"}, Reason: "slo"}
	v := &interfaces.View{
		Tier: "region", Instance: "eu-1", Now: now, Seed: -7,
		Children: []interfaces.Child{{ID: "h1", Tier: "host", Capacity: interfaces.Load{CPU: 8}, Labels: map[string]string{"zone": "a"}, State: interfaces.ChildDraining}},
		Shards: []interfaces.Shard{{ID: "s1", Job: "j", Load: interfaces.Load{CPU: 1}, InputRate: 10, StateBytes: 1 << 20, LatencySLO: 50 * time.Millisecond,
			Constraints: interfaces.ShardConstraints{Pinned: "h1", Allowed: []interfaces.ChildID{"h1", "h2"}, AntiAffinity: "g", MaxPerChild: 2}}},
		Assignments: []interfaces.Assignment{{Shard: "s1", Child: "h1", Epoch: 4}},
		InFlight:    []interfaces.Move{{Shard: "s1", From: "h1", To: "h2", Epoch: 4, Reason: "drain", Goal: "drain", Delta: -1.5}},
		Constraints: []interfaces.Constraint{con},
		Reports: map[interfaces.ChildID]interfaces.Report{"h1": {Child: "h1", Epoch: 9, Headroom: interfaces.Load{CPU: -0.5}, LatencyP99: time.Second,
			Shards: []interfaces.ShardLoad{{Shard: "s1", Rate: 5, LatencyP99: time.Millisecond}},
			Hints:  []interfaces.Hint{{Kind: interfaces.HintConstraint, Constraint: &con}}}},
	}
	m, err := wire.ViewToWire(v)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		what string
		ok   bool
	}{
		{"tier", m.Tier == "region" && m.Instance == "eu-1"},
		{"now", m.NowUnixNanos != nil && *m.NowUnixNanos == now.UnixNano()},
		{"seed", m.Seed == -7},
		{"child", len(m.Children) == 1 && m.Children[0].State == wire.ChildState_CHILD_STATE_DRAINING && m.Children[0].Capacity.Cpu == 8 && m.Children[0].Labels["zone"] == "a"},
		{"shard", len(m.Shards) == 1 && m.Shards[0].LatencySloNanos == int64(50*time.Millisecond) && m.Shards[0].StateBytes == 1<<20 && m.Shards[0].InputRate == 10},
		{"shard constraints", m.Shards[0].Constraints.Pinned == "h1" && len(m.Shards[0].Constraints.Allowed) == 2 && m.Shards[0].Constraints.MaxPerChild == 2 && m.Shards[0].Constraints.AntiAffinity == "g"},
		{"assignment", len(m.Assignments) == 1 && m.Assignments[0].Epoch == 4 && m.Assignments[0].Child == "h1"},
		{"in flight", len(m.InFlight) == 1 && m.InFlight[0].From == "h1" && m.InFlight[0].To == "h2" && m.InFlight[0].Delta == -1.5 && m.InFlight[0].Goal == "drain"},
		{"constraint", len(m.Constraints) == 1 && m.Constraints[0].Kind == wire.ConstraintKind_CONSTRAINT_KIND_AVOID && m.Constraints[0].Children[0] == "h2"},
		{"report", m.Reports["h1"].GetEpoch() == 9 && m.Reports["h1"].GetHeadroom().GetCpu() == -0.5 && m.Reports["h1"].GetLatencyP99Nanos() == int64(time.Second)},
		{"report shards", len(m.Reports["h1"].GetShards()) == 1 && m.Reports["h1"].Shards[0].LatencyP99Nanos == int64(time.Millisecond)},
		{"report hint", len(m.Reports["h1"].GetHints()) == 1 && m.Reports["h1"].Hints[0].Kind == wire.HintKind_HINT_KIND_CONSTRAINT && m.Reports["h1"].Hints[0].Constraint.GetReason() == "slo"},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: wrong on the wire: %v", c.what, m)
		}
	}
	back, err := wire.ViewFromWire(m)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, v) {
		t.Fatalf("round trip:\nwant %#v\ngot  %#v", v, back)
	}
	if back.Reports["h1"].Hints[0].Constraint == v.Reports["h1"].Hints[0].Constraint {
		t.Fatal("the hint's constraint pointer is shared between the input and the result")
	}
}

// FromWire error cases: each names the field by its path and the rule.
func TestFromWireErrors(t *testing.T) {
	okShard := func() *wire.Shard { return &wire.Shard{Id: "s1", Job: "j", Load: &wire.Load{Cpu: 1}} }
	okChild := func() *wire.Child { return &wire.Child{Id: "h1", Tier: "host", Capacity: &wire.Load{Cpu: 1}} }
	view := func(f func(v *wire.View)) func() error {
		return func() error {
			v := &wire.View{Tier: "region", Shards: []*wire.Shard{okShard()}, Children: []*wire.Child{okChild()}}
			f(v)
			_, err := wire.ViewFromWire(v)
			return err
		}
	}
	cases := []struct {
		name      string
		run       func() error
		wantField string
		wantRule  string
	}{
		{"load negative", func() error { _, err := wire.LoadFromWire(&wire.Load{Mem: -1}); return err }, "load.mem", "must be ≥ 0"},
		{"load NaN", func() error { _, err := wire.LoadFromWire(&wire.Load{Net: math.NaN()}); return err }, "load.net", "must be a finite number"},
		{"load Inf extra", func() error {
			_, err := wire.LoadFromWire(&wire.Load{Extra: map[string]float64{"gpu": math.Inf(1)}})
			return err
		}, "load.gpu", "must be a finite number"},
		{"load built-in as extra", func() error {
			_, err := wire.LoadFromWire(&wire.Load{Extra: map[string]float64{"cpu": 1}})
			return err
		}, "load.cpu", "is a built-in dimension"},
		{"load empty extra name", func() error { _, err := wire.LoadFromWire(&wire.Load{Extra: map[string]float64{"": 1}}); return err }, "load", "must not be empty"},

		{"shard nil", func() error { _, err := wire.ShardFromWire(nil); return err }, "shard.id", "is required"},
		{"shard bad id", func() error { s := okShard(); s.Id = "bad id"; _, err := wire.ShardFromWire(s); return err }, "shard.id", interfaces.IDRule},
		{"shard negative state", func() error { s := okShard(); s.StateBytes = -1; _, err := wire.ShardFromWire(s); return err }, "shard.state_bytes", "must be ≥ 0"},
		{"shard negative slo", func() error { s := okShard(); s.LatencySloNanos = -5; _, err := wire.ShardFromWire(s); return err }, "shard.latency_slo", "must be ≥ 0"},
		{"shard negative max per child", func() error {
			s := okShard()
			s.Constraints = &wire.ShardConstraints{AntiAffinity: "g", MaxPerChild: -1}
			_, err := wire.ShardFromWire(s)
			return err
		}, "shard.constraints.max_per_child", "must be ≥ 0"},
		{"shard pin not allowed", func() error {
			s := okShard()
			s.Constraints = &wire.ShardConstraints{Pinned: "h9", Allowed: []string{"h1"}}
			_, err := wire.ShardFromWire(s)
			return err
		}, "shard.constraints.pinned", "must be one of shard.constraints.allowed"},

		{"child state", func() error { c := okChild(); c.State = 3; _, err := wire.ChildFromWire(c); return err }, "child.state", "must be one of active, draining, failed"},
		{"child state wraps", func() error { c := okChild(); c.State = 256; _, err := wire.ChildFromWire(c); return err }, "child.state", "must be one of"},
		{"child zero capacity", func() error { c := okChild(); c.Capacity = nil; _, err := wire.ChildFromWire(c); return err }, "child.capacity", "must be > 0 in at least one dimension"},
		{"child no tier", func() error { c := okChild(); c.Tier = ""; _, err := wire.ChildFromWire(c); return err }, "child.tier", "is required"},

		{"assignment no child", func() error { _, err := wire.AssignmentFromWire(&wire.Assignment{Shard: "s1"}); return err }, "assignment.child", "is required"},
		{"move no to", func() error { _, err := wire.MoveFromWire(&wire.Move{Shard: "s1"}); return err }, "move.to", "is required"},
		{"move bad from", func() error { _, err := wire.MoveFromWire(&wire.Move{Shard: "s1", From: "-x", To: "h1"}); return err }, "move.from", interfaces.IDRule},
		{"move to itself", func() error { _, err := wire.MoveFromWire(&wire.Move{Shard: "s1", From: "h1", To: "h1"}); return err }, "move.to", "must differ from move.from"},
		{"move NaN delta", func() error {
			_, err := wire.MoveFromWire(&wire.Move{Shard: "s1", To: "h1", Delta: math.NaN()})
			return err
		}, "move.delta", "must be a finite number"},
		// What a tier could not commit is refused here (docs/writing-a-tier.md: a
		// plan with a non-finite number is malformed), not left to sink a batch.
		{"move infinite delta", func() error {
			_, err := wire.MoveFromWire(&wire.Move{Shard: "s1", To: "h1", Delta: math.Inf(-1)})
			return err
		}, "move.delta", "must be a finite number"},
		{"move long reason", func() error {
			_, err := wire.MoveFromWire(&wire.Move{Shard: "s1", To: "h1", Reason: strings.Repeat("r", interfaces.MaxTextLen+1)})
			return err
		}, "move.reason", "must be at most 4096 bytes"},
		{"move long goal", func() error {
			_, err := wire.MoveFromWire(&wire.Move{Shard: "s1", To: "h1", Goal: strings.Repeat("g", interfaces.MaxTextLen+1)})
			return err
		}, "move.goal", "must be at most 4096 bytes"},
		{"plan move infinite delta", func() error {
			_, err := wire.PlanFromWire(&wire.Plan{Moves: []*wire.Move{{Shard: "s1", To: "h1"}, {Shard: "s2", To: "h1", Delta: math.Inf(1)}}})
			return err
		}, "plan.moves[1].delta", "must be a finite number"},

		{"constraint kind", func() error { _, err := wire.ConstraintFromWire(&wire.Constraint{Kind: 6}); return err }, "constraint.kind", "must be one of capacity, pin, allowed, anti_affinity, max_moves, avoid"},
		{"constraint pin without child", func() error {
			_, err := wire.ConstraintFromWire(&wire.Constraint{Kind: wire.ConstraintKind_CONSTRAINT_KIND_PIN, Shards: []string{"s1"}})
			return err
		}, "constraint.children", "must name the child to pin to"},
		{"constraint negative max", func() error { _, err := wire.ConstraintFromWire(&wire.Constraint{Max: -1}); return err }, "constraint.max", "must be ≥ 0"},
		{"constraint negative max bytes", func() error { _, err := wire.ConstraintFromWire(&wire.Constraint{MaxBytes: -1}); return err }, "constraint.max_bytes", "must be ≥ 0"},
		{"constraint bad shard", func() error {
			_, err := wire.ConstraintFromWire(&wire.Constraint{Shards: []string{"s1", ""}})
			return err
		}, "constraint.shards[1]", "is required"},
		{"constraint negative limit", func() error {
			_, err := wire.ConstraintFromWire(&wire.Constraint{Limit: &wire.Load{Tasks: -2}})
			return err
		}, "constraint.limit.tasks", "must be ≥ 0"},

		{"hint kind", func() error { _, err := wire.HintFromWire(&wire.Hint{Kind: 4}); return err }, "hint.kind", "must be one of headroom, shed, constraint, slo_at_risk"},
		{"hint constraint missing", func() error {
			_, err := wire.HintFromWire(&wire.Hint{Kind: wire.HintKind_HINT_KIND_CONSTRAINT})
			return err
		}, "hint.constraint", "is required for a hint of kind constraint"},
		{"hint nested constraint", func() error {
			_, err := wire.HintFromWire(&wire.Hint{Kind: wire.HintKind_HINT_KIND_CONSTRAINT, Constraint: &wire.Constraint{Kind: 99}})
			return err
		}, "hint.constraint.kind", "must be one of"},
		{"hint negative amount", func() error { _, err := wire.HintFromWire(&wire.Hint{Amount: &wire.Load{Cpu: -1}}); return err }, "hint.amount.cpu", "must be ≥ 0"},

		{"report no child", func() error { _, err := wire.ReportFromWire(&wire.Report{}); return err }, "report.child", "is required"},
		{"report headroom NaN", func() error {
			_, err := wire.ReportFromWire(&wire.Report{Child: "h1", Headroom: &wire.Load{Mem: math.NaN()}})
			return err
		}, "report.headroom.mem", "must be a finite number"},
		{"report headroom built-in extra", func() error {
			_, err := wire.ReportFromWire(&wire.Report{Child: "h1", Headroom: &wire.Load{Extra: map[string]float64{"net": -1}}})
			return err
		}, "report.headroom.net", "is a built-in dimension"},
		{"report negative used", func() error {
			_, err := wire.ReportFromWire(&wire.Report{Child: "h1", Used: &wire.Load{Cpu: -1}})
			return err
		}, "report.used.cpu", "must be ≥ 0"},
		{"report negative p50", func() error {
			_, err := wire.ReportFromWire(&wire.Report{Child: "h1", LatencyP50Nanos: -1})
			return err
		}, "report.latency_p50", "must be ≥ 0"},
		{"report negative throughput", func() error { _, err := wire.ReportFromWire(&wire.Report{Child: "h1", Throughput: -3}); return err }, "report.throughput", "must be ≥ 0"},
		{"report shard rate", func() error {
			_, err := wire.ReportFromWire(&wire.Report{Child: "h1", Shards: []*wire.ShardLoad{{Shard: "s1"}, {Shard: "s2", Rate: -1}}})
			return err
		}, "report.shards[1].rate", "must be ≥ 0"},
		// A repeated shard counted as many shards: one child got its honest
		// peers evicted as stragglers (a review's probe).
		{"report shard twice", func() error {
			_, err := wire.ReportFromWire(&wire.Report{Child: "h1", Shards: []*wire.ShardLoad{{Shard: "s1"}, {Shard: "s2"}, {Shard: "s1"}}})
			return err
		}, "report.shards[2].shard", "must appear once in a report"},
		// MaxInt64 ns wrapped negative once smoothed and read as no latency.
		{"report huge p99", func() error {
			_, err := wire.ReportFromWire(&wire.Report{Child: "h1", LatencyP99Nanos: math.MaxInt64})
			return err
		}, "report.latency_p99", "must be at most 24h"},
		{"report shard huge p99", func() error {
			_, err := wire.ReportFromWire(&wire.Report{Child: "h1", Shards: []*wire.ShardLoad{{Shard: "s1", LatencyP99Nanos: int64(25 * time.Hour)}}})
			return err
		}, "report.shards[0].latency_p99", "must be at most 24h"},
		{"report hint", func() error {
			_, err := wire.ReportFromWire(&wire.Report{Child: "h1", Hints: []*wire.Hint{{Kind: 9}}})
			return err
		}, "report.hints[0].kind", "must be one of"},

		{"plan status", func() error { _, err := wire.PlanFromWire(&wire.Plan{Status: 3}); return err }, "plan.status", "must be one of ok, infeasible, partial"},
		{"plan move", func() error {
			_, err := wire.PlanFromWire(&wire.Plan{Moves: []*wire.Move{{Shard: "s1", To: "h1"}, {Shard: "s2"}}})
			return err
		}, "plan.moves[1].to", "is required"},
		{"plan infeasible child", func() error {
			_, err := wire.PlanFromWire(&wire.Plan{Infeasible: []*wire.Infeasible{{Shard: "s1", Excluded: map[string]string{"bad child": "x"}}}})
			return err
		}, "plan.infeasible[0].excluded", interfaces.IDRule},
		{"plan summary moves", func() error { _, err := wire.PlanFromWire(&wire.Plan{Summary: &wire.Summary{Moves: -1}}); return err }, "plan.summary.moves", "must be ≥ 0"},
		{"plan summary bytes", func() error {
			_, err := wire.PlanFromWire(&wire.Plan{Summary: &wire.Summary{BytesMoved: -1}})
			return err
		}, "plan.summary.bytes_moved", "must be ≥ 0"},
		{"plan summary solve time", func() error {
			_, err := wire.PlanFromWire(&wire.Plan{Summary: &wire.Summary{SolveSeconds: math.Inf(1)}})
			return err
		}, "plan.summary.solve_seconds", "must be a finite number"},
		{"plan summary NaN ratio", func() error {
			_, err := wire.PlanFromWire(&wire.Plan{Summary: &wire.Summary{MaxOverLb: map[string]float64{"cpu": math.NaN()}}})
			return err
		}, "plan.summary.max_over_lb.cpu", "not NaN"},
		{"plan summary empty resource", func() error {
			_, err := wire.PlanFromWire(&wire.Plan{Summary: &wire.Summary{Lb: map[string]float64{"": 1}}})
			return err
		}, "plan.summary.lb", "resource names must not be empty"},

		{"view nil", func() error { _, err := wire.ViewFromWire(nil); return err }, "view.tier", "is required"},
		{"view shard load", view(func(v *wire.View) {
			v.Shards = append(v.Shards, &wire.Shard{Id: "s2", Job: "j", Load: &wire.Load{Cpu: -1}})
		}), "view.shards[1].load.cpu", "must be ≥ 0"},
		{"view shard constraint", view(func(v *wire.View) {
			v.Shards[0].Constraints = &wire.ShardConstraints{MaxPerChild: 2}
		}), "view.shards[0].constraints.max_per_child", "needs shard.constraints.anti_affinity"},
		{"view child state", view(func(v *wire.View) { v.Children[0].State = 5 }), "view.children[0].state", "must be one of"},
		{"view child capacity", view(func(v *wire.View) { v.Children[0].Capacity = &wire.Load{} }), "view.children[0].capacity", "must be > 0"},
		{"view assignment", view(func(v *wire.View) { v.Assignments = []*wire.Assignment{{Shard: "s1", Child: "h 1"}} }), "view.assignments[0].child", interfaces.IDRule},
		{"view in flight", view(func(v *wire.View) { v.InFlight = []*wire.Move{{Shard: "s1", From: "h1"}} }), "view.in_flight[0].to", "is required"},
		{"view constraint", view(func(v *wire.View) { v.Constraints = []*wire.Constraint{{}, {Max: -4}} }), "view.constraints[1].max", "must be ≥ 0"},
		{"view report key", view(func(v *wire.View) { v.Reports = map[string]*wire.Report{"h1": {Child: "h2"}} }), `view.reports["h1"].child`, "must equal its key in view.reports"},
		{"view report bad key", view(func(v *wire.View) { v.Reports = map[string]*wire.Report{"h 1": {Child: "h 1"}} }), `view.reports["h 1"]`, interfaces.IDRule},
		{"view nil shard", view(func(v *wire.View) { v.Shards = append(v.Shards, nil) }), "view.shards[1].id", "is required"},
		{"view nil move", view(func(v *wire.View) { v.InFlight = []*wire.Move{nil} }), "view.in_flight[0].shard", "is required"},
		{"view report nil", view(func(v *wire.View) { v.Reports = map[string]*wire.Report{"h1": nil} }), `view.reports["h1"].child`, "is required"},
		{"view report field", view(func(v *wire.View) { v.Reports = map[string]*wire.Report{"h1": {Child: "h1", LatencyP99Nanos: -1}} }), `view.reports["h1"].latency_p99`, "must be ≥ 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.run()
			if err == nil {
				t.Fatalf("no error; want %s: %s", c.wantField, c.wantRule)
			}
			var fe *interfaces.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is a %T, not a *interfaces.FieldError", err, err)
			}
			if !errors.Is(err, interfaces.ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			if fe.Field != c.wantField || !strings.Contains(fe.Rule, c.wantRule) {
				t.Errorf("got field %q rule %q; want field %q rule containing %q", fe.Field, fe.Rule, c.wantField, c.wantRule)
			}
		})
	}
}

// Values FromWire accepts although they look odd: a negative headroom, infinite
// ratios, a move without a from, a reason of exactly the length limit, a hint of another kind carrying a
// constraint, a nil plan.
func TestFromWireAccepts(t *testing.T) {
	r, err := wire.ReportFromWire(&wire.Report{Child: "h1", Headroom: &wire.Load{Cpu: -2, Extra: map[string]float64{"gpu": -1}}})
	if err != nil || r.Headroom.CPU != -2 || r.Headroom.Extra["gpu"] != -1 {
		t.Errorf("negative headroom: %#v, %v", r.Headroom, err)
	}
	p, err := wire.PlanFromWire(&wire.Plan{
		Status:  wire.PlanStatus_PLAN_STATUS_INFEASIBLE,
		Moves:   []*wire.Move{{Shard: "s1", To: "h1", Delta: -1e300, Reason: strings.Repeat("r", interfaces.MaxTextLen)}},
		Summary: &wire.Summary{MaxOverLb: map[string]float64{"cpu": math.Inf(1)}, Objective: -3},
	})
	if err != nil || p.Status != interfaces.StatusInfeasible || p.Moves[0].From != "" || p.Moves[0].Delta != -1e300 || len(p.Moves[0].Reason) != interfaces.MaxTextLen ||
		!math.IsInf(p.Summary.MaxOverLB["cpu"], 1) || p.Summary.Objective != -3 {
		t.Errorf("plan: %#v, %v", p, err)
	}
	h, err := wire.HintFromWire(&wire.Hint{Kind: wire.HintKind_HINT_KIND_SHED, Constraint: &wire.Constraint{Reason: "x"}})
	if err != nil || h.Constraint == nil || h.Constraint.Reason != "x" || h.Kind != interfaces.HintShed {
		t.Errorf("shed hint with constraint: %#v, %v", h, err)
	}
	h, err = wire.HintFromWire(&wire.Hint{Kind: wire.HintKind_HINT_KIND_SLO_AT_RISK, Shards: []string{"s1"}})
	if err != nil || h.Constraint != nil || h.Kind != interfaces.HintSLOAtRisk || len(h.Shards) != 1 {
		t.Errorf("slo hint: %#v, %v", h, err)
	}
	zero, err := wire.PlanFromWire(nil)
	if err != nil || !reflect.DeepEqual(zero, interfaces.Plan{}) {
		t.Errorf("nil plan: %#v, %v; want the zero plan", zero, err)
	}
}

// ToWire sets every message-typed field, so that readers of the wire never meet a
// nil load; only a hint's constraint is absent, exactly when the pointer is nil.
func TestToWireCanonicalForm(t *testing.T) {
	if m := wire.ShardToWire(interfaces.Shard{}); m.Load == nil || m.Constraints == nil {
		t.Errorf("shard: %v", m)
	}
	if m := wire.ReportToWire(interfaces.Report{}); m.Capacity == nil || m.Used == nil || m.Headroom == nil || m.Shards != nil || m.Hints != nil {
		t.Errorf("report: %v", m)
	}
	if m := wire.PlanToWire(interfaces.Plan{Moves: []interfaces.Move{}}); m.Summary == nil || m.Moves != nil {
		t.Errorf("plan: %v", m)
	}
	if m := wire.HintToWire(interfaces.Hint{}); m.Constraint != nil || m.Amount == nil {
		t.Errorf("hint without constraint: %v", m)
	}
	if m := wire.HintToWire(interfaces.Hint{Constraint: &interfaces.Constraint{}}); m.Constraint == nil || m.Constraint.Limit == nil {
		t.Errorf("hint with empty constraint: %v", m)
	}
	v, err := wire.ViewToWire(&interfaces.View{Tier: "t", Reports: map[interfaces.ChildID]interfaces.Report{}})
	if err != nil || v.NowUnixNanos != nil || v.Reports != nil {
		t.Errorf("view: %v, %v", v, err)
	}
	if _, err := wire.ViewToWire(nil); !errors.Is(err, interfaces.ErrInvalid) {
		t.Errorf("nil view: %v", err)
	}
	// An empty wire message and a nil one read the same.
	a, errA := wire.ChildFromWire(&wire.Child{Id: "h", Tier: "t", Capacity: &wire.Load{Cpu: 1}, Labels: map[string]string{}})
	b, errB := wire.ChildFromWire(&wire.Child{Id: "h", Tier: "t", Capacity: &wire.Load{Cpu: 1}})
	if errA != nil || errB != nil || !reflect.DeepEqual(a, b) || a.Labels != nil {
		t.Errorf("empty vs nil labels: %#v %#v %v %v", a, b, errA, errB)
	}
	if !proto.Equal(wire.ChildToWire(a), wire.ChildToWire(b)) {
		t.Error("equal children encode differently")
	}
}
