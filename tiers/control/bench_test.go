package control

import (
	"fmt"
	"testing"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// BenchmarkStep measures one Step + Observe on a region-sized tier: M hosts,
// 50 shards per host, a mild skew (periodic rounds), 5% of the shards under
// anti-bounce rules and every host reporting.
func BenchmarkStep(b *testing.B) {
	for _, m := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("hosts=%d/shards=%d", m, 50*m), func(b *testing.B) {
			var loads []float64
			var owner []int
			for i := 0; i < 50*m; i++ {
				loads = append(loads, 0.5+float64(i%7)/7)
				owner = append(owner, (i*(i+1)/2)%m)
			}
			v := tier(m, 60, loads, owner)
			for c := 0; c < m; c++ {
				v.Reports[childID(c)] = interfaces.Report{Child: childID(c), Epoch: 1, LatencyP99: time.Duration(5+c%5) * time.Millisecond}
			}
			cfg := DefaultConfig()
			cfg.CooldownRounds = 0
			c := mustNew(b, cfg)
			d, _ := c.Step(Input{Now: t0, View: v})
			var moved []interfaces.Move
			for i := 0; i < len(v.Shards); i += 20 {
				moved = append(moved, interfaces.Move{Shard: v.Shards[i].ID, From: childID((i + 1) % m), To: childID(owner[i])})
			}
			_ = c.Observe(RoundResult{Round: d.Round, Applied: moved})
			now := t0
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				now = now.Add(time.Second)
				d, err := c.Step(Input{Now: now, View: v})
				if err != nil {
					b.Fatal(err)
				}
				_ = c.Observe(RoundResult{Round: d.Round, Planned: 1})
			}
		})
	}
}
