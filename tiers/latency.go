package tiers

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/balancer/models"
	"github.com/strata-sched/strata/interfaces"
)

// DefaultGoals is the goal list of the solver policies, most important first
// (configuration key "goals"): capacity threshold, then SLO risk (the
// predicted p99 of a shard's child above its latency SLO), then balance
// (min-max, then the finer sum of squares), the load-weighted predicted
// latency, shortfall, locality and migration. The SLO risk is 0 while every
// prediction is within its SLO, so it acts only where an SLO is at risk, and
// there it comes before fine-grained balance.
var DefaultGoals = []string{
	balancer.GoalThreshold, balancer.GoalSLO, balancer.GoalBalanceMinMax, balancer.GoalBalanceSq,
	balancer.GoalLatency, balancer.GoalShortfall, balancer.GoalLocality, balancer.GoalMigration,
}

// DefaultLatencySamples is how many (utilization, p99) samples per child the
// latency estimate keeps (configuration key "latency_samples").
const DefaultLatencySamples = 64

// ParseGoals reads a goal list: kinds separated by commas, most important
// first, each optionally with a weight ("latency_slo:2"). Each kind gets its
// own priority (1, 2, …). An unknown or repeated kind, or a bad weight, is an
// error naming the entry.
func ParseGoals(s string) ([]balancer.Goal, error) {
	var out []balancer.Goal
	seen := map[string]bool{}
	for i, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		kind, w, hasW := strings.Cut(f, ":")
		g := balancer.Goal{Kind: kind, Priority: i + 1, Weight: 1}
		if !slices.Contains(balancer.GoalKinds(), kind) {
			return nil, fmt.Errorf("goals[%d]: unknown goal %q (known: %s)", i, kind, strings.Join(balancer.GoalKinds(), ", "))
		}
		if seen[kind] {
			return nil, fmt.Errorf("goals[%d]: %q is listed twice", i, kind)
		}
		seen[kind] = true
		if hasW {
			x, err := strconv.ParseFloat(w, 64)
			if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || x <= 0 {
				return nil, fmt.Errorf("goals[%d]: weight %q of %s must be a finite number > 0", i, w, kind)
			}
			g.Weight = x
		}
		if kind == balancer.GoalThreshold {
			g.Threshold = 0.8
		}
		out = append(out, g)
	}
	return out, nil
}

// latencyFits is a solver policy's online latency estimate: per tier instance
// and child, the last samples of (utilization of cpu, measured p99) taken
// from the children's reports, one per report sequence number. Plan may be
// called for several instances at once (the hierarchy benchmark plans regions
// in parallel), hence the lock and the per-instance state; each instance's
// estimate depends only on the reports it was shown, in order.
type latencyFits struct {
	mu       sync.Mutex
	capacity int
	byInst   map[string]*instanceFits
}

type instanceFits struct {
	est  *models.LatencyEstimators
	seen map[interfaces.ChildID]uint64 // last report sequence number sampled
}

// latencyFor observes v's reports and returns the latency model for problem
// p (its children's order) and whether any child's speed is known in seconds
// (fitted or calibrated from its own samples, see Plan).
func (lf *latencyFits) latencyFor(v *interfaces.View, p *balancer.Problem) (balancer.LatencyModel, bool) {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	if lf.byInst == nil {
		lf.byInst = map[string]*instanceFits{}
	}
	key := v.Tier + "/" + v.Instance
	in := lf.byInst[key]
	if in == nil {
		est, err := models.NewLatencyEstimators(lf.capacity, balancer.LatencyModel{})
		if err != nil { // capacity validated with the config
			return balancer.LatencyModel{}, false
		}
		in = &instanceFits{est: est, seen: map[interfaces.ChildID]uint64{}}
		lf.byInst[key] = in
	}
	ids := make([]interfaces.ChildID, 0, len(v.Reports))
	for id := range v.Reports {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	for _, id := range ids {
		rep := v.Reports[id]
		if last, ok := in.seen[id]; ok && last == rep.Epoch {
			continue
		}
		in.seen[id] = rep.Epoch
		capCPU := rep.Capacity.CPU
		if capCPU <= 0 {
			continue
		}
		u := rep.Used.CPU / capCPU
		lat := rep.LatencyP99.Seconds()
		if !(lat > 0) || !(u >= 0) || u > models.MaxSampleUtil {
			continue
		}
		_ = in.est.Add(id, models.Sample{Util: u, Latency: lat}) // checked above
	}
	// Per child: a fit, else a calibration at the utilizations seen, else
	// (below) the median of the children that have either.
	svc := make([]float64, len(p.ChildIDs))
	var known []float64
	for c, id := range p.ChildIDs {
		s, _, ok := in.est.ServiceTime(id)
		if !ok {
			continue
		}
		svc[c] = s
		known = append(known, s)
	}
	if len(known) == 0 {
		return balancer.LatencyModel{}, false
	}
	sort.Float64s(known)
	med := known[len(known)/2]
	if len(known)%2 == 0 {
		med = (known[len(known)/2-1] + known[len(known)/2]) / 2
	}
	for c := range svc {
		if svc[c] == 0 {
			svc[c] = med
		}
	}
	return balancer.LatencyModel{ServiceTime: svc}, true
}
