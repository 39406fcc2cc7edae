package control

import (
	"fmt"
	"testing"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// BenchmarkPolicies measures one round of the default policies (straggler,
// doctor, autoscale) on M hosts with 50 shards each in 10 jobs, every host
// reporting every shard's rate, one host slow (a confirmed straggler under its
// avoid rule), and 1% of the shards with a failure in the window.
func BenchmarkPolicies(b *testing.B) {
	for _, m := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("hosts=%d/shards=%d", m, 50*m), func(b *testing.B) {
			v := rated(m, 50*m, map[int]float64{0: 4})
			v.Tier = interfaces.TierGlobal // autoscale runs too
			for i := range v.Shards {
				v.Shards[i].Job = fmt.Sprintf("job%d", i%10)
				v.Shards[i].InputRate = 100
			}
			var failures []Failure
			for i := 0; i < len(v.Shards); i += 100 {
				failures = append(failures, fail(string(v.Shards[i].ID), (i+1)%m, 0))
			}
			ps := mustPolicies(b, DefaultPolicies(), map[string]PolicySettings{"straggler": {"window": "0s"}})
			if _, err := ps.Run(PolicyInput{Now: t0, View: v, Failures: failures}); err != nil {
				b.Fatal(err)
			}
			now := t0
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				now = now.Add(time.Second)
				if _, err := ps.Run(PolicyInput{Now: now, View: v}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
