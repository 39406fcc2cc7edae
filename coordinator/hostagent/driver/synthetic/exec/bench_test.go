package exec

import (
	"testing"
	"time"
)

// BenchmarkSchedule1000Shards: 1,000 shards (Poisson, 100 items/s each, SLOs
// from 10ms to 1s) on a 64-core host at 90% utilisation. One op is one item
// arriving, being picked, run and measured; items/s is how many items the core
// schedules per second of CPU.
func BenchmarkSchedule1000Shards(b *testing.B) {
	for _, d := range []Discipline{LLF, FIFO} {
		b.Run(string(d), func(b *testing.B) {
			const shards, cores, rate = 1000, 64, 100.0
			cost := time.Duration(0.9 * cores / (shards * rate) * float64(time.Second))
			c, err := New(Config{Cores: cores, Discipline: d, Seed: 1}, t0)
			if err != nil {
				b.Fatal(err)
			}
			for i := range shards {
				slo := time.Duration(10+i%100*10) * time.Millisecond
				if err := c.Add(t0, sid("s", i), Params{Rate: rate, Cost: cost, SLO: slo}); err != nil {
					b.Fatal(err)
				}
			}
			now := t0.Add(2 * time.Second) // warm up: queues and heaps at steady state
			c.Advance(now)
			start := c.Completed()
			b.ResetTimer()
			for c.Completed()-start < uint64(b.N) {
				now = now.Add(time.Millisecond)
				c.Advance(now)
			}
			b.StopTimer()
			b.ReportMetric(float64(c.Completed()-start)/b.Elapsed().Seconds(), "items/s")
			st, _ := c.Stats("s0")
			if st.Window.Completed == 0 {
				b.Fatalf("nothing measured: %+v", st)
			}
		})
	}
}
