package sim

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

func benchScenario(shards, hosts, regions int, duration time.Duration, solver string) string {
	var b []byte
	b = fmt.Appendf(b, "name: bench\nduration: %ds\ntick: 1s\ncontrol_interval: 60s\nsample_every: 60s\ntopology:\n  regions:\n", int(duration.Seconds()))
	for r := 0; r < regions; r++ {
		b = fmt.Appendf(b, "    - {name: r%d, hosts: %d, capacity: {cpu: 64, mem: 256Gi, net: 10G}, jitter: 0.2}\n", r, hosts/regions)
	}
	cpu := 0.7 * 64 * float64(hosts) / float64(shards)
	b = fmt.Appendf(b, "workload:\n  jobs:\n    - {name: j, shards: %d, load: {cpu: %g, mem: 1Gi, net: 10M}, input_rate: 100, state_bytes: 64Mi, sizes: {dist: zipf, ratio: 20}}\n", shards, cpu)
	b = fmt.Appendf(b, "  diurnal: {amplitude: 0.3, period: 1h}\npolicies:\n  - {name: p, solver: %s}\n", solver)
	return string(b)
}

// BenchmarkTick measures the tick loop alone (loads, host sums, latency and lag
// for every shard) on a placed fleet; it reports shard-ticks per second.
func BenchmarkTick(b *testing.B) {
	for _, size := range []struct{ shards, hosts int }{{10_000, 100}, {100_000, 1_000}, {1_000_000, 10_000}} {
		b.Run(fmt.Sprintf("shards=%d/hosts=%d", size.shards, size.hosts), func(b *testing.B) {
			sc, err := ParseScenario([]byte(benchScenario(size.shards, size.hosts, 4, time.Hour, "simtest-placeonly")), "bench.yaml")
			if err != nil {
				b.Fatal(err)
			}
			e, err := newEngine(sc, sc.Policies[0], 1, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			// Place every shard directly, round-robin: the benchmark measures
			// the tick loop, not a policy.
			for i := range e.w.shardID {
				e.w.active[i] = true
				h := int32(i % len(e.w.hostName))
				e.host[i], e.region_[i] = h, e.w.hostRegion[h]
			}
			e.loads(0)
			e.accumulate()
			if n := e.unowned(nil); n != 0 {
				b.Fatalf("%d shards unplaced", n)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t := time.Duration(i+1) * time.Second
				e.now = t
				e.loads(t)
				e.process(t, time.Second)
			}
			b.ReportMetric(float64(size.shards)*float64(b.N)/b.Elapsed().Seconds(), "shard-ticks/s")
		})
	}
}

// BenchmarkRun measures whole runs, control rounds with the test greedy policy
// included: 10,000 shards on 100 hosts for 10 virtual minutes.
func BenchmarkRun(b *testing.B) {
	sc, err := ParseScenario([]byte(benchScenario(10_000, 100, 4, 10*time.Minute, "simtest-greedy")), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var st int64
	for i := 0; i < b.N; i++ {
		res, err := Run(context.Background(), sc, Options{})
		if err != nil {
			b.Fatal(err)
		}
		st += res.Policies[0].Summary.ShardTicks
	}
	b.ReportMetric(float64(st)/b.Elapsed().Seconds(), "shard-ticks/s")
}

// BenchmarkRackLossImpact measures the per-sample rack metric on a placed fleet
// of 100k shards, 1000 hosts, 4 regions × 10 racks.
func BenchmarkRackLossImpact(b *testing.B) {
	src := strings.Replace(benchScenario(100_000, 1_000, 4, time.Hour, "simtest-placeonly"), "topology:\n", "topology:\n  racks_per_region: 10\n", 1)
	sc, err := ParseScenario([]byte(src), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	e, err := newEngine(sc, sc.Policies[0], 1, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	for i := range e.w.shardID {
		e.w.active[i] = true
		h := int32(i % len(e.w.hostName))
		e.host[i], e.region_[i] = h, e.w.hostRegion[h]
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e.rackLossImpact()
	}
	b.ReportMetric(100_000*float64(b.N)/b.Elapsed().Seconds(), "shards/s")
}
