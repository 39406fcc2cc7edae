package control

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// Straggler finds a child whose shards of a job process markedly slower than
// the same job's shards on other children, and moves them away.
//
//	detect    per job and child: the median measured processing rate
//	          (records/s, ShardLoad.Rate in the owner's report) of the job's
//	          shards there, against the median of the job's shards on every
//	          other child (at least min_peers of them); a symptom when
//	          rate × factor < peers' rate. A shard's rate is size-adjusted
//	          when the job's shards declare input rates (Shard.InputRate):
//	          rate × (the job's median declared rate / the shard's), so a
//	          child that holds a skewed job's small shards is not mistaken for
//	          a slow one; with equal declared rates the figure is the rate.
//	diagnose  confirmed when the symptom has held for window (consecutive
//	          rounds; a round without it starts over).
//	resolve   the job's shards on that child are evicted this round and kept
//	          off it for cooldown (a hard allowed-children constraint: every
//	          other child); the evidence is the moves' reason and an alert.
type Straggler struct {
	Factor   float64       // > 1; default 2 (half the peers' rate or less)
	Window   time.Duration // ≥ 0; default 10s
	Cooldown time.Duration // ≥ 0; default 10m
	MinPeers int           // ≥ 1; default 2

	since map[stragglerKey]time.Time
	avoid map[stragglerKey]avoidRule
}

type stragglerKey struct {
	child interfaces.ChildID
	job   string
}

type avoidRule struct {
	until    time.Time
	evidence string
}

var _ Policy = (*Straggler)(nil)

func newStraggler(s PolicySettings) (Policy, error) {
	r := newSettings(PolicyStraggler, s)
	p := &Straggler{
		Factor:   r.float("factor", 2, func(x float64) bool { return x > 1 }, "must be a number > 1"),
		Window:   r.dur("window", 10*time.Second),
		Cooldown: r.dur("cooldown", 10*time.Minute),
		MinPeers: r.int("min_peers", 2, 1),
	}
	if err := r.done(); err != nil {
		return nil, err
	}
	p.since = map[stragglerKey]time.Time{}
	p.avoid = map[stragglerKey]avoidRule{}
	return p, nil
}

// Name is "straggler".
func (*Straggler) Name() string { return PolicyStraggler }

// Detect compares each child's rates per job with the job's rates elsewhere.
func (p *Straggler) Detect(in *PolicyInput) []Symptom {
	v := in.View
	own, fl := effectiveOwners(v)
	job := make(map[interfaces.ShardID]string, len(v.Shards))
	declared := make(map[interfaces.ShardID]float64, len(v.Shards))
	jobDeclared := map[string][]float64{}
	for i := range v.Shards {
		s := &v.Shards[i]
		job[s.ID] = s.Job
		if s.InputRate > 0 {
			declared[s.ID] = s.InputRate
			jobDeclared[s.Job] = append(jobDeclared[s.Job], s.InputRate)
		}
	}
	jobMedian := make(map[string]float64, len(jobDeclared))
	for j, rs := range jobDeclared {
		sort.Float64s(rs)
		jobMedian[j] = medianSorted(rs)
	}
	active := map[interfaces.ChildID]bool{}
	for _, ch := range v.Children {
		active[ch.ID] = ch.State == interfaces.ChildActive
	}
	// rates[job][child] = the measured rates of the job's shards on the child,
	// from the owner's own report only (a former owner's report is stale).
	rates := map[string]map[interfaces.ChildID][]float64{}
	children := make([]interfaces.ChildID, 0, len(v.Reports))
	for c := range v.Reports {
		children = append(children, c)
	}
	sort.Slice(children, func(i, j int) bool { return children[i] < children[j] })
	counted := map[interfaces.ShardID]bool{} // one rate per shard, however often listed
	for _, c := range children {
		for _, sl := range v.Reports[c].Shards {
			if own[sl.Shard] != c || fl[sl.Shard] || !(sl.Rate >= 0) || counted[sl.Shard] {
				continue
			}
			counted[sl.Shard] = true
			j, ok := job[sl.Shard]
			if !ok {
				continue
			}
			if rates[j] == nil {
				rates[j] = map[interfaces.ChildID][]float64{}
			}
			r := sl.Rate
			if d, m := declared[sl.Shard], jobMedian[j]; d > 0 && m > 0 {
				r *= m / d // size-adjusted
			}
			rates[j][c] = append(rates[j][c], r)
		}
	}
	jobs := make([]string, 0, len(rates))
	for j := range rates {
		jobs = append(jobs, j)
	}
	sort.Strings(jobs)
	var out []Symptom
	seen := map[stragglerKey]bool{}
	var all, peers []float64
	for _, j := range jobs {
		byChild := rates[j]
		cs := make([]interfaces.ChildID, 0, len(byChild))
		for c := range byChild {
			cs = append(cs, c)
		}
		sort.Slice(cs, func(a, b int) bool { return cs[a] < cs[b] })
		// The job's rates sorted once; a child's peers' median is computed
		// only when it can be a straggler: removing the child's k rates
		// from n leaves a median no higher than all[(n-k)/2 + k].
		all = all[:0]
		for _, c := range cs {
			all = append(all, byChild[c]...)
		}
		sort.Float64s(all)
		for _, c := range cs {
			if !active[c] {
				continue
			}
			own := byChild[c]
			npeers := len(all) - len(own)
			if npeers < p.MinPeers {
				continue
			}
			mine := median(own)
			if hi := all[min(len(all)-1, npeers/2+len(own))]; mine*p.Factor >= hi {
				continue
			}
			peers = excluding(peers[:0], all, own)
			ref := medianSorted(peers)
			if !(ref > 0) || mine*p.Factor >= ref {
				continue
			}
			k := stragglerKey{c, j}
			seen[k] = true
			since, ok := p.since[k]
			if !ok {
				since = in.Now
				p.since[k] = since
			}
			out = append(out, Symptom{Policy: PolicyStraggler, Subject: string(c) + "/" + j, Child: c, Job: j,
				Value: mine, Reference: ref, Since: since,
				Evidence: fmt.Sprintf("job %s on %s processes %.4g records/s per shard (median of %d shards) vs %.4g on %d shards elsewhere: %.2f× (threshold 1/%.4g), for %v",
					j, c, mine, len(own), ref, npeers, mine/ref, p.Factor, in.Now.Sub(since).Round(time.Millisecond))})
		}
	}
	for k := range p.since {
		if !seen[k] {
			delete(p.since, k) // the evidence window starts over
		}
	}
	return out
}

// Diagnose confirms the symptoms that lasted the window.
func (p *Straggler) Diagnose(in *PolicyInput, symptoms []Symptom) []Finding {
	out := make([]Finding, 0, len(symptoms))
	for _, s := range symptoms {
		f := Finding{Symptom: s, Diagnosis: "straggler"}
		f.Confirmed = in.Now.Sub(s.Since) >= p.Window
		if !f.Confirmed {
			f.Diagnosis = fmt.Sprintf("straggler suspected (evidence %v of %v)", in.Now.Sub(s.Since).Round(time.Millisecond), p.Window)
		}
		out = append(out, f)
	}
	return out
}

// Resolve evicts the job's shards from a confirmed straggler and keeps them
// off it for the cooldown; rules in force keep being sent to the solve.
func (p *Straggler) Resolve(in *PolicyInput, findings []Finding) Actions {
	var a Actions
	for i := range findings {
		f := &findings[i]
		if !f.Confirmed {
			continue
		}
		k := stragglerKey{f.Child, f.Job}
		p.avoid[k] = avoidRule{until: in.Now.Add(p.Cooldown), evidence: f.Evidence}
		f.Action = fmt.Sprintf("move the job's shards off %s; keep them off until %s", f.Child, in.Now.Add(p.Cooldown).UTC().Format(time.RFC3339))
		delete(p.since, k) // a fresh window if it comes back after the cooldown
	}
	if len(p.avoid) == 0 {
		return a
	}
	v := in.View
	own, fl := effectiveOwners(v)
	keys := make([]stragglerKey, 0, len(p.avoid))
	for k, r := range p.avoid {
		if !in.Now.Before(r.until) {
			delete(p.avoid, k)
			continue
		}
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].job != keys[j].job {
			return keys[i].job < keys[j].job
		}
		return keys[i].child < keys[j].child
	})
	// One constraint per job: its shards may use every child but the ones
	// they must avoid.
	exclude := map[string]map[interfaces.ChildID]bool{}
	why := map[string][]string{}
	for _, k := range keys {
		// An alert for as long as the rule holds.
		a.Alerts = append(a.Alerts, Alert{Code: AlertStraggler, Message: fmt.Sprintf("%s: job %s's shards kept off %s until %s",
			p.avoid[k].evidence, k.job, k.child, p.avoid[k].until.UTC().Format(time.RFC3339))})
		if exclude[k.job] == nil {
			exclude[k.job] = map[interfaces.ChildID]bool{}
		}
		exclude[k.job][k.child] = true
		why[k.job] = append(why[k.job], "straggler: "+p.avoid[k].evidence)
	}
	byJob := map[string][]interfaces.ShardID{}
	allowed := map[string][]interfaces.ChildID{}
	for j, ex := range exclude {
		allowed[j] = allBut(v, ex)
	}
	for i := range v.Shards {
		s := &v.Shards[i]
		ex := exclude[s.Job]
		if ex == nil || len(allowed[s.Job]) == 0 {
			continue // nowhere else to go: keep them where they are
		}
		byJob[s.Job] = append(byJob[s.Job], s.ID)
		if c, ok := own[s.ID]; ok && ex[c] && !fl[s.ID] && canLeave(v, s, ex) {
			a.Evict = append(a.Evict, Eviction{Shard: s.ID, From: c, Reason: "straggler: " + p.avoid[stragglerKey{c, s.Job}].evidence})
		}
	}
	jobs := make([]string, 0, len(byJob))
	for j := range byJob {
		jobs = append(jobs, j)
	}
	sort.Strings(jobs)
	for _, j := range jobs {
		a.Constraints = append(a.Constraints, interfaces.Constraint{Kind: interfaces.ConstraintAllowed, Shards: byJob[j], Children: allowed[j],
			Reason: strings.Join(why[j], "; ")})
	}
	return a
}

// excluding appends to dst the sorted values of all without one occurrence of
// each value of sub (all sorted; sub any order).
func excluding(dst, all, sub []float64) []float64 {
	ex := append([]float64(nil), sub...)
	sort.Float64s(ex)
	j := 0
	for _, x := range all {
		if j < len(ex) && x == ex[j] {
			j++
			continue
		}
		dst = append(dst, x)
	}
	return dst
}
