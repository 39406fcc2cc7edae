package control

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// Doctor stops a shard that keeps failing from being bounced forever.
//
//	detect    process failures (Failure: a start that failed, a process that
//	          died) per shard within window, counted per distinct child.
//	diagnose  a shard that failed on at least min(hosts, children not failed)
//	          distinct children within the window is poison: it fails
//	          wherever it goes. Fewer: the children it failed on are suspect.
//	resolve   poison: quarantine the shard with the evidence as the reason
//	          (not placed again until an operator releases it). Otherwise:
//	          keep it off the children it failed on for the window (a hard
//	          allowed-children constraint) and evict it if it sits on one.
type Doctor struct {
	Hosts  int           // ≥ 1; default 3
	Window time.Duration // > 0; default 10m

	fails map[interfaces.ShardID][]Failure
}

var _ Policy = (*Doctor)(nil)

func newDoctor(s PolicySettings) (Policy, error) {
	r := newSettings(PolicyDoctor, s)
	p := &Doctor{Hosts: r.int("hosts", 3, 1), Window: r.dur("window", 10*time.Minute)}
	if r.err == nil && p.Window == 0 {
		r.fail("window", "must be a duration > 0", "0s")
	}
	if err := r.done(); err != nil {
		return nil, err
	}
	p.fails = map[interfaces.ShardID][]Failure{}
	return p, nil
}

// Name is "doctor".
func (*Doctor) Name() string { return PolicyDoctor }

// Detect records the round's failures and lists every shard with failures in
// the window.
func (p *Doctor) Detect(in *PolicyInput) []Symptom {
	inView := make(map[interfaces.ShardID]bool, len(in.View.Shards))
	for i := range in.View.Shards {
		inView[in.View.Shards[i].ID] = true
	}
	for _, f := range in.Failures {
		if inView[f.Shard] {
			p.fails[f.Shard] = append(p.fails[f.Shard], f)
		}
	}
	ids := make([]interfaces.ShardID, 0, len(p.fails))
	for id, fs := range p.fails {
		keep := fs[:0]
		for _, f := range fs {
			if in.Now.Sub(f.At) < p.Window && !f.At.After(in.Now) {
				keep = append(keep, f)
			}
		}
		_, q := in.Quarantined[id]
		if len(keep) == 0 || q || !inView[id] {
			delete(p.fails, id) // expired, quarantined (a release starts afresh) or gone
			continue
		}
		p.fails[id] = keep
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	need := p.need(in.View)
	out := make([]Symptom, 0, len(ids))
	for _, id := range ids {
		hosts, ev := evidence(p.fails[id])
		out = append(out, Symptom{Policy: PolicyDoctor, Subject: string(id), Shard: id,
			Value: float64(len(hosts)), Reference: float64(need), Since: p.fails[id][0].At,
			Evidence: fmt.Sprintf("shard %s failed on %d distinct children within %v (%s)", id, len(hosts), p.Window, ev)})
	}
	return out
}

// need is how many distinct children a shard must fail on to be poison: Hosts,
// or every child that is not failed when there are fewer.
func (p *Doctor) need(v *interfaces.View) int {
	alive := 0
	for _, ch := range v.Children {
		if ch.State != interfaces.ChildFailed {
			alive++
		}
	}
	return max(1, min(p.Hosts, alive))
}

// evidence lists the distinct children of fs (sorted) and describes the last
// failure on each (at most 5, errors cut at 160 bytes).
func evidence(fs []Failure) ([]interfaces.ChildID, string) {
	last := map[interfaces.ChildID]Failure{}
	for _, f := range fs {
		if l, ok := last[f.Child]; !ok || !f.At.Before(l.At) {
			last[f.Child] = f
		}
	}
	hosts := make([]interfaces.ChildID, 0, len(last))
	for c := range last {
		hosts = append(hosts, c)
	}
	sort.Slice(hosts, func(i, j int) bool { return hosts[i] < hosts[j] })
	parts := make([]string, 0, 5)
	for i, c := range hosts {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("and %d more", len(hosts)-5))
			break
		}
		e := last[c].Error
		if len(e) > 160 {
			e = e[:160] + "…"
		}
		parts = append(parts, fmt.Sprintf("%s at %s: %s", c, last[c].At.UTC().Format("15:04:05.000"), e))
	}
	return hosts, strings.Join(parts, "; ")
}

// Diagnose: poison when the shard failed on enough distinct children.
func (p *Doctor) Diagnose(_ *PolicyInput, symptoms []Symptom) []Finding {
	out := make([]Finding, 0, len(symptoms))
	for _, s := range symptoms {
		f := Finding{Symptom: s, Diagnosis: fmt.Sprintf("failing (%d of %d children needed to call it poison)", int(s.Value), int(s.Reference))}
		if s.Value >= s.Reference {
			f.Diagnosis, f.Confirmed = "poison shard: it fails wherever it runs", true
		}
		out = append(out, f)
	}
	return out
}

// Resolve quarantines poison shards and keeps the others off the children
// they failed on.
func (p *Doctor) Resolve(in *PolicyInput, findings []Finding) Actions {
	var a Actions
	own, fl := effectiveOwners(in.View)
	var specs map[interfaces.ShardID]*interfaces.Shard
	group := map[string]int{} // excluded children → index of their constraint (-1: none possible)
	for i := range findings {
		f := &findings[i]
		if f.Confirmed && fl[f.Shard] {
			// A shard with a move in flight cannot be quarantined (the FSM
			// refuses it): keep the evidence and quarantine once it landed.
			f.Action = "quarantine once its move has landed"
			continue
		}
		if f.Confirmed {
			reason := "doctor: " + f.Evidence
			a.Quarantine = append(a.Quarantine, QuarantineAction{Shard: f.Shard, Reason: reason})
			a.Alerts = append(a.Alerts, Alert{Code: AlertQuarantine, Message: reason + ": quarantined until an operator releases it"})
			f.Action = "quarantine (release with 'strata shards release " + string(f.Shard) + "')"
			// Its evidence is used up: a release, even before the next
			// round, starts afresh.
			delete(p.fails, f.Shard)
			continue
		}
		hosts, _ := evidence(p.fails[f.Shard])
		ex := make(map[interfaces.ChildID]bool, len(hosts))
		for _, h := range hosts {
			ex[h] = true
		}
		// Shards that failed on the same children share one constraint.
		key := joinIDs(hosts)
		ci, seen := group[key]
		if !seen {
			allowed := allBut(in.View, ex)
			if len(allowed) == 0 {
				group[key] = -1
				continue
			}
			ci = len(a.Constraints)
			group[key] = ci
			a.Constraints = append(a.Constraints, interfaces.Constraint{Kind: interfaces.ConstraintAllowed, Children: allowed,
				Reason: fmt.Sprintf("doctor: failed on %s within %v; kept off it", key, p.Window)})
		}
		if ci < 0 {
			continue
		}
		a.Constraints[ci].Shards = append(a.Constraints[ci].Shards, f.Shard)
		f.Action = "keep it off " + key
		if specs == nil {
			specs = make(map[interfaces.ShardID]*interfaces.Shard, len(in.View.Shards))
			for j := range in.View.Shards {
				specs[in.View.Shards[j].ID] = &in.View.Shards[j]
			}
		}
		if c, ok := own[f.Shard]; ok && ex[c] && !fl[f.Shard] && canLeave(in.View, specs[f.Shard], ex) {
			a.Evict = append(a.Evict, Eviction{Shard: f.Shard, From: c, Reason: "doctor: " + f.Evidence})
			f.Action += "; move it off " + string(c)
		}
	}
	return a
}

// AlertQuarantine is raised when the doctor quarantines a shard.
const AlertQuarantine = "quarantine"
