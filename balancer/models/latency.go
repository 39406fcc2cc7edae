package models

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/optimize"

	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/interfaces"
)

// Sample is one observation of a child: its utilization ρ of the model's
// resource and the latency quantile measured over the same interval, in
// seconds. The quantile measured must be the model's Quantile (the prior's,
// 0 meaning 0.99).
type Sample struct {
	Util    float64 `json:"util"`
	Latency float64 `json:"latency"`
}

const (
	// MinSamples is the fewest samples FitLatency fits from; with fewer it
	// keeps the prior.
	MinSamples = 8
	// MinUtilSpread is the smallest spread (max − min) of the samples'
	// utilizations FitLatency fits from. The model's shape in ρ is assumed,
	// not learned: samples all at one utilization would only say what the
	// latency is there, and the fit would extrapolate that one point along the
	// assumed curve to every other utilization (and mistake a fixed latency —
	// network, batching — for service time). Below the spread the prior is kept.
	MinUtilSpread = 0.1
	// MaxSampleUtil bounds a sample's utilization: above it the sample is
	// rejected as a measurement error.
	MaxSampleUtil = 10.0
)

// FitInfo says how a latency model was obtained.
type FitInfo struct {
	// Samples is the number of samples given.
	Samples int `json:"samples"`
	// Fitted is true when ServiceTime comes from the samples; false when the
	// prior (or the default, 1 s) was kept — Fallback says why.
	Fitted   bool   `json:"fitted"`
	Fallback string `json:"fallback,omitempty"`
	// ServiceTime is the resulting mean service time S in seconds, Quantile
	// the q the samples were taken to measure.
	ServiceTime float64 `json:"service_time"`
	Quantile    float64 `json:"quantile"`
	// UtilMin and UtilMax are the range of the samples' utilizations.
	UtilMin float64 `json:"util_min"`
	UtilMax float64 `json:"util_max"`
	// RMSLogError is the root mean square of ln(predicted/observed) at the
	// result, over the samples (0.1 ≈ typical error of 10%): large values mean
	// the M/M/1 shape does not describe this child well.
	RMSLogError float64 `json:"rms_log_error"`
	// Evaluations is the number of objective evaluations of the optimizer.
	Evaluations int `json:"evaluations"`
}

// Predict returns the latency quantile the balancer's model predicts for child
// c at utilization rho, in seconds — the formula of balancer.LatencyModel
// (and of the balancer's latency goal): S_c·ln(1/(1−q))/(1−ρ) up to MaxUtil,
// then along the tangent. Defaults as in the balancer: no ServiceTime means 1,
// one value applies to every child, Quantile 0 means 0.99, MaxUtil 0 means
// 0.95. A child index outside ServiceTime uses the first value.
func Predict(m balancer.LatencyModel, c int, rho float64) float64 {
	s := 1.0
	switch {
	case len(m.ServiceTime) == 1:
		s = m.ServiceTime[0]
	case c >= 0 && c < len(m.ServiceTime):
		s = m.ServiceTime[c]
	case len(m.ServiceTime) > 0:
		s = m.ServiceTime[0]
	}
	return s * shape(quantileOf(m), maxUtilOf(m), rho)
}

// shape is the model at S = 1: ln(1/(1−q))/(1−ρ), tangent beyond rhoMax.
func shape(q, rhoMax, rho float64) float64 {
	k := math.Log(1 / (1 - q))
	if rho <= rhoMax {
		return k / (1 - rho)
	}
	d := 1 - rhoMax
	return k/d + k/(d*d)*(rho-rhoMax)
}

func quantileOf(m balancer.LatencyModel) float64 {
	if m.Quantile == 0 {
		return 0.99
	}
	return m.Quantile
}

func maxUtilOf(m balancer.LatencyModel) float64 {
	if m.MaxUtil == 0 {
		return 0.95
	}
	return m.MaxUtil
}

// checkPrior validates the prior of a one-child fit.
func checkPrior(prior balancer.LatencyModel) error {
	if q := prior.Quantile; !(q >= 0 && q < 1) {
		return fmt.Errorf("prior.quantile: must be in [0, 1) (0 = 0.99), got %v: %w", q, interfaces.ErrInvalid)
	}
	if u := prior.MaxUtil; !(u >= 0 && u < 1) {
		return fmt.Errorf("prior.max_util: must be in [0, 1) (0 = 0.95), got %v: %w", u, interfaces.ErrInvalid)
	}
	if len(prior.ServiceTime) > 1 {
		return fmt.Errorf("prior.service_time: a one-child model has 0 or 1 values, got %d: %w", len(prior.ServiceTime), interfaces.ErrInvalid)
	}
	for _, s := range prior.ServiceTime {
		if !(s > 0) || math.IsInf(s, 0) {
			return fmt.Errorf("prior.service_time: must be finite and > 0, got %v: %w", s, interfaces.ErrInvalid)
		}
	}
	return nil
}

// CheckSample validates one sample: utilization finite in [0, MaxSampleUtil],
// latency finite and > 0.
func CheckSample(s Sample) error {
	if !(s.Util >= 0 && s.Util <= MaxSampleUtil) {
		return fmt.Errorf("util: must be in [0, %v], got %v: %w", MaxSampleUtil, s.Util, interfaces.ErrInvalid)
	}
	if !(s.Latency > 0) || math.IsInf(s.Latency, 0) {
		return fmt.Errorf("latency: must be finite and > 0 seconds, got %v: %w", s.Latency, interfaces.ErrInvalid)
	}
	return nil
}

// FitLatency fits the service time S of one child's latency model to its
// samples and returns the prior with ServiceTime = [S] (Resource, Quantile and
// MaxUtil are kept: the quantile is what the samples measure, and only the
// product S·ln(1/(1−q)) is identifiable from them).
//
// The fit is least squares on log latency, Σ_i (ln p_q(ρ_i; S) − ln y_i)²,
// because latency noise is multiplicative (a 10% error at 1 ms weighs as much
// as one at 1 s). S is optimized as θ = ln S, which keeps it positive without
// bounds, by L-BFGS (gonum/optimize) from the prior's S. It needs at least
// MinSamples samples spanning at least MinUtilSpread of utilization;
// otherwise the prior is returned unchanged (ServiceTime 1 when the prior has
// none) with FitInfo.Fitted false and the reason in Fallback. Samples beyond
// MaxUtil are fitted against the tangent, as the balancer predicts them.
//
// A bad sample or prior is an error wrapping interfaces.ErrInvalid that names
// it; fallback is not an error.
func FitLatency(samples []Sample, prior balancer.LatencyModel) (balancer.LatencyModel, FitInfo, error) {
	if err := checkPrior(prior); err != nil {
		return prior, FitInfo{}, err
	}
	q, rhoMax := quantileOf(prior), maxUtilOf(prior)
	s0 := 1.0
	if len(prior.ServiceTime) == 1 {
		s0 = prior.ServiceTime[0]
	}
	info := FitInfo{Samples: len(samples), ServiceTime: s0, Quantile: q}
	out := prior
	out.ServiceTime = []float64{s0}
	for i, s := range samples {
		if err := CheckSample(s); err != nil {
			return prior, info, fmt.Errorf("samples[%d].%w", i, err)
		}
	}
	if len(samples) == 0 {
		info.Fallback = fmt.Sprintf("no samples (need %d): kept the prior service time %g s", MinSamples, s0)
		return out, info, nil
	}
	// ln y_i − ln shape(ρ_i): the fit's data in log space.
	d := make([]float64, len(samples))
	info.UtilMin, info.UtilMax = math.Inf(1), math.Inf(-1)
	for i, s := range samples {
		d[i] = math.Log(s.Latency) - math.Log(shape(q, rhoMax, s.Util))
		info.UtilMin = math.Min(info.UtilMin, s.Util)
		info.UtilMax = math.Max(info.UtilMax, s.Util)
	}
	rms := func(theta float64) float64 {
		ss := 0.0
		for _, v := range d {
			ss += (theta - v) * (theta - v)
		}
		return math.Sqrt(ss / float64(len(d)))
	}
	switch {
	case len(samples) < MinSamples:
		info.Fallback = fmt.Sprintf("too few samples (%d < %d): kept the prior service time %g s", len(samples), MinSamples, s0)
	case info.UtilMax-info.UtilMin < MinUtilSpread:
		info.Fallback = fmt.Sprintf("utilizations span only %.3g (< %g): kept the prior service time %g s", info.UtilMax-info.UtilMin, MinUtilSpread, s0)
	}
	if info.Fallback != "" {
		info.RMSLogError = rms(math.Log(s0))
		return out, info, nil
	}

	n := float64(len(d))
	problem := optimize.Problem{
		Func: func(x []float64) float64 {
			ss := 0.0
			for _, v := range d {
				r := x[0] - v
				ss += r * r
			}
			return ss / n
		},
		Grad: func(g, x []float64) {
			sum := 0.0
			for _, v := range d {
				sum += x[0] - v
			}
			g[0] = 2 * sum / n
		},
	}
	settings := &optimize.Settings{GradientThreshold: 1e-12, MajorIterations: 200}
	res, err := optimize.Minimize(problem, []float64{math.Log(s0)}, settings, &optimize.LBFGS{})
	if err != nil || res == nil || math.IsNaN(res.X[0]) || math.IsInf(res.X[0], 0) {
		info.Fallback = fmt.Sprintf("optimizer failed (%v): kept the prior service time %g s", err, s0)
		info.RMSLogError = rms(math.Log(s0))
		return out, info, nil
	}
	s := math.Exp(res.X[0])
	if !(s > 0) || math.IsInf(s, 0) {
		info.Fallback = fmt.Sprintf("fitted service time %v is not usable: kept the prior service time %g s", s, s0)
		info.RMSLogError = rms(math.Log(s0))
		return out, info, nil
	}
	out.ServiceTime = []float64{s}
	info.Fitted = true
	info.ServiceTime = s
	info.RMSLogError = rms(res.X[0])
	info.Evaluations = res.Stats.FuncEvaluations
	return out, info, nil
}

// Assemble joins one fitted model per child (index = the balancer problem's
// child index) into the LatencyModel the balancer takes: ServiceTime[c] is
// child c's service time (1 when its model has none). The children's models
// must agree on Resource, Quantile and MaxUtil.
func Assemble(perChild []balancer.LatencyModel) (balancer.LatencyModel, error) {
	if len(perChild) == 0 {
		return balancer.LatencyModel{}, fmt.Errorf("models: no children: %w", interfaces.ErrInvalid)
	}
	out := balancer.LatencyModel{Resource: perChild[0].Resource, Quantile: perChild[0].Quantile, MaxUtil: perChild[0].MaxUtil}
	out.ServiceTime = make([]float64, len(perChild))
	for c, m := range perChild {
		if m.Resource != out.Resource || quantileOf(m) != quantileOf(out) || maxUtilOf(m) != maxUtilOf(out) {
			return balancer.LatencyModel{}, fmt.Errorf("models[%d]: resource, quantile and max_util must match child 0's (%q, %v, %v), got (%q, %v, %v): %w",
				c, out.Resource, quantileOf(out), maxUtilOf(out), m.Resource, quantileOf(m), maxUtilOf(m), interfaces.ErrInvalid)
		}
		if err := checkPrior(m); err != nil {
			return balancer.LatencyModel{}, fmt.Errorf("models[%d]: %w", c, err)
		}
		out.ServiceTime[c] = 1
		if len(m.ServiceTime) == 1 {
			out.ServiceTime[c] = m.ServiceTime[0]
		}
	}
	return out, nil
}

// LatencyEstimator is the online fit of one child: it keeps the last Capacity
// samples in a ring and fits them on demand. It is deterministic (the same
// samples in the same order give the same model) and not safe for concurrent
// use.
type LatencyEstimator struct {
	prior balancer.LatencyModel
	ring  []Sample
	next  int // where the next sample goes
	full  bool

	dirty bool
	model balancer.LatencyModel
	info  FitInfo
}

// NewLatencyEstimator returns an estimator that keeps the last capacity
// samples (at least MinSamples) and falls back to prior.
func NewLatencyEstimator(capacity int, prior balancer.LatencyModel) (*LatencyEstimator, error) {
	if capacity < MinSamples {
		return nil, fmt.Errorf("capacity: must be at least %d (MinSamples), got %d: %w", MinSamples, capacity, interfaces.ErrInvalid)
	}
	if err := checkPrior(prior); err != nil {
		return nil, err
	}
	return &LatencyEstimator{prior: prior, ring: make([]Sample, 0, capacity), dirty: true}, nil
}

// Add records a sample, evicting the oldest when the ring is full. A bad
// sample is refused with an error and not recorded.
func (e *LatencyEstimator) Add(s Sample) error {
	if err := CheckSample(s); err != nil {
		return fmt.Errorf("sample.%w", err)
	}
	if len(e.ring) < cap(e.ring) {
		e.ring = append(e.ring, s)
	} else {
		e.ring[e.next] = s
		e.full = true
	}
	e.next = (e.next + 1) % cap(e.ring)
	e.dirty = true
	return nil
}

// Len is the number of samples held.
func (e *LatencyEstimator) Len() int { return len(e.ring) }

// Samples returns the held samples, oldest first.
func (e *LatencyEstimator) Samples() []Sample {
	out := make([]Sample, 0, len(e.ring))
	if e.full {
		out = append(out, e.ring[e.next:]...)
		out = append(out, e.ring[:e.next]...)
		return out
	}
	return append(out, e.ring...)
}

// Model fits the held samples (once per change) and returns the model and how
// it was obtained.
func (e *LatencyEstimator) Model() (balancer.LatencyModel, FitInfo) {
	if e.dirty {
		m, info, err := FitLatency(e.Samples(), e.prior)
		if err != nil { // cannot happen: prior and samples were checked on entry
			m = e.prior
			info = FitInfo{Samples: len(e.ring), Fallback: err.Error()}
		}
		e.model, e.info, e.dirty = m, info, false
	}
	m := e.model
	m.ServiceTime = append([]float64(nil), e.model.ServiceTime...)
	return m, e.info
}

// LatencyEstimators keeps one LatencyEstimator per child of a tier instance,
// created on the child's first sample. Not safe for concurrent use.
type LatencyEstimators struct {
	capacity int
	prior    balancer.LatencyModel
	byChild  map[interfaces.ChildID]*LatencyEstimator
}

// NewLatencyEstimators returns per-child estimators that each keep the last
// capacity samples and fall back to prior.
func NewLatencyEstimators(capacity int, prior balancer.LatencyModel) (*LatencyEstimators, error) {
	if _, err := NewLatencyEstimator(capacity, prior); err != nil {
		return nil, err
	}
	return &LatencyEstimators{capacity: capacity, prior: prior, byChild: map[interfaces.ChildID]*LatencyEstimator{}}, nil
}

// Add records a sample of child.
func (e *LatencyEstimators) Add(child interfaces.ChildID, s Sample) error {
	if err := interfaces.ValidateID("child", string(child)); err != nil {
		return err
	}
	est := e.byChild[child]
	if est == nil {
		est, _ = NewLatencyEstimator(e.capacity, e.prior) // arguments checked by NewLatencyEstimators
	}
	if err := est.Add(s); err != nil {
		return fmt.Errorf("child %s: %w", child, err)
	}
	e.byChild[child] = est
	return nil
}

// Forget drops a child's samples (a child removed from the tier).
func (e *LatencyEstimators) Forget(child interfaces.ChildID) { delete(e.byChild, child) }

// Model returns the LatencyModel for a balancer problem whose children are
// children, in that order (balancer.Problem.ChildIDs): ServiceTime[c] is child
// c's fitted service time, or the prior's for a child without a usable fit;
// infos[c] says which.
func (e *LatencyEstimators) Model(children []interfaces.ChildID) (balancer.LatencyModel, []FitInfo) {
	per := make([]balancer.LatencyModel, len(children))
	infos := make([]FitInfo, len(children))
	for c, id := range children {
		if est := e.byChild[id]; est != nil {
			per[c], infos[c] = est.Model()
			continue
		}
		per[c], infos[c], _ = FitLatency(nil, e.prior) // prior checked on construction: no error
	}
	if len(children) == 0 {
		return e.prior, nil
	}
	m, err := Assemble(per)
	if err != nil { // cannot happen: every model derives from the same prior
		return e.prior, infos
	}
	return m, infos
}

// MinCalibrateSamples is the fewest samples Calibrate estimates from.
const MinCalibrateSamples = 3

// Calibrate is the fallback for a child whose samples FitLatency cannot fit
// (fewer than MinSamples, or utilizations spanning less than MinUtilSpread):
// with at least MinCalibrateSamples it returns the service time that makes
// the model's curve pass through the samples' geometric mean, exp(mean(ln y_i
// − ln shape(ρ_i))) — the least-squares optimum FitLatency converges to,
// taken without the spread rule. It says how fast the child is at the
// utilizations it was seen at, and predicts other utilizations only by the
// assumed M/M/1 shape, which is why FitLatency refuses it and a caller uses
// it only as a documented fallback (tiers: better than a prior of 1 s, the
// same for every child). With fewer samples the prior is kept, as by
// FitLatency; FitInfo.Fallback says which.
func Calibrate(samples []Sample, prior balancer.LatencyModel) (balancer.LatencyModel, FitInfo, error) {
	m, info, err := FitLatency(samples, prior)
	if err != nil || info.Fitted || len(samples) < MinCalibrateSamples {
		return m, info, err
	}
	q, rhoMax := quantileOf(prior), maxUtilOf(prior)
	sum := 0.0
	for _, s := range samples {
		sum += math.Log(s.Latency) - math.Log(shape(q, rhoMax, s.Util))
	}
	theta := sum / float64(len(samples))
	svc := math.Exp(theta)
	if !(svc > 0) || math.IsInf(svc, 0) {
		return m, info, nil
	}
	ss := 0.0
	for _, s := range samples {
		d := math.Log(s.Latency) - math.Log(shape(q, rhoMax, s.Util))
		ss += (theta - d) * (theta - d)
	}
	m.ServiceTime = []float64{svc}
	info.ServiceTime = svc
	info.RMSLogError = math.Sqrt(ss / float64(len(samples)))
	info.Fallback = fmt.Sprintf("%s; calibrated instead at the observed utilizations (%d samples in [%.3g, %.3g]): service time %.4g s", info.Fallback, len(samples), info.UtilMin, info.UtilMax, svc)
	return m, info, nil
}

// ServiceTime returns child's service time in seconds from its own samples:
// the fit (cached until a sample arrives), else Calibrate's estimate; ok is
// false when the child has fewer than MinCalibrateSamples samples and no fit.
func (e *LatencyEstimators) ServiceTime(child interfaces.ChildID) (svc float64, info FitInfo, ok bool) {
	est := e.byChild[child]
	if est == nil {
		return 0, FitInfo{Fallback: "no samples"}, false
	}
	m, info := est.Model()
	if info.Fitted {
		return m.ServiceTime[0], info, true
	}
	if est.Len() < MinCalibrateSamples {
		return 0, info, false
	}
	m, info, err := Calibrate(est.Samples(), e.prior)
	if err != nil || len(m.ServiceTime) != 1 {
		return 0, info, false
	}
	return m.ServiceTime[0], info, true
}
