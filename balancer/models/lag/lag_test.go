package lag

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/strata-sched/strata/interfaces"
)

func TestStep(t *testing.T) {
	inf := math.Inf(1)
	cases := []struct {
		name                         string
		backlog, input, capacity, dt float64
		next, processed              float64
	}{
		{"keeps up, no backlog", 0, 100, 150, 1, 0, 100},
		{"exactly at capacity", 0, 100, 100, 5, 0, 100},
		{"overloaded grows", 0, 150, 100, 2, 100, 100},
		{"backlog grows further", 40, 150, 100, 1, 90, 100},
		{"backlog drains partly", 100, 50, 100, 1, 50, 100},
		{"backlog drains fully", 30, 50, 100, 1, 0, 80},
		{"drains within a long step", 30, 50, 100, 10, 0, 53},
		{"no capacity", 10, 5, 0, 2, 20, 0},
		{"idle drain", 10, 0, 4, 2, 2, 4},
		{"infinite capacity", 1e6, 10, inf, 0.5, 0, 10 + 2e6},
		{"negative values count as 0", -5, -1, 3, 1, 0, 0},
		{"NaN input counts as 0", 6, math.NaN(), 2, 1, 4, 2},
		{"no time", 7, 100, 1, 0, 7, 0},
		{"negative time", 7, 100, 1, -1, 7, 0},
	}
	for _, tc := range cases {
		next, proc := Step(tc.backlog, tc.input, tc.capacity, tc.dt)
		if math.Abs(next-tc.next) > 1e-9 || math.Abs(proc-tc.processed) > 1e-9 {
			t.Errorf("%s: Step(%v, %v, %v, %v) = (%v, %v), want (%v, %v)",
				tc.name, tc.backlog, tc.input, tc.capacity, tc.dt, next, proc, tc.next, tc.processed)
		}
	}
}

// simStep is the simulator's per-shard step as sim/engine.go writes it
// (process: in = rate·dt + b; proc = min(in, capRate·dt); b = in − proc, and a
// left-over ≤ 1e-9 is 0). Step must give the same backlog.
func simStep(b, rate, capRate, dt float64) float64 {
	in := rate*dt + b
	proc := math.Min(in, capRate*dt)
	b = in - proc
	if b <= 1e-9 {
		b = 0
	}
	return b
}

func TestStepMatchesSimulator(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 2000; i++ {
		b := 0.0
		if rng.IntN(3) > 0 {
			b = 1000 * rng.Float64()
		}
		rate, capRate, dt := 500*rng.Float64(), 500*rng.Float64(), 0.1+5*rng.Float64()
		next, proc := Step(b, rate, capRate, dt)
		want := simStep(b, rate, capRate, dt)
		if math.Abs(next-want) > 1e-9*math.Max(1, want) {
			t.Fatalf("b=%v rate=%v cap=%v dt=%v: Step %v, simulator %v", b, rate, capRate, dt, next, want)
		}
		// Conservation: what was there plus what arrived = processed + left.
		if got := proc*dt + next; math.Abs(got-(b+rate*dt)) > 1e-6*math.Max(1, b+rate*dt) {
			t.Fatalf("records not conserved: %v in, %v out+left", b+rate*dt, got)
		}
	}
}

func TestDrainTime(t *testing.T) {
	cases := []struct {
		backlog, input, capacity, want float64
	}{
		{0, 100, 50, 0},
		{100, 50, 150, 1},
		{600, 0, 200, 3},
		{100, 150, 150, math.Inf(1)},
		{100, 200, 150, math.Inf(1)},
		{-3, 0, 1, 0},
	}
	for _, tc := range cases {
		if got := DrainTime(tc.backlog, tc.input, tc.capacity); got != tc.want {
			t.Errorf("DrainTime(%v, %v, %v) = %v, want %v", tc.backlog, tc.input, tc.capacity, got, tc.want)
		}
	}
	// Consistent with stepping: after DrainTime seconds in one step the
	// backlog is gone, and a step a little shorter leaves some.
	b, in, c := 750.0, 120.0, 370.0
	d := DrainTime(b, in, c)
	if next, _ := Step(b, in, c, d); next != 0 {
		t.Errorf("after DrainTime %v s the backlog is %v", d, next)
	}
	if next, _ := Step(b, in, c, 0.9*d); !(next > 0) {
		t.Errorf("after 0.9×DrainTime the backlog is %v, want > 0", next)
	}
	if got := Growth(150, 100); got != 50 {
		t.Errorf("Growth(150, 100) = %v", got)
	}
	if got := Growth(50, 100); got != 0 {
		t.Errorf("Growth(50, 100) = %v", got)
	}
}

func TestCheck(t *testing.T) {
	if err := Check(0, 10, math.Inf(1), 1); err != nil {
		t.Errorf("valid: %v", err)
	}
	cases := []struct {
		b, in, c, dt float64
		field        string
	}{
		{-1, 0, 1, 1, "backlog"},
		{math.Inf(1), 0, 1, 1, "backlog"},
		{0, math.NaN(), 1, 1, "input"},
		{0, 1, -2, 1, "capacity"},
		{0, 1, 1, 0, "dt"},
		{0, 1, 1, math.Inf(1), "dt"},
	}
	for _, tc := range cases {
		err := Check(tc.b, tc.in, tc.c, tc.dt)
		if !errors.Is(err, interfaces.ErrInvalid) || !strings.HasPrefix(err.Error(), tc.field+":") {
			t.Errorf("Check(%v, %v, %v, %v) = %v, want ErrInvalid naming %s", tc.b, tc.in, tc.c, tc.dt, err, tc.field)
		}
	}
}
