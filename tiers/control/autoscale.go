package control

import (
	"fmt"
	"sort"
	"time"

	"github.com/strata-sched/strata/balancer/models"
	"github.com/strata-sched/strata/interfaces"
)

// Autoscale sizes jobs with DS2's model (balancer/models.AdviseJob) on measured
// rates. It runs at the global tier only (where whole jobs live); elsewhere it
// does nothing.
//
//	detect    per job: the target input rate is the sum of its shards'
//	          measured input rates (the declared rate where no report has one);
//	          the true processing rate per shard is rate_per_shard when set,
//	          else the median measured processing rate of the job's shards
//	          (DS2's observed rate equals the true rate for a busy shard, so
//	          without a measure of busy time this under-estimates an idle job's
//	          capacity and advises fewer shards — set rate_per_shard when
//	          known). A symptom when the advice differs from the shard count.
//	diagnose  confirmed when the same direction held for window.
//	resolve   a Resize: in mode report only recorded (status and explain show
//	          it); in mode apply the count moves toward the advice by at most
//	          max_step shards, at most once per cooldown per job.
type Autoscale struct {
	Mode         string        // report | apply; default report
	MaxStep      int           // ≥ 1; default 2
	Cooldown     time.Duration // ≥ 0; default 5m
	Window       time.Duration // ≥ 0; default 30s
	RatePerShard float64       // records/s; 0 = estimate from measurements
	MinShards    int           // ≥ 1; default 1
	MaxShards    int           // ≥ MinShards; default 1024

	since   map[string]time.Time // job → first round the advice differed (same direction)
	dir     map[string]int
	applied map[string]time.Time
}

var _ Policy = (*Autoscale)(nil)

// Autoscale modes.
const (
	AutoscaleReport = "report"
	AutoscaleApply  = "apply"
)

func newAutoscale(s PolicySettings) (Policy, error) {
	r := newSettings(PolicyAutoscale, s)
	p := &Autoscale{
		Mode:         r.oneOf("mode", AutoscaleReport, AutoscaleReport, AutoscaleApply),
		MaxStep:      r.int("max_step", 2, 1),
		Cooldown:     r.dur("cooldown", 5*time.Minute),
		Window:       r.dur("window", 30*time.Second),
		RatePerShard: r.float("rate_per_shard", 0, func(x float64) bool { return x >= 0 }, "must be a number ≥ 0 (0: estimate from measured rates)"),
		MinShards:    r.int("min_shards", 1, 1),
		MaxShards:    r.int("max_shards", 1024, 1),
	}
	if r.err == nil && p.MaxShards < p.MinShards {
		r.fail("max_shards", fmt.Sprintf("must be ≥ min_shards (%d)", p.MinShards), fmt.Sprint(p.MaxShards))
	}
	if err := r.done(); err != nil {
		return nil, err
	}
	p.since, p.dir, p.applied = map[string]time.Time{}, map[string]int{}, map[string]time.Time{}
	return p, nil
}

// Name is "autoscale".
func (*Autoscale) Name() string { return PolicyAutoscale }

// Detect advises every job and reports those whose advice differs.
func (p *Autoscale) Detect(in *PolicyInput) []Symptom {
	v := in.View
	if v.Tier != interfaces.TierGlobal {
		return nil
	}
	own, _ := effectiveOwners(v)
	measured := map[interfaces.ShardID]interfaces.ShardLoad{}
	for c, r := range v.Reports {
		for _, sl := range r.Shards {
			if own[sl.Shard] == c {
				measured[sl.Shard] = sl
			}
		}
	}
	type jobRates struct {
		inputs []float64
		rates  []float64
	}
	jobs := map[string]*jobRates{}
	var names []string
	for i := range v.Shards {
		s := &v.Shards[i]
		j := jobs[s.Job]
		if j == nil {
			j = &jobRates{}
			jobs[s.Job] = j
			names = append(names, s.Job)
		}
		in := s.InputRate
		if m, ok := measured[s.ID]; ok {
			if m.InputRate > 0 {
				in = m.InputRate
			}
			if m.Rate > 0 {
				j.rates = append(j.rates, m.Rate)
			}
		}
		j.inputs = append(j.inputs, in)
	}
	sort.Strings(names)
	var out []Symptom
	seen := map[string]bool{}
	for _, name := range names {
		j := jobs[name]
		per, src := p.RatePerShard, "rate_per_shard"
		if per == 0 {
			per, src = median(j.rates), fmt.Sprintf("median measured rate of %d shards", len(j.rates))
		}
		if !(per > 0) {
			continue
		}
		adv, err := models.AdviseJob(j.inputs, per)
		if err != nil {
			continue
		}
		advised := max(p.MinShards, min(p.MaxShards, adv.Advised))
		d := sign(advised - adv.Current)
		if d == 0 {
			continue
		}
		seen[name] = true
		if p.dir[name] != d {
			p.dir[name], p.since[name] = d, in.Now
		}
		out = append(out, Symptom{Policy: PolicyAutoscale, Subject: name, Job: name, Value: float64(adv.Current), Reference: float64(advised), Since: p.since[name],
			Evidence: fmt.Sprintf("job %s: input %.4g records/s, %.4g records/s per shard (%s): DS2 advises %d shards (exact %.2f), it has %d (utilization %.2f)",
				name, adv.TargetInput, per, src, advised, adv.Exact, adv.Current, adv.Utilization)})
	}
	for name := range p.dir {
		if !seen[name] {
			delete(p.dir, name)
			delete(p.since, name)
		}
	}
	return out
}

func sign(x int) int {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return 0
}

// Diagnose confirms advice that held for the window.
func (p *Autoscale) Diagnose(in *PolicyInput, symptoms []Symptom) []Finding {
	out := make([]Finding, 0, len(symptoms))
	for _, s := range symptoms {
		f := Finding{Symptom: s}
		if s.Reference > s.Value {
			f.Diagnosis = "under-provisioned"
		} else {
			f.Diagnosis = "over-provisioned"
		}
		f.Confirmed = in.Now.Sub(s.Since) >= p.Window
		out = append(out, f)
	}
	return out
}

// Resolve records each confirmed recommendation; in mode apply it also asks
// for a bounded resize once per cooldown.
func (p *Autoscale) Resolve(in *PolicyInput, findings []Finding) Actions {
	var a Actions
	for i := range findings {
		f := &findings[i]
		if !f.Confirmed {
			continue
		}
		cur, adv := int(f.Value), int(f.Reference)
		step := max(-p.MaxStep, min(p.MaxStep, adv-cur))
		r := Resize{Job: f.Job, Current: cur, Advised: adv, Target: cur, Reason: "autoscale: " + f.Evidence}
		last, done := p.applied[f.Job]
		switch {
		case p.Mode != AutoscaleApply:
			f.Action = fmt.Sprintf("recommend %d shards (mode report: not applied)", adv)
		case done && in.Now.Sub(last) < p.Cooldown:
			f.Action = fmt.Sprintf("recommend %d shards (cooling down until %s)", adv, last.Add(p.Cooldown).UTC().Format(time.RFC3339))
		default:
			r.Target, r.Apply = cur+step, true
			p.applied[f.Job] = in.Now
			f.Action = fmt.Sprintf("resize %d → %d shards (advice %d, at most %d per step)", cur, cur+step, adv, p.MaxStep)
		}
		a.Resize = append(a.Resize, r)
	}
	return a
}
