package tiercore

import (
	"testing"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

func TestCutOffLost(t *testing.T) {
	t0 := time.Unix(1000, 0)
	c := CutOff{Silence: 1500 * time.Millisecond, Window: 6 * time.Second}
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	type heard = map[interfaces.ChildID]time.Time
	cases := []struct {
		name        string
		now, since  time.Time
		heard       heard
		lost        bool
		silent, cnt int
	}{
		{"nobody heard (a new leader, or every child down)", at(10 * time.Second), t0, nil, false, 0, 0},
		{"just elected", at(time.Second), t0, heard{"h1": t0.Add(-time.Minute)}, false, 0, 0},
		{"all heard recently", at(10 * time.Second), t0, heard{"h1": at(9 * time.Second), "h2": at(9500 * time.Millisecond)}, false, 0, 2},
		{"one of three quiet: its own fault", at(10 * time.Second), t0, heard{"h1": at(9 * time.Second), "h2": at(9 * time.Second), "h3": at(8 * time.Second)}, false, 1, 3},
		{"one of two quiet: not a majority", at(10 * time.Second), t0, heard{"r1": at(9 * time.Second), "r2": at(8 * time.Second)}, false, 1, 2},
		{"two of three quiet", at(10 * time.Second), t0, heard{"h1": at(9 * time.Second), "h2": at(8 * time.Second), "h3": at(8 * time.Second)}, true, 2, 3},
		{"the only child quiet", at(10 * time.Second), t0, heard{"h1": at(8 * time.Second)}, true, 1, 1},
		{"long-dead children do not count", at(20 * time.Second), t0, heard{"h1": at(19 * time.Second), "h2": at(5 * time.Second), "h3": at(5 * time.Second)}, false, 0, 1},
		{"exactly Silence is not yet lost", at(10 * time.Second), t0, heard{"h1": at(8500 * time.Millisecond)}, false, 0, 1},
	}
	for _, tc := range cases {
		lost, silent, cnt := c.Lost(tc.now, tc.since, tc.heard)
		if lost != tc.lost || silent != tc.silent || cnt != tc.cnt {
			t.Errorf("%s: Lost = %v, %d silent of %d; want %v, %d of %d", tc.name, lost, silent, cnt, tc.lost, tc.silent, tc.cnt)
		}
	}
	if lost, _, _ := (CutOff{}).Lost(at(time.Hour), t0, heard{"h1": t0}); lost {
		t.Error("a zero CutOff (disabled) stepped down")
	}
}
