package models

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/interfaces"
)

// synth draws n samples of a child whose true model is m: utilizations uniform
// in [lo, hi], latency = Predict(m) × exp(N(0, sigma)) (multiplicative noise).
func synth(rng *rand.Rand, m balancer.LatencyModel, n int, lo, hi, sigma float64) []Sample {
	out := make([]Sample, n)
	for i := range out {
		rho := lo + (hi-lo)*rng.Float64()
		out[i] = Sample{Util: rho, Latency: Predict(m, 0, rho) * math.Exp(sigma*rng.NormFloat64())}
	}
	return out
}

// TestFitRecoversServiceTime: from noisy synthetic samples the fit recovers the
// true service time within 5%, starting from a prior that is far off.
func TestFitRecoversServiceTime(t *testing.T) {
	cases := []struct {
		name   string
		truth  balancer.LatencyModel
		lo, hi float64
		sigma  float64
		seed   uint64
	}{
		{"2ms p99", balancer.LatencyModel{ServiceTime: []float64{0.002}}, 0.05, 0.9, 0.2, 1},
		{"50ms p50", balancer.LatencyModel{ServiceTime: []float64{0.05}, Quantile: 0.5}, 0.1, 0.8, 0.2, 2},
		{"1.3s p90 past MaxUtil", balancer.LatencyModel{ServiceTime: []float64{1.3}, Quantile: 0.9, MaxUtil: 0.8}, 0.3, 1.2, 0.3, 3},
		{"10us low noise", balancer.LatencyModel{ServiceTime: []float64{1e-5}}, 0.0, 0.5, 0.05, 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(tc.seed, 99))
			samples := synth(rng, tc.truth, 200, tc.lo, tc.hi, tc.sigma)
			prior := tc.truth
			prior.ServiceTime = []float64{tc.truth.ServiceTime[0] * 40} // 40× off
			got, info, err := FitLatency(samples, prior)
			if err != nil {
				t.Fatal(err)
			}
			if !info.Fitted || info.Fallback != "" {
				t.Fatalf("not fitted: %+v", info)
			}
			want := tc.truth.ServiceTime[0]
			s := got.ServiceTime[0]
			t.Logf("true S %g, fitted %g (%.2f%% off), rms log error %.3f (σ %g), %d evaluations",
				want, s, 100*math.Abs(s/want-1), info.RMSLogError, tc.sigma, info.Evaluations)
			if rel := math.Abs(s/want - 1); rel > 0.05 {
				t.Errorf("service time %g, true %g: off by %.1f%% (> 5%%)", s, want, 100*rel)
			}
			if info.ServiceTime != s || len(got.ServiceTime) != 1 {
				t.Errorf("info.ServiceTime %g, model %v", info.ServiceTime, got.ServiceTime)
			}
			// The other parameters are the prior's, untouched.
			if got.Quantile != tc.truth.Quantile || got.MaxUtil != tc.truth.MaxUtil {
				t.Errorf("quantile/max_util changed: %+v", got)
			}
			// The optimizer reached the least-squares optimum: for this model it
			// has a closed form, ln S = mean(ln y − ln shape(ρ)).
			q, mu := quantileOf(tc.truth), maxUtilOf(tc.truth)
			sum := 0.0
			for _, x := range samples {
				sum += math.Log(x.Latency / shape(q, mu, x.Util))
			}
			closed := math.Exp(sum / float64(len(samples)))
			if rel := math.Abs(s/closed - 1); rel > 1e-6 {
				t.Errorf("optimizer %g vs closed-form least squares %g (rel %g)", s, closed, rel)
			}
			// The residual matches the noise level drawn (σ), within 25%.
			if info.RMSLogError < 0.75*tc.sigma || info.RMSLogError > 1.25*tc.sigma {
				t.Errorf("rms log error %g, noise σ %g", info.RMSLogError, tc.sigma)
			}
			if info.Evaluations < 1 {
				t.Errorf("evaluations %d", info.Evaluations)
			}
		})
	}
}

// TestFitDeterministic: the same samples and prior give the same bits.
func TestFitDeterministic(t *testing.T) {
	truth := balancer.LatencyModel{ServiceTime: []float64{0.01}}
	a := synth(rand.New(rand.NewPCG(7, 7)), truth, 50, 0.1, 0.9, 0.2)
	m1, i1, err1 := FitLatency(a, balancer.LatencyModel{})
	m2, i2, err2 := FitLatency(a, balancer.LatencyModel{})
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if m1.ServiceTime[0] != m2.ServiceTime[0] || i1 != i2 {
		t.Errorf("two fits differ: %v %+v vs %v %+v", m1.ServiceTime, i1, m2.ServiceTime, i2)
	}
}

func TestFitFallback(t *testing.T) {
	truth := balancer.LatencyModel{ServiceTime: []float64{0.01}}
	rng := rand.New(rand.NewPCG(5, 5))
	cases := []struct {
		name     string
		samples  []Sample
		prior    balancer.LatencyModel
		wantS    float64
		contains string
	}{
		{"none", nil, balancer.LatencyModel{ServiceTime: []float64{0.2}}, 0.2, "no samples"},
		{"too few", synth(rng, truth, MinSamples-1, 0.1, 0.9, 0.1), balancer.LatencyModel{ServiceTime: []float64{0.2}}, 0.2, "too few samples (7 < 8)"},
		{"one utilization", synth(rng, truth, 100, 0.5, 0.5+MinUtilSpread/2, 0.1), balancer.LatencyModel{ServiceTime: []float64{0.3}}, 0.3, "utilizations span only"},
		{"default prior", synth(rng, truth, 3, 0.1, 0.9, 0.1), balancer.LatencyModel{Quantile: 0.9}, 1, "too few samples"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, info, err := FitLatency(tc.samples, tc.prior)
			if err != nil {
				t.Fatal(err)
			}
			if info.Fitted {
				t.Errorf("fitted from %d samples: %+v", len(tc.samples), info)
			}
			if !strings.Contains(info.Fallback, tc.contains) {
				t.Errorf("fallback %q, want it to contain %q", info.Fallback, tc.contains)
			}
			if len(m.ServiceTime) != 1 || m.ServiceTime[0] != tc.wantS || info.ServiceTime != tc.wantS {
				t.Errorf("service time %v (info %g), want the prior's %g", m.ServiceTime, info.ServiceTime, tc.wantS)
			}
			if m.Quantile != tc.prior.Quantile {
				t.Errorf("quantile %v, want %v", m.Quantile, tc.prior.Quantile)
			}
			if info.Samples != len(tc.samples) {
				t.Errorf("info.Samples %d, want %d", info.Samples, len(tc.samples))
			}
		})
	}
	// Just at the threshold both rules pass and the fit runs.
	s := synth(rng, truth, MinSamples, 0.1, 0.9, 0.1)
	s[0].Util, s[1].Util = 0.2, 0.2+MinUtilSpread
	if _, info, err := FitLatency(s, balancer.LatencyModel{}); err != nil || !info.Fitted {
		t.Errorf("at the thresholds: fitted %v, err %v, %+v", info.Fitted, err, info)
	}
}

func TestFitErrors(t *testing.T) {
	good := synth(rand.New(rand.NewPCG(1, 2)), balancer.LatencyModel{ServiceTime: []float64{0.01}}, 10, 0.1, 0.9, 0.1)
	bad := func(i int, s Sample) []Sample {
		out := append([]Sample(nil), good...)
		out[i] = s
		return out
	}
	cases := []struct {
		name    string
		samples []Sample
		prior   balancer.LatencyModel
		want    string
	}{
		{"NaN util", bad(3, Sample{Util: math.NaN(), Latency: 1}), balancer.LatencyModel{}, "samples[3].util"},
		{"negative util", bad(0, Sample{Util: -0.1, Latency: 1}), balancer.LatencyModel{}, "samples[0].util"},
		{"huge util", bad(9, Sample{Util: 11, Latency: 1}), balancer.LatencyModel{}, "samples[9].util"},
		{"zero latency", bad(2, Sample{Util: 0.5, Latency: 0}), balancer.LatencyModel{}, "samples[2].latency"},
		{"inf latency", bad(2, Sample{Util: 0.5, Latency: math.Inf(1)}), balancer.LatencyModel{}, "samples[2].latency"},
		{"quantile 1", good, balancer.LatencyModel{Quantile: 1}, "prior.quantile"},
		{"max util", good, balancer.LatencyModel{MaxUtil: -0.5}, "prior.max_util"},
		{"two service times", good, balancer.LatencyModel{ServiceTime: []float64{1, 2}}, "prior.service_time"},
		{"zero service time", good, balancer.LatencyModel{ServiceTime: []float64{0}}, "prior.service_time"},
	}
	for _, tc := range cases {
		_, _, err := FitLatency(tc.samples, tc.prior)
		if !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want ErrInvalid naming %q", tc.name, err, tc.want)
		}
	}
}

// TestPredictMatchesBalancer: the formula fitted is the one the balancer's
// latency goal evaluates. One shard of load ρ on one child of capacity 1 makes
// the latency goal equal to that child's predicted latency at ρ.
func TestPredictMatchesBalancer(t *testing.T) {
	models := []balancer.LatencyModel{
		{ServiceTime: []float64{0.004}},
		{ServiceTime: []float64{0.2}, Quantile: 0.5, MaxUtil: 0.7},
		{},
	}
	for _, m := range models {
		for _, rho := range []float64{0.05, 0.5, 0.69, 0.9, 1.4} {
			p := &balancer.Problem{
				Resources: []interfaces.Resource{interfaces.CPU},
				ChildIDs:  []interfaces.ChildID{"c"},
				Capacity:  []float64{1},
				ShardIDs:  []interfaces.ShardID{"s"},
				Load:      []float64{rho},
				Current:   []int32{0},
			}
			o := balancer.Options{Goals: []balancer.Goal{{Kind: balancer.GoalLatency, Priority: 1, Weight: 1}}, Latency: m}
			obj, err := balancer.Evaluate(p, o, []int32{0})
			if err != nil {
				t.Fatal(err)
			}
			got, _ := obj.Value(balancer.GoalLatency)
			want := Predict(m, 0, rho)
			if math.Abs(got-want) > 1e-12*math.Max(1, want) {
				t.Errorf("model %+v at ρ=%g: balancer %g, Predict %g", m, rho, got, want)
			}
		}
	}
}

func TestLatencyEstimator(t *testing.T) {
	if _, err := NewLatencyEstimator(MinSamples-1, balancer.LatencyModel{}); !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), "capacity") {
		t.Errorf("small capacity: %v", err)
	}
	if _, err := NewLatencyEstimator(16, balancer.LatencyModel{Quantile: 2}); !errors.Is(err, interfaces.ErrInvalid) {
		t.Errorf("bad prior: %v", err)
	}
	prior := balancer.LatencyModel{ServiceTime: []float64{0.5}}
	e, err := NewLatencyEstimator(16, prior)
	if err != nil {
		t.Fatal(err)
	}
	m, info := e.Model()
	if info.Fitted || m.ServiceTime[0] != 0.5 {
		t.Errorf("empty estimator: %v %+v", m.ServiceTime, info)
	}
	rng := rand.New(rand.NewPCG(11, 3))
	old := synth(rng, balancer.LatencyModel{ServiceTime: []float64{0.01}}, 10, 0.1, 0.9, 0.05)
	for _, s := range old {
		if err := e.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	m, info = e.Model()
	if !info.Fitted || math.Abs(m.ServiceTime[0]/0.01-1) > 0.05 {
		t.Errorf("after 10 samples of S=0.01: %v %+v", m.ServiceTime, info)
	}
	// The child slows down: 16 new samples push every old one out of the ring.
	recent := synth(rng, balancer.LatencyModel{ServiceTime: []float64{0.04}}, 16, 0.1, 0.9, 0.05)
	for _, s := range recent {
		if err := e.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	if e.Len() != 16 {
		t.Errorf("len %d, want the capacity 16", e.Len())
	}
	held := e.Samples()
	for i := range recent {
		if held[i] != recent[i] {
			t.Fatalf("sample %d: %+v, want %+v (oldest first, old ones evicted)", i, held[i], recent[i])
		}
	}
	m, info = e.Model()
	if !info.Fitted || math.Abs(m.ServiceTime[0]/0.04-1) > 0.05 || info.Samples != 16 {
		t.Errorf("after the slowdown: %v %+v", m.ServiceTime, info)
	}
	// Equal to a batch fit of the held samples.
	bm, _, _ := FitLatency(held, prior)
	if bm.ServiceTime[0] != m.ServiceTime[0] {
		t.Errorf("estimator %g vs batch %g", m.ServiceTime[0], bm.ServiceTime[0])
	}
	// The returned model is a copy.
	m.ServiceTime[0] = 99
	if m2, _ := e.Model(); m2.ServiceTime[0] == 99 {
		t.Error("Model returned the estimator's own slice")
	}
	// A bad sample is refused and not recorded.
	if err := e.Add(Sample{Util: 0.5, Latency: -1}); !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), "sample.latency") {
		t.Errorf("bad sample: %v", err)
	}
	if got := e.Samples(); got[len(got)-1] != recent[len(recent)-1] {
		t.Error("the bad sample was recorded")
	}
}

func TestAssemble(t *testing.T) {
	m, err := Assemble([]balancer.LatencyModel{
		{ServiceTime: []float64{0.01}, Quantile: 0.9},
		{Quantile: 0.9},
		{ServiceTime: []float64{0.03}, Quantile: 0.9},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.ServiceTime) != 3 || m.ServiceTime[0] != 0.01 || m.ServiceTime[1] != 1 || m.ServiceTime[2] != 0.03 || m.Quantile != 0.9 {
		t.Errorf("assembled %+v", m)
	}
	if got, want := Predict(m, 2, 0.5), 0.03*math.Log(10)/0.5; math.Abs(got-want) > 1e-15 {
		t.Errorf("child 2 at 0.5: %g, want %g", got, want)
	}
	_, err = Assemble([]balancer.LatencyModel{{Quantile: 0.9}, {Quantile: 0.99}})
	if !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), "models[1]") {
		t.Errorf("mismatched quantiles: %v", err)
	}
	if _, err := Assemble(nil); !errors.Is(err, interfaces.ErrInvalid) {
		t.Errorf("no children: %v", err)
	}
}

func TestLatencyEstimators(t *testing.T) {
	prior := balancer.LatencyModel{ServiceTime: []float64{0.5}, Quantile: 0.9}
	es, err := NewLatencyEstimators(32, prior)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(21, 1))
	fast := synth(rng, balancer.LatencyModel{ServiceTime: []float64{0.002}, Quantile: 0.9}, 32, 0.1, 0.9, 0.1)
	slow := synth(rng, balancer.LatencyModel{ServiceTime: []float64{0.02}, Quantile: 0.9}, 32, 0.1, 0.9, 0.1)
	for i := range fast {
		if err := es.Add("h-fast", fast[i]); err != nil {
			t.Fatal(err)
		}
		if err := es.Add("h-slow", slow[i]); err != nil {
			t.Fatal(err)
		}
	}
	m, infos := es.Model([]interfaces.ChildID{"h-slow", "h-new", "h-fast"})
	if len(m.ServiceTime) != 3 || len(infos) != 3 || m.Quantile != 0.9 {
		t.Fatalf("model %+v infos %d", m, len(infos))
	}
	if math.Abs(m.ServiceTime[0]/0.02-1) > 0.05 || math.Abs(m.ServiceTime[2]/0.002-1) > 0.05 {
		t.Errorf("service times %v, want ≈ [0.02 0.5 0.002]", m.ServiceTime)
	}
	if m.ServiceTime[1] != 0.5 || infos[1].Fitted || !infos[0].Fitted || !infos[2].Fitted {
		t.Errorf("child without samples: %v %+v", m.ServiceTime[1], infos[1])
	}
	es.Forget("h-fast")
	if m, infos := es.Model([]interfaces.ChildID{"h-fast"}); m.ServiceTime[0] != 0.5 || infos[0].Fitted {
		t.Errorf("forgotten child: %v %+v", m.ServiceTime, infos[0])
	}
	if err := es.Add("", fast[0]); !errors.Is(err, interfaces.ErrInvalid) {
		t.Errorf("empty child id: %v", err)
	}
	if err := es.Add("h1", Sample{Util: -1, Latency: 1}); !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), "child h1: sample.util") {
		t.Errorf("bad sample: %v", err)
	}
	if _, err := NewLatencyEstimators(2, prior); !errors.Is(err, interfaces.ErrInvalid) {
		t.Errorf("small capacity: %v", err)
	}
}

// TestFitNoiselessFromTheOptimum: starting at the optimum (noiseless samples,
// prior = truth) the optimizer has nothing to do and must still report a fit.
func TestFitNoiselessFromTheOptimum(t *testing.T) {
	truth := balancer.LatencyModel{ServiceTime: []float64{0.25}}
	samples := synth(rand.New(rand.NewPCG(8, 8)), truth, 20, 0.1, 0.9, 0)
	m, info, err := FitLatency(samples, truth)
	if err != nil || !info.Fitted {
		t.Fatalf("err %v info %+v", err, info)
	}
	if math.Abs(m.ServiceTime[0]/0.25-1) > 1e-9 || info.RMSLogError > 1e-9 {
		t.Errorf("service time %.17g, rms %g", m.ServiceTime[0], info.RMSLogError)
	}
}
