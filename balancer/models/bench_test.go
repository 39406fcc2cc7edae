package models

import (
	"math/rand/v2"
	"testing"

	"github.com/strata-sched/strata/balancer"
)

// BenchmarkFitLatency is one fit of a full ring (256 samples).
func BenchmarkFitLatency(b *testing.B) {
	samples := synth(rand.New(rand.NewPCG(1, 1)), balancer.LatencyModel{ServiceTime: []float64{0.01}}, 256, 0.05, 0.95, 0.2)
	b.ReportAllocs()
	for b.Loop() {
		if _, info, err := FitLatency(samples, balancer.LatencyModel{}); err != nil || !info.Fitted {
			b.Fatal(err, info)
		}
	}
}

// BenchmarkEstimatorRound is one child's work per control round: add one
// sample to a full ring of 256 and refit.
func BenchmarkEstimatorRound(b *testing.B) {
	rng := rand.New(rand.NewPCG(2, 2))
	e, err := NewLatencyEstimator(256, balancer.LatencyModel{})
	if err != nil {
		b.Fatal(err)
	}
	samples := synth(rng, balancer.LatencyModel{ServiceTime: []float64{0.01}}, 1024, 0.05, 0.95, 0.2)
	for _, s := range samples[:256] {
		_ = e.Add(s)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		_ = e.Add(samples[i%len(samples)])
		i++
		if _, info := e.Model(); !info.Fitted {
			b.Fatal(info)
		}
	}
}

// BenchmarkAdvise is DS2's one-step advice on the 5-operator diamond.
func BenchmarkAdvise(b *testing.B) {
	topo, w := diamond(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Advise(topo, w, 1); err != nil {
			b.Fatal(err)
		}
	}
}
