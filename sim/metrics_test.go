package sim

import (
	"context"
	"math"
	"sort"
	"testing"
)

// threeHostsScenario: three shards on three hosts of 10 cpu, one each whatever
// the solver does (each fills most of a host), never moved.
const threeHostsScenario = `
seed: 5
duration: 10m
tick: 10s
control_interval: 1m
model: {service_ms: 5}
topology:
  hosts:
    - {name: h0, region: r, capacity: {cpu: 10}}
    - {name: h1, region: r, capacity: {cpu: 10}}
    - {name: h2, region: r, capacity: {cpu: 10}}
workload:
  jobs:
    - {name: a, shards: 1, load: {cpu: 2.3456}, input_rate: 100}
    - {name: b, shards: 1, load: {cpu: 5.4321}, input_rate: 300}
    - {name: c, shards: 1, load: {cpu: 7.1111}, input_rate: 50}
policies:
  - {name: g, solver: greedy}
`

// TestSummaryFiguresOfASteadyRun checks a run's summary against figures
// computed independently from where the shards are: host utilization
// quantiles (nearest rank over every (host, tick) sample: exact), max/LB,
// max/mean, and the modeled latency percentiles (weighted by input, within
// the log histogram's ≈4.4%).
func TestSummaryFiguresOfASteadyRun(t *testing.T) {
	e := mustEngine(t, threeHostsScenario)
	pr, err := e.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s := pr.Summary
	if s.Moves != 0 {
		t.Fatalf("%d moves: the run is not steady", s.Moves)
	}
	cpus := []float64{2.3456, 5.4321, 7.1111}
	rates := []float64{100, 300, 50}
	var load [3]float64
	for i := range cpus {
		load[e.host[i]] += cpus[i]
	}
	var utils []float64
	for h := range load {
		utils = append(utils, load[h]/10)
	}
	sort.Float64s(utils)
	// Every tick has the same 3 samples: nearest rank over n·3 of them.
	p50, p99, mx := utils[1], utils[2], utils[2]
	mean := (load[0] + load[1] + load[2]) / 30
	lb := math.Max(mean, 7.1111/10)
	type rec struct{ ms, w float64 }
	var lat []rec
	for i := range cpus {
		rho := load[e.host[i]] / 10
		lat = append(lat, rec{5 / (1 - math.Min(rho, 0.99)), rates[i]})
	}
	sort.Slice(lat, func(a, b int) bool { return lat[a].ms < lat[b].ms })
	q := func(p float64) float64 {
		tot, acc := 0.0, 0.0
		for _, l := range lat {
			tot += l.w
		}
		for _, l := range lat {
			if acc += l.w; acc >= p*tot {
				return l.ms
			}
		}
		return lat[len(lat)-1].ms
	}
	near := func(name string, got, want, tol float64) {
		if math.Abs(got-want) > tol {
			t.Errorf("%s: summary %v, independent %v", name, got, want)
		}
	}
	near("util_p50", s.UtilP50["cpu"], round4(p50), 0)
	near("util_p99", s.UtilP99["cpu"], round4(p99), 0)
	near("util_max", s.UtilMax["cpu"], round4(mx), 0)
	near("max_over_lb", s.MaxOverLB["cpu"], mx/lb, 1e-4)
	near("max_over_mean", s.MaxOverMean["cpu"], mx/mean, 1e-4)
	near("latency_p50", s.LatencyP50MS, q(0.5), 0.045*q(0.5))
	near("latency_p99", s.LatencyP99MS, q(0.99), 0.045*q(0.99))
}

// TestUtilDistQuantiles: nearest rank over the samples while they fit in
// maxUtilSamples, the histogram's bin edge (within 0.001 above) past that;
// the maximum exact either way.
func TestUtilDistQuantiles(t *testing.T) {
	defer func(n int) { maxUtilSamples = n }(maxUtilSamples)
	maxUtilSamples = 1000
	d := newUtilDist()
	if d.quantile(0.5) != 0 || d.quantile(1) != 0 {
		t.Fatal("an empty distribution has quantiles")
	}
	xs := []float64{0.71234, 0.10001, 0.5432, 0.25, 0.9}
	for k := 0; k < 100; k++ {
		for _, x := range xs {
			d.add(x + float64(k)*1e-6) // 500 samples, every one different
		}
	}
	// Sorted: 100 of each base value, in order 0.10001, 0.25, 0.5432, 0.71234, 0.9.
	for _, tc := range []struct{ q, want float64 }{{0.5, 0.5432 + 49e-6}, {0.99, 0.9 + 94e-6}, {0.2, 0.10001 + 99e-6}, {0.201, 0.25}, {1, 0.9 + 99e-6}} {
		if got := d.quantile(tc.q); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("q %v: %v, want %v", tc.q, got, tc.want)
		}
	}
	for k := 0; k < 600; k++ {
		d.add(0.5432)
	}
	if !d.over || d.samples != nil {
		t.Fatalf("1100 samples over a limit of 1000: still kept")
	}
	// 1100 samples: rank 550 is among the 700 of 0.5432…: the upper edge of its bin.
	if got := d.quantile(0.5); got != 0.544 {
		t.Errorf("past the limit: p50 %v, want the bin edge 0.544", got)
	}
	if got := d.quantile(1); got != 0.9+99e-6 {
		t.Errorf("past the limit: max %v, want 0.900099", got)
	}
}
