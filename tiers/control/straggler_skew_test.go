package control

import (
	"testing"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// skewedRates builds rated(4, 12, slow) where host h00 holds the job's small
// shards: they declare (and, keeping up, process) 10 records/s against 100
// for the others. slowBy divides h01's processed rates.
func skewedRates(slowBy float64) *interfaces.View {
	v := rated(4, 12, nil)
	own := owners(v)
	for i := range v.Shards {
		s := &v.Shards[i]
		s.InputRate = 100
		if own[s.ID] == childID(0) {
			s.InputRate = 10
		}
	}
	for c, r := range v.Reports {
		for k := range r.Shards {
			sl := &r.Shards[k]
			switch c {
			case childID(0):
				sl.Rate, sl.InputRate = 10, 10
			case childID(1):
				sl.Rate = 100 / slowBy
			}
		}
		v.Reports[c] = r
	}
	return v
}

// A child holding a skewed job's small shards processes fewer records per
// shard than its peers while keeping up with its input: the size-adjusted rate
// does not take it for a straggler, and a child that really is slow is still
// found.
func TestStragglerSizeAdjusted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		slowBy float64
		want   []interfaces.ChildID
	}{
		{name: "small shards keeping up", slowBy: 1},
		{name: "small shards and a slow child", slowBy: 4, want: []interfaces.ChildID{childID(1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := mustPolicies(t, []string{"straggler"}, map[string]PolicySettings{"straggler": {"window": "10s"}})
			v := skewedRates(tc.slowBy)
			var o Outcome
			for r := 0; r < 3; r++ {
				o = run(t, ps, PolicyInput{Now: t0.Add(time.Duration(r) * 5 * time.Second), View: v})
			}
			var got []interfaces.ChildID
			for _, f := range o.Findings {
				if f.Confirmed {
					got = append(got, f.Child)
				}
			}
			if len(got) != len(tc.want) || (len(got) > 0 && got[0] != tc.want[0]) {
				t.Fatalf("confirmed stragglers %v, want %v (findings %+v)", got, tc.want, o.Findings)
			}
		})
	}
}
