package balancer

import (
	"fmt"
	"math"
	"sort"

	"github.com/strata-sched/strata/interfaces"
)

// zeroCapInv is used as 1/capacity for a zero capacity: any load on a resource a
// child lacks shows as a huge (finite) utilization.
const zeroCapInv = 1e12

var negInf = math.Inf(-1)

// GoalValue is one goal's unweighted value for an assignment.
type GoalValue struct {
	Goal  Goal
	Value float64
}

// Objective is an assignment's value broken down per goal and per priority level.
// Lower is better; compare two with Compare.
type Objective struct {
	// Goals holds each goal's unweighted value, in the order of Options.Goals.
	Goals []GoalValue
	// Priorities are the distinct goal priorities, ascending (most important
	// first); Levels[i] is Σ weight×value of the goals at Priorities[i].
	Priorities []int
	Levels     []float64
}

// Total is the sum of the levels: a single number for reports. Solvers compare
// objectives lexicographically (Compare), not by Total.
func (o Objective) Total() float64 {
	t := 0.0
	for _, l := range o.Levels {
		t += l
	}
	return t
}

// Value returns the unweighted value of the first goal of the given kind, and
// whether there is one.
func (o Objective) Value(kind string) (float64, bool) {
	for _, g := range o.Goals {
		if g.Goal.Kind == kind {
			return g.Value, true
		}
	}
	return 0, false
}

// Compare compares two objectives built from the same goals lexicographically by
// level: -1 when a is better (lower), +1 when b is better, 0 when every level is
// within tol of the other (relative to max(1, |level|)).
func Compare(a, b Objective, tol float64) int {
	for i := range a.Levels {
		if i >= len(b.Levels) {
			break
		}
		x, y := a.Levels[i], b.Levels[i]
		scale := math.Max(1, math.Max(math.Abs(x), math.Abs(y)))
		if x < y-tol*scale {
			return -1
		}
		if x > y+tol*scale {
			return 1
		}
	}
	return 0
}

// levelsOf sorts the distinct priorities of goals and maps each goal to its level.
func levelsOf(goals []Goal) (prios []int, level []int) {
	for _, g := range goals {
		found := false
		for _, p := range prios {
			if p == g.Priority {
				found = true
			}
		}
		if !found {
			prios = append(prios, g.Priority)
		}
	}
	sort.Ints(prios)
	level = make([]int, len(goals))
	for i, g := range goals {
		level[i] = sort.SearchInts(prios, g.Priority)
	}
	return prios, level
}

// goalResources returns the resource indices a goal applies to.
func goalResources(p *Problem, g Goal) []int {
	if g.Resources == nil {
		out := make([]int, len(p.Resources))
		for i := range out {
			out[i] = i
		}
		return out
	}
	out := make([]int, 0, len(g.Resources))
	for _, r := range g.Resources {
		out = append(out, p.resourceIndex(r))
	}
	return out
}

func checkAssignment(p *Problem, assign []int32) error {
	if len(assign) != p.NumShards() {
		return invalid("assignment", fmt.Sprintf("must have one entry per shard (%d)", p.NumShards()), len(assign))
	}
	for s, c := range assign {
		if c < -1 || int(c) >= p.NumChildren() {
			return notFound(fmt.Sprintf("assignment[%d] (shard %q)", s, p.ShardIDs[s]), c)
		}
	}
	return nil
}

// childLoads sums the load of every child under assign (M×R).
func childLoads(p *Problem, assign []int32) []float64 {
	R := p.NumResources()
	load := make([]float64, p.NumChildren()*R)
	for s, c := range assign {
		if c < 0 {
			continue
		}
		for r := 0; r < R; r++ {
			load[int(c)*R+r] += p.Load[s*R+r]
		}
	}
	return load
}

func util(load, capacity float64) float64 {
	if capacity > 0 {
		return load / capacity
	}
	return load * zeroCapInv
}

// totals returns, per resource, Σ load over all shards and Σ capacity over the
// active (not drained) children.
func totals(p *Problem) (sumLoad, sumCap []float64) {
	R := p.NumResources()
	sumLoad = make([]float64, R)
	for s := 0; s < p.NumShards(); s++ {
		for r := 0; r < R; r++ {
			sumLoad[r] += p.Load[s*R+r]
		}
	}
	sumCap, _ = activeCapacity(p)
	return sumLoad, sumCap
}

// activeCapacity returns, per resource, the capacity of the children that are
// not drained, and how many they are.
func activeCapacity(p *Problem) (sumCap []float64, active int) {
	R := p.NumResources()
	sumCap = make([]float64, R)
	for c := 0; c < p.NumChildren(); c++ {
		if p.Drained(c) {
			continue
		}
		active++
		for r := 0; r < R; r++ {
			sumCap[r] += p.Capacity[c*R+r]
		}
	}
	return sumCap, active
}

// latencyParams resolves the latency model's defaults.
type latencyParams struct {
	res    int
	svc    []float64 // per child
	lnq    float64   // ln(1/(1-q))
	rhoMax float64
}

func newLatencyParams(p *Problem, m LatencyModel) latencyParams {
	lp := latencyParams{res: 0}
	if m.Resource != "" {
		lp.res = p.resourceIndex(m.Resource)
	} else if i := p.resourceIndex(interfaces.CPU); i >= 0 {
		lp.res = i
	}
	lp.svc = make([]float64, p.NumChildren())
	for c := range lp.svc {
		switch len(m.ServiceTime) {
		case 0:
			lp.svc[c] = 1
		case 1:
			lp.svc[c] = m.ServiceTime[0]
		default:
			lp.svc[c] = m.ServiceTime[c]
		}
	}
	q := m.Quantile
	if q == 0 {
		q = 0.99
	}
	lp.lnq = math.Log(1 / (1 - q))
	lp.rhoMax = m.MaxUtil
	if lp.rhoMax == 0 {
		lp.rhoMax = 0.95
	}
	return lp
}

// predict returns the predicted latency quantile of child c at utilization rho.
func (lp *latencyParams) predict(c int, rho float64) float64 {
	k := lp.svc[c] * lp.lnq
	if rho <= lp.rhoMax {
		return k / (1 - rho)
	}
	// Tangent at rhoMax: f(x) = f(m) + f'(m)(x-m), f'(x) = k/(1-x)².
	d := 1 - lp.rhoMax
	return k/d + k/(d*d)*(rho-lp.rhoMax)
}

// domainDist returns the locality cost of placing a shard of domain sd on a child
// of domain cd.
func (p *Problem) domainDist(sd, cd int32) float64 {
	if sd < 0 || cd < 0 {
		return 0
	}
	if p.DomainDist == nil {
		if sd == cd {
			return 0
		}
		return 1
	}
	D := int(math.Sqrt(float64(len(p.DomainDist))) + 0.5)
	return p.DomainDist[int(sd)*D+int(cd)]
}

// localityCost is shard s's locality cost on child c (unnormalized).
func (p *Problem) localityCost(s int, c int32) float64 {
	if c < 0 {
		return 0
	}
	v := 0.0
	if p.ShardDomain != nil {
		v += p.domainDist(p.ShardDomain[s], p.ChildDomain[c])
	}
	if p.Avoid != nil {
		for _, a := range p.Avoid[s] {
			if a == c {
				v++
			}
		}
	}
	return v
}

// meanBytes is the mean state size, or 1 when every shard is stateless.
func meanBytes(p *Problem) float64 {
	if p.StateBytes == nil || p.NumShards() == 0 {
		return 1
	}
	t := 0.0
	for _, b := range p.StateBytes {
		t += float64(b)
	}
	if t == 0 {
		return 1
	}
	return t / float64(p.NumShards())
}

// Evaluate returns the objective of assign (a child index per shard, -1 =
// unplaced) under the goals of o, computed from scratch. It is the reference the
// solvers' incremental scoring is tested against. Migration is measured against
// p.Current.
func Evaluate(p *Problem, o Options, assign []int32) (Objective, error) {
	if p == nil {
		return Objective{}, invalid("problem", "is required", nil)
	}
	if err := p.Validate(); err != nil {
		return Objective{}, err
	}
	if err := o.check(p); err != nil {
		return Objective{}, err
	}
	goals, err := o.goals(p)
	if err != nil {
		return Objective{}, err
	}
	if err := checkAssignment(p, assign); err != nil {
		return Objective{}, err
	}
	return evaluate(p, goals, o.Latency, assign), nil
}

func evaluate(p *Problem, goals []Goal, lm LatencyModel, assign []int32) Objective {
	R, M, N := p.NumResources(), p.NumChildren(), p.NumShards()
	load := childLoads(p, assign)
	sumLoad, sumCap := totals(p)
	prios, level := levelsOf(goals)
	obj := Objective{Goals: make([]GoalValue, len(goals)), Priorities: prios, Levels: make([]float64, len(prios))}
	for gi, g := range goals {
		v := 0.0
		rs := goalResources(p, g)
		switch g.Kind {
		case GoalThreshold:
			for c := 0; c < M; c++ {
				for _, r := range rs {
					v += math.Max(0, util(load[c*R+r], p.Capacity[c*R+r])-g.Threshold)
				}
			}
		case GoalBalanceMinMax:
			for _, r := range rs {
				mx := 0.0
				for c := 0; c < M; c++ {
					mx = math.Max(mx, util(load[c*R+r], p.Capacity[c*R+r]))
				}
				v += mx
			}
		case GoalBalanceSq:
			for _, r := range rs {
				if sumLoad[r] == 0 || sumCap[r] == 0 {
					continue
				}
				norm := sumLoad[r] * sumLoad[r] / sumCap[r]
				t := 0.0
				for c := 0; c < M; c++ {
					l := load[c*R+r]
					t += l * util(l, p.Capacity[c*R+r])
				}
				v += t/norm - 1
			}
		case GoalLatency:
			lp := newLatencyParams(p, lm)
			r := lp.res
			if sumLoad[r] > 0 {
				for c := 0; c < M; c++ {
					l := load[c*R+r]
					if l > 0 {
						v += lp.predict(c, util(l, p.Capacity[c*R+r])) * l / sumLoad[r]
					}
				}
			}
		case GoalSLO:
			v = sloValue(p, lm, load, assign)
		case GoalShortfall:
			for _, r := range rs {
				if sumLoad[r] == 0 {
					continue
				}
				t := 0.0
				for c := 0; c < M; c++ {
					t += math.Max(0, load[c*R+r]-p.Capacity[c*R+r])
				}
				v += t / sumLoad[r]
			}
		case GoalLocality:
			if N > 0 {
				for s := 0; s < N; s++ {
					v += p.localityCost(s, assign[s])
				}
				v /= float64(N)
			}
		case GoalMigration:
			if N > 0 {
				mb := meanBytes(p)
				for s := 0; s < N; s++ {
					if assign[s] != p.Current[s] && assign[s] >= 0 {
						v += (1 + float64(p.Bytes(s))/mb) / 2
					}
				}
				v /= float64(N)
			}
		}
		obj.Goals[gi] = GoalValue{Goal: g, Value: v}
		obj.Levels[level[gi]] += g.Weight * v
	}
	return obj
}

// Violation is one broken hard constraint.
type Violation struct {
	// Constraint is one of the Constraint* names.
	Constraint string
	// Shard and Child are indices, -1 when not applicable.
	Shard, Child int
	// Resource is set for capacity violations.
	Resource interfaces.Resource
	Detail   string
}

func (v Violation) String() string { return v.Constraint + ": " + v.Detail }

// capTolerance is the relative slack CheckHard allows on capacity, for the
// rounding of sums taken in different orders. Solvers check without it.
const capTolerance = 1e-9

// CheckHard lists every hard constraint assign breaks: capacity with headroom,
// pins, allowed children, anti-affinity limits, drained/failed children holding
// shards, locked (in-flight) shards moved, unplaced shards, and the move budget
// (count and bytes, measured against p.Current). It returns nil when assign is
// feasible. p must be valid (see Validate); a malformed assign is reported as a
// violation, never a panic.
func CheckHard(p *Problem, assign []int32) []Violation {
	var out []Violation
	if p == nil {
		return []Violation{{Constraint: "assignment", Shard: -1, Child: -1, Detail: "no problem given"}}
	}
	if err := checkAssignment(p, assign); err != nil {
		return []Violation{{Constraint: "assignment", Shard: -1, Child: -1, Detail: err.Error()}}
	}
	R, M := p.NumResources(), p.NumChildren()
	load := childLoads(p, assign)
	for c := 0; c < M; c++ {
		for r := 0; r < R; r++ {
			lim := p.Limit(c, r)
			if load[c*R+r] > lim*(1+capTolerance)+1e-300 {
				out = append(out, Violation{Constraint: ConstraintCapacity, Shard: -1, Child: c, Resource: p.Resources[r],
					Detail: fmt.Sprintf("child %q carries %g %s, above its usable capacity %g", p.ChildIDs[c], load[c*R+r], p.Resources[r], lim)})
			}
		}
	}
	groupCount := map[[2]int]int{}
	moves, bytes := 0, int64(0)
	for s, c := range assign {
		id := p.ShardIDs[s]
		if c < 0 {
			out = append(out, Violation{Constraint: ConstraintUnplaced, Shard: s, Child: -1, Detail: fmt.Sprintf("shard %q has no child", id)})
			continue
		}
		if c != p.Current[s] {
			moves++
			bytes += p.Bytes(s)
			if p.IsLocked(s) {
				out = append(out, Violation{Constraint: ConstraintInFlight, Shard: s, Child: int(c), Detail: fmt.Sprintf("shard %q has an in-flight move to %q and was moved", id, p.ChildIDs[p.Current[s]])})
			}
		}
		if pin := p.PinOf(s); pin >= 0 && int(c) != pin {
			out = append(out, Violation{Constraint: ConstraintPin, Shard: s, Child: int(c), Detail: fmt.Sprintf("shard %q is pinned to %q but is on %q", id, p.ChildIDs[pin], p.ChildIDs[c])})
		} else if !p.AllowedOn(s, int(c)) {
			out = append(out, Violation{Constraint: ConstraintAllowed, Shard: s, Child: int(c), Detail: fmt.Sprintf("shard %q is not allowed on %q", id, p.ChildIDs[c])})
		}
		if p.Drained(int(c)) {
			out = append(out, Violation{Constraint: ConstraintDrain, Shard: s, Child: int(c), Detail: fmt.Sprintf("shard %q is on %s child %q", id, p.ChildState[c], p.ChildIDs[c])})
		}
		if p.Groups != nil {
			for _, g := range p.Groups[s] {
				groupCount[[2]int{int(g), int(c)}]++
			}
		}
	}
	keys := make([][2]int, 0, len(groupCount))
	for k := range groupCount {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	for _, k := range keys {
		if n := groupCount[k]; n > int(p.GroupLimit[k[0]]) {
			out = append(out, Violation{Constraint: ConstraintAntiAffinity, Shard: -1, Child: k[1],
				Detail: fmt.Sprintf("child %q holds %d shards of group %s, limit %d", p.ChildIDs[k[1]], n, p.groupName(k[0]), p.GroupLimit[k[0]])})
		}
	}
	if p.MaxMoves > 0 && moves > p.MaxMoves {
		out = append(out, Violation{Constraint: ConstraintMaxMoves, Shard: -1, Child: -1, Detail: fmt.Sprintf("%d moves, budget %d", moves, p.MaxMoves)})
	}
	if p.MaxBytes > 0 && bytes > p.MaxBytes {
		out = append(out, Violation{Constraint: ConstraintMaxBytes, Shard: -1, Child: -1, Detail: fmt.Sprintf("%d state bytes moved, budget %d", bytes, p.MaxBytes)})
	}
	return out
}

func (p *Problem) groupName(g int) string {
	if p.GroupNames != nil && g < len(p.GroupNames) {
		return fmt.Sprintf("%q", p.GroupNames[g])
	}
	return fmt.Sprintf("#%d", g)
}

// LowerBound returns, per resource, a lower bound on the busiest child's
// utilization that any placement can reach (DESIGN.md §1), refined by what the
// problem fixes:
//
//	LB_r = max( Σ_s load_sr / Σ_{active c} cap_cr,
//	            max_s load_sr / max_{c allowed for s} cap_cr,
//	            max_c fixed_cr / cap_cr )
//
// It returns nil for an invalid problem (see Validate). Here drained children
// are not active, fixed_cr is the load of shards that
// cannot leave c (pinned to c, or locked there by an in-flight move), and the
// load fixed on drained children is left out of the first sum.
func LowerBound(p *Problem) map[interfaces.Resource]float64 {
	if p == nil || p.Validate() != nil {
		return nil
	}
	lb := lowerBound(p)
	out := make(map[interfaces.Resource]float64, len(lb))
	for r, v := range lb {
		out[p.Resources[r]] = v
	}
	return out
}

func lowerBound(p *Problem) []float64 {
	R, M, N := p.NumResources(), p.NumChildren(), p.NumShards()
	sumLoad, sumCap := totals(p)
	lb := make([]float64, R)
	maxCap := make([]float64, R)
	for c := 0; c < M; c++ {
		if p.Drained(c) {
			continue
		}
		for r := 0; r < R; r++ {
			maxCap[r] = math.Max(maxCap[r], p.Capacity[c*R+r])
		}
	}
	fixed := make([]float64, M*R)
	for s := 0; s < N; s++ {
		fc := -1
		if p.IsLocked(s) {
			fc = int(p.Current[s])
		} else if pin := p.PinOf(s); pin >= 0 {
			fc = pin
		}
		if fc >= 0 {
			for r := 0; r < R; r++ {
				fixed[fc*R+r] += p.Load[s*R+r]
				if p.Drained(fc) {
					// Held by a drained child: not spread over the active ones.
					sumLoad[r] -= p.Load[s*R+r]
				}
			}
			continue
		}
		restricted := p.Allowed != nil && p.Allowed[s] != nil
		for r := 0; r < R; r++ {
			l := p.Load[s*R+r]
			if l == 0 {
				continue
			}
			best := maxCap[r]
			if restricted {
				best = 0
				for _, c := range p.Allowed[s] {
					if !p.Drained(int(c)) {
						best = math.Max(best, p.Capacity[int(c)*R+r])
					}
				}
			}
			lb[r] = math.Max(lb[r], util(l, best))
		}
	}
	for r := 0; r < R; r++ {
		if sumLoad[r] > 0 {
			lb[r] = math.Max(lb[r], util(sumLoad[r], sumCap[r]))
		}
	}
	for c := 0; c < M; c++ {
		for r := 0; r < R; r++ {
			if f := fixed[c*R+r]; f > 0 {
				lb[r] = math.Max(lb[r], util(f, p.Capacity[c*R+r]))
			}
		}
	}
	return lb
}
