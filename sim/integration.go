package sim

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/tiers/coop"
)

// Integration modes decide what crosses a tier boundary besides assignments:
//
//   - decoupled: nothing; each tier plans alone from what it sees (the global
//     tier sees a region as the sum of its hosts).
//   - manual: the operator constraints of the policy spec, for the tier they
//     name, filtered per tier instance as the daemons filter theirs
//     (coop.InView): only the shards and children the instance has, and a
//     constraint left without what its kind needs is dropped (max_moves is
//     always kept).
//   - collaborative: tiers/coop. Each region derives hints from its hosts'
//     state (usable headroom below the target, a shed request for the load it
//     cannot keep below the target on any host, SLO at risk, avoid proposals
//     for shards it cannot place), the global tier turns them into constraints
//     for its own solve (coop.Derive, with its memory of held shards), and each
//     region's rounds get the move budget the global tier sends it. In a rack
//     chain a region does the same over its racks, as the daemons do over
//     tier-instance children: each rack derives hints from its hosts, the
//     region derives constraints from them and sends each rack a budget and a
//     target. The target utilization is 1 − reserve of the policy spec.
//
// The global tier's controller measures a child's utilization against its
// capacity in the view, so in collaborative mode the capacity limit of a region
// asked to shed load (coop.Derived.Shed, coop.LowerCapacities) also becomes its capacity in the
// global view: the region is seen as over its usable capacity and the round
// runs (the daemons' controller gets there through the SLO error of the
// region's p99).

// coopState is one engine's collaborative state, per parent tier instance
// (the global tier; in a rack chain each region too): its memory of held
// shards and the budgets and targets it last sent its children.
type coopState struct {
	mem  map[instanceKey]coop.Memory
	down map[instanceKey]map[interfaces.ChildID]coop.Down
}

// instanceKey names a tier instance by tier and name (a region may be named
// like a tier).
type instanceKey struct{ tier, name string }

// globalTier is the global tier's instance.
var globalTier = instanceKey{interfaces.TierGlobal, interfaces.TierGlobal}

// coop returns the engine's collaborative state, made on first use (only
// collaborative mode needs it).
func (e *engine) coop() *coopState {
	if e.coopSt == nil {
		e.coopSt = &coopState{mem: map[instanceKey]coop.Memory{}, down: map[instanceKey]map[interfaces.ChildID]coop.Down{}}
	}
	return e.coopSt
}

// sent is what parent last sent child (false when nothing).
func (st *coopState) sent(parent instanceKey, child interfaces.ChildID) (coop.Down, bool) {
	d, ok := st.down[parent][child]
	return d, ok
}

// parentOf is the tier instance above instance: the global tier above a
// region, its region above a rack (false for the global tier).
func (e *engine) parentOf(tier, instance string) (instanceKey, bool) {
	switch tier {
	case interfaces.TierRegion:
		return globalTier, true
	case TierRack:
		if k := e.w.rackIndex(instance); k >= 0 {
			return instanceKey{interfaces.TierRegion, e.w.regionName[e.w.rackRegion[k]]}, true
		}
	}
	return instanceKey{}, false
}

// coopConfig is the cooperation configuration of the engine's policy.
func (e *engine) coopConfig() coop.Config {
	return coop.Config{Target: 1 - e.spec.Reserve}
}

// regionHints returns the hints region r sends the global tier with its report
// rep, by integration mode: only a collaborative region sends any, derived by
// coop.ChildHints from the region's hosts and the shards it holds, with the
// target the global tier last sent it.
func (e *engine) regionHints(r int32, rep interfaces.Report, shards []int32) []interfaces.Hint {
	return e.childHints(globalTier, interfaces.TierRegion, rep.Child, e.w.regionHosts[r], shards)
}

// rackHints is regionHints for rack k of a rack chain, sent to its region.
func (e *engine) rackHints(k int32, rep interfaces.Report, shards []int32) []interfaces.Hint {
	return e.childHints(instanceKey{interfaces.TierRegion, e.w.regionName[e.w.rackRegion[k]]}, TierRack, rep.Child, e.w.rackHosts[k], shards)
}

// childHints are the hints tier instance child (of tier, under parent) sends
// up: coop.ChildHints over its hosts and shards, with the target parent last
// sent it.
func (e *engine) childHints(parent instanceKey, tier string, child interfaces.ChildID, hosts, shards []int32) []interfaces.Hint {
	if e.spec.Integration != Collaborative {
		return nil
	}
	cfg := e.coopConfig()
	if d, ok := e.coop().sent(parent, child); ok && d.Target > 0 {
		cfg.Target = d.Target
	}
	hs, err := coop.ChildHints(e.hintView(tier, string(child), hosts, shards), cfg)
	if err != nil {
		// The config is validated with the scenario (reserve ∈ [0, 0.9]), so
		// this is a bug; the round that builds the view reports it.
		e.viewFailed(fmt.Errorf("%s %s: hints: %w", tier, child, err))
		return nil
	}
	return hs
}

// hintView is a region's or rack's picture for its hints: its hosts in the
// state it knows them in (seenState: a failed host it has not declared failed
// yet is still active there, as in the daemons' baseView), with their current
// load and modeled p99 as reports, and shards — those its parent gave
// it and that are not leaving it (regionShards, rackShards) — placed on their
// hosts (in-flight host moves counted as done).
func (e *engine) hintView(tier, instance string, hosts, shards []int32) *interfaces.View {
	w := e.w
	v := &interfaces.View{Tier: tier, Instance: instance, Now: Epoch.Add(e.now), Reports: map[interfaces.ChildID]interfaces.Report{}}
	for _, h := range hosts {
		id := interfaces.ChildID(w.hostName[h])
		o := int(h) * nres
		capacity := interfaces.Load{CPU: w.hostCap[o], Mem: w.hostCap[o+1], Net: w.hostCap[o+2], Tasks: w.hostCap[o+3]}
		v.Children = append(v.Children, interfaces.Child{ID: id, Tier: interfaces.TierHost, Capacity: capacity, Labels: w.hostLabels[h], State: e.seenState(h)})
		u := interfaces.Load{CPU: e.hostLoad[o], Mem: e.hostLoad[o+1], Net: e.hostLoad[o+2], Tasks: e.hostLoad[o+3]}
		v.Reports[id] = interfaces.Report{Child: id, Capacity: capacity, Used: u, LatencyP99: time.Duration(e.hostLat[h] * float64(time.Millisecond))}
	}
	for _, i := range shards {
		v.Shards = append(v.Shards, e.shard(int(i), w.rcons[i]))
		h := e.host[i]
		if e.moveKind[i] == moveHost {
			h = e.moveTo[i]
		}
		if h >= 0 {
			v.Assignments = append(v.Assignments, interfaces.Assignment{Shard: w.shardID[i], Child: interfaces.ChildID(w.hostName[h]), Epoch: e.epochH[i]})
		}
	}
	return v
}

// regionShards lists, per region, the active shards the global tier gave it and
// that are not leaving it, in index order: one pass for all the regions' hints
// of a global round (nil outside collaborative mode, which sends none).
func (e *engine) regionShards() [][]int32 {
	if e.spec.Integration != Collaborative {
		return nil
	}
	out := make([][]int32, len(e.w.regionName))
	for i, act := range e.w.active {
		if r := e.region_[i]; act && r >= 0 && e.moveKind[i] != moveRegion {
			out[r] = append(out[r], int32(i))
		}
	}
	return out
}

// rackShards is regionShards for the racks of region r: per rack of r (in
// order), the active shards the region gave it and that are not leaving it.
func (e *engine) rackShards(r int32) [][]int32 {
	if e.spec.Integration != Collaborative {
		return nil
	}
	racks := e.w.regionRacks[r]
	out := make([][]int32, len(racks))
	for i, act := range e.w.active {
		if k := e.rack_[i]; act && e.region_[i] == r && k >= 0 && e.moveKind[i] != moveRegion && e.moveKind[i] != moveRack {
			out[k-racks[0]] = append(out[k-racks[0]], int32(i))
		}
	}
	return out
}

// constraints returns the tier-level constraints for a view by integration
// mode (see the comment at the top of this file). In collaborative mode, at a
// tier over regions or racks (the global tier; a region in a rack chain), it
// also lowers a child's capacity in v to a derived capacity limit.
func (e *engine) constraints(tier string, v *interfaces.View) []interfaces.Constraint {
	// In every mode, a tier over groups of hosts keeps shards off the
	// children none of whose hosts can hold them (their capacity shapes), as
	// the daemons do: what a hierarchy without runtime hints knows.
	out := coop.ShapeRules(v)
	switch e.spec.Integration {
	case Manual:
		// The operator constraints of the tier, as written (a job names its
		// shards in v), filtered to what this instance holds as the daemons
		// filter them (coop.InView).
		var cs []interfaces.Constraint
		for _, spec := range e.spec.Constraints {
			if spec.Tier != tier {
				continue
			}
			c := interfaces.Constraint{Limit: spec.Limit.Load(), Max: spec.Max, MaxBytes: int64(spec.MaxBytes), Reason: "operator constraint"}
			c.Kind, _ = interfaces.ParseConstraintKind(spec.Kind) // validated with the scenario
			for _, ch := range spec.Children {
				c.Children = append(c.Children, interfaces.ChildID(ch))
			}
			for _, id := range spec.Shards {
				c.Shards = append(c.Shards, interfaces.ShardID(id))
			}
			if spec.Job != "" {
				for _, s := range v.Shards {
					if s.Job == spec.Job {
						c.Shards = append(c.Shards, s.ID)
					}
				}
			}
			cs = append(cs, c)
		}
		out = coop.InView(v, cs)
	case Collaborative:
		st := e.coop()
		// A region's or rack's rounds get the budget its parent sent it, for
		// relocations: a round whose view has shards to place or evacuate
		// (coop.NeedsPlacement) has none — the balancer counts first
		// placements against max_moves — as the daemons' parentBudget.
		if parent, ok := e.parentOf(v.Tier, v.Instance); ok {
			if d, ok := st.sent(parent, interfaces.ChildID(v.Instance)); ok && d.MaxMoves > 0 && !coop.NeedsPlacement(v) {
				from := "the global tier"
				if parent != globalTier {
					from = "region " + parent.name
				}
				out = append(out, interfaces.Constraint{Kind: interfaces.ConstraintMaxMoves, Max: d.MaxMoves, Reason: "budget from " + from + ": " + d.Reason})
			}
		}
		if len(v.Children) == 0 || v.Children[0].Tier == interfaces.TierHost {
			// A tier over hosts measures them directly and derives nothing
			// from them (as the daemons do).
			return out
		}
		self := instanceKey{v.Tier, v.Instance}
		d, err := coop.Derive(v, e.coopConfig(), st.mem[self])
		if err != nil {
			e.viewFailed(fmt.Errorf("%s %s: deriving limits for its children: %w", v.Tier, v.Instance, err))
			return out
		}
		st.mem[self] = d.Memory
		down := make(map[interfaces.ChildID]coop.Down, len(d.Down))
		for _, x := range d.Down {
			down[x.Child] = x
		}
		st.down[self] = down
		coop.LowerCapacities(v, d.Shed)
		out = append(out, d.Constraints...)
	}
	return out
}

// viewFailed records err as the first error met while building a view.
func (e *engine) viewFailed(err error) {
	if e.viewErr == nil {
		e.viewErr = err
	}
}

// Versus compares two policies of a run (the versus assertion).
//
// Utilization spread is how far the busiest host runs above the mean: max/mean
// − 1 of host utilization in the assertion's resource, where max and mean are
// taken across live hosts at every tick and the ratio is averaged over every
// tick of the run (Summary.MaxOverMean − 1; 0 is perfectly even). "spread
// better by x" means spread(policy) ≤ (1 − x) · spread(baseline); "p99 lower by
// y" means the modeled p99 latency over all records of the run, p99(policy) ≤
// (1 − y) · p99(baseline).
type Versus struct {
	Policy         string  `json:"policy"`
	Baseline       string  `json:"baseline"`
	Resource       string  `json:"resource"`
	SpreadPolicy   float64 `json:"spread_policy"`
	SpreadBaseline float64 `json:"spread_baseline"`
	SpreadBetter   float64 `json:"spread_better"` // 1 − spread(policy)/spread(baseline)
	P99Policy      float64 `json:"p99_policy_ms"`
	P99Baseline    float64 `json:"p99_baseline_ms"`
	P99Lower       float64 `json:"p99_lower"` // 1 − p99(policy)/p99(baseline)
}

// UtilSpread is a summary's utilization spread in resource r: MaxOverMean − 1
// (see Versus).
func UtilSpread(s Summary, r string) float64 {
	m, ok := s.MaxOverMean[r]
	if !ok {
		return 0
	}
	return round4(m - 1)
}

// Compare computes the versus figures of policy against baseline from their
// summaries; ok is false when either did not run.
func (r *Result) Compare(policy, baseline, resource string) (Versus, bool) {
	var p, b *Summary
	for k := range r.Policies {
		switch r.Policies[k].Summary.Policy {
		case policy:
			p = &r.Policies[k].Summary
		case baseline:
			b = &r.Policies[k].Summary
		}
	}
	if p == nil || b == nil {
		return Versus{}, false
	}
	vs := Versus{Policy: policy, Baseline: baseline, Resource: resource,
		SpreadPolicy: UtilSpread(*p, resource), SpreadBaseline: UtilSpread(*b, resource),
		P99Policy: p.LatencyP99MS, P99Baseline: b.LatencyP99MS}
	if vs.SpreadBaseline > 0 {
		vs.SpreadBetter = round4(1 - vs.SpreadPolicy/vs.SpreadBaseline)
	}
	if vs.P99Baseline > 0 {
		vs.P99Lower = round4(1 - vs.P99Policy/vs.P99Baseline)
	}
	return vs, true
}

// versusResults evaluates the versus assertions of sc on r, after all policies
// ran. A versus assertion whose policies did not both run (strata sim run
// with one policy) passes as skipped and says so.
func versusResults(sc *Scenario, r *Result) []AssertionResult {
	var out []AssertionResult
	for i, a := range sc.Assertions {
		if a.Kind != AssertVersus {
			continue
		}
		res := a.Resource
		if res == "" {
			res = interfaces.CPU
		}
		ar := AssertionResult{Policy: a.Policy + " vs " + a.Baseline, Index: i, Line: a.line, Kind: a.Kind, Passed: true, Limit: a.SpreadBetter}
		vs, ok := r.Compare(a.Policy, a.Baseline, res)
		if !ok {
			ar.Message = fmt.Sprintf("versus: skipped, %s and %s did not both run (use strata sim compare)", a.Policy, a.Baseline)
			out = append(out, ar)
			continue
		}
		ar.Value = vs.SpreadBetter
		var fails []string
		if a.SpreadBetter > 0 && !(vs.SpreadBetter >= a.SpreadBetter) {
			fails = append(fails, fmt.Sprintf("spread better by %.1f%%, want ≥ %.1f%%", 100*vs.SpreadBetter, 100*a.SpreadBetter))
		}
		if a.P99Lower > 0 && !(vs.P99Lower >= a.P99Lower) {
			fails = append(fails, fmt.Sprintf("p99 lower by %.1f%%, want ≥ %.1f%%", 100*vs.P99Lower, 100*a.P99Lower))
		}
		figures := fmt.Sprintf("%s spread (max/mean−1) %.4g vs %.4g: %.1f%% better; modeled p99 %.4gms vs %.4gms: %.1f%% lower",
			res, vs.SpreadPolicy, vs.SpreadBaseline, 100*vs.SpreadBetter, vs.P99Policy, vs.P99Baseline, 100*vs.P99Lower)
		var goals []string
		if a.SpreadBetter > 0 {
			goals = append(goals, fmt.Sprintf("spread ≥ %.0f%% better", 100*a.SpreadBetter))
		}
		if a.P99Lower > 0 {
			goals = append(goals, fmt.Sprintf("p99 ≥ %.0f%% lower", 100*a.P99Lower))
		}
		want := fmt.Sprintf("versus %s against %s (%s)", a.Policy, a.Baseline, strings.Join(goals, ", "))
		if len(fails) == 0 {
			ar.Message = fmt.Sprintf("%s: held: %s", want, figures)
		} else {
			sort.Strings(fails)
			ar.Passed = false
			ar.Message = fmt.Sprintf("%s: FAILED (%s): %s", want, strings.Join(fails, "; "), figures)
		}
		out = append(out, ar)
	}
	return out
}

// checkVersus validates a versus assertion: two different policies of the
// scenario, fractions in [0, 1) with at least one above 0, a built-in
// resource, and no window (the figures are whole-run).
func (sc *Scenario) checkVersus(path []any, a Assertion, names map[string]bool) error {
	for _, f := range []struct{ key, name string }{{"policy", a.Policy}, {"baseline", a.Baseline}} {
		if f.name == "" {
			return sc.fail(append(path, f.key), "is required for versus")
		}
		if !names[f.name] {
			return sc.fail(append(path, f.key), "policy %q is not in policies", f.name)
		}
	}
	if a.Policy == a.Baseline {
		return sc.fail(append(path, "baseline"), "must differ from policy (both %q)", a.Policy)
	}
	if a.Resource != "" {
		if _, ok := resourceIndex(a.Resource); !ok {
			return sc.fail(append(path, "resource"), "must be cpu, mem, net or tasks (got %q)", a.Resource)
		}
	}
	for _, f := range []struct {
		key string
		x   float64
	}{{"spread_better", a.SpreadBetter}, {"p99_lower", a.P99Lower}} {
		if !(f.x >= 0 && f.x < 1) {
			return sc.fail(append(path, f.key), "must be a fraction in [0, 1) (got %v)", f.x)
		}
	}
	if a.SpreadBetter == 0 && a.P99Lower == 0 {
		return sc.fail(path, "versus needs spread_better or p99_lower above 0")
	}
	if a.From != 0 || a.To != sc.Duration || len(a.Policies) > 0 {
		return sc.fail(path, "versus compares whole runs: from, to and policies do not apply")
	}
	return nil
}
