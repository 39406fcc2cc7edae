package hierbench

import (
	"context"
	"testing"
	"time"
)

// BenchmarkHierarchy: 100,000 shards on 1,000 hosts in 10 regions with the
// sampled settings of smallConfig (candidates 1; `strata bench hierarchy`
// defaults to the daemons' own, candidates 8). ns/op is the whole comparison; the
// metrics are the wall seconds of each side, their ratio and the quality.
func BenchmarkHierarchy(b *testing.B) {
	cfg := smallConfig()
	cfg.Shards, cfg.Hosts, cfg.Regions, cfg.Seed = 100000, 1000, 10, 1
	cfg.Now = time.Now
	in, err := NewInstance(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var res Result
	for i := 0; i < b.N; i++ {
		if res, err = CompareInstance(context.Background(), cfg, in); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(res.Hier.Seconds, "hier_s")
	b.ReportMetric(res.Flat.Seconds, "flat_s")
	b.ReportMetric(res.Speedup, "speedup")
	b.ReportMetric(res.Hier.MaxOverLB, "hier_max/LB")
	b.ReportMetric(res.Flat.MaxOverLB, "flat_max/LB")
}
