package balancer

import (
	"fmt"
	"math"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// Goal kinds (the soft goals). Their formulas are in the package documentation.
const (
	GoalThreshold     = "threshold"      // utilization above a threshold
	GoalBalanceMinMax = "balance_minmax" // Σ_r max_c u_cr (lexicographic min-max)
	GoalBalanceSq     = "balance_sq"     // capacity-weighted sum of squared utilizations
	GoalLatency       = "latency"        // predicted tail latency from a queueing model
	GoalSLO           = "latency_slo"    // predicted tail latency above each shard's latency SLO
	GoalShortfall     = "shortfall"      // load above capacity (becomes lag)
	GoalLocality      = "locality"       // network distance to the shard's home domain, avoided children
	GoalMigration     = "migration"      // moves and state bytes moved
)

// Hard-constraint names, used in Violation.Constraint, in Move.Goal when a
// constraint forced a move, and in Infeasible explanations.
const (
	ConstraintCapacity     = "capacity"
	ConstraintPin          = "pin"
	ConstraintAllowed      = "allowed"
	ConstraintAntiAffinity = "anti_affinity"
	ConstraintDrain        = "drain"     // the child is draining or failed
	ConstraintInFlight     = "in_flight" // the shard has an in-flight move
	ConstraintMaxMoves     = "max_moves"
	ConstraintMaxBytes     = "max_bytes"
	ConstraintUnplaced     = "unplaced" // the shard has no child
)

var goalKinds = []string{GoalThreshold, GoalBalanceMinMax, GoalBalanceSq, GoalLatency, GoalSLO, GoalShortfall, GoalLocality, GoalMigration}

// GoalKinds lists the soft goals' kinds, for configuration and messages.
func GoalKinds() []string { return append([]string(nil), goalKinds...) }

// Goal is one weighted soft goal at a priority.
//
// Priority semantics: lower numbers are more important. The objective is the
// vector of per-priority sums Σ weight×value, compared lexicographically: a plan
// is better when its first differing level is lower. Solvers never accept a
// change that worsens a more important level to improve a less important one, so
// a lower-priority goal never makes a higher-priority goal worse.
type Goal struct {
	Kind     string
	Priority int
	// Weight multiplies the goal's value within its priority level; 0 means 1.
	Weight float64
	// Resources restricts the goal to these resources; nil means all of the
	// problem's resources. Ignored by latency (see LatencyModel.Resource),
	// locality and migration.
	Resources []interfaces.Resource
	// Threshold is the utilization above which the threshold goal counts load;
	// 0 means 0.8.
	Threshold float64
}

// DefaultGoals returns the goals in DESIGN.md §4 order: threshold (0.8),
// min-max balance, sum-of-squares balance, latency, shortfall, locality,
// migration, at priorities 1..7 with weight 1.
func DefaultGoals() []Goal {
	return []Goal{
		{Kind: GoalThreshold, Priority: 1, Weight: 1, Threshold: 0.8},
		{Kind: GoalBalanceMinMax, Priority: 2, Weight: 1},
		{Kind: GoalBalanceSq, Priority: 3, Weight: 1},
		{Kind: GoalLatency, Priority: 4, Weight: 1},
		{Kind: GoalShortfall, Priority: 5, Weight: 1},
		{Kind: GoalLocality, Priority: 6, Weight: 1},
		{Kind: GoalMigration, Priority: 7, Weight: 1},
	}
}

// LatencyModel predicts each child's tail latency from its utilization with an
// M/M/1 queue: the q-quantile of the sojourn time at utilization ρ is
// S·ln(1/(1-q))/(1-ρ), where S is the child's mean service time. Beyond MaxUtil
// the curve continues along its tangent, so it stays finite and convex. The
// parameters are inputs (fitting them from observations is done elsewhere).
type LatencyModel struct {
	// Resource whose utilization is ρ; "" means the first of the problem's
	// resources that is named "cpu", else the first resource.
	Resource interfaces.Resource
	// ServiceTime is the mean service time per child in seconds: nil means 1 for
	// every child (relative units), one value applies to all.
	ServiceTime []float64
	// Quantile is q; 0 means 0.99.
	Quantile float64
	// MaxUtil is where the tangent extension starts; 0 means 0.95.
	MaxUtil float64
	// SLO is each shard's latency SLO in seconds, for the slo goal (N values,
	// problem order; 0 = the shard has none); nil means no shard has one.
	// The slo goal compares the child's predicted latency (in seconds: the
	// ServiceTime values must then be seconds too, e.g. fitted by
	// balancer/models) with it.
	SLO []float64
}

// Options are the soft goals and the controls of one solve. The zero value uses
// DefaultGoals and no budgets.
type Options struct {
	// Goals; nil means DefaultGoals().
	Goals []Goal
	// Latency parameterizes the latency goal.
	Latency LatencyModel
	// Seed makes a solve repeatable: same problem, options and seed → same plan
	// (as long as no time budget or deadline cut the solve short).
	Seed uint64

	// TimeBudget bounds the solve's duration. It needs Now, which the caller
	// provides (the library never reads a clock): the bench command and daemons
	// pass time.Now, tests pass a fake. 0 means no time budget.
	TimeBudget time.Duration
	Now        func() time.Time
	// Deadline, when set, is polled now and then; returning true ends the solve
	// with the best plan found so far (Status Partial).
	Deadline func() bool
	// MaxIterations bounds the improvement steps of iterative solvers; 0 means
	// unlimited (until a local optimum or another budget ends the solve).
	MaxIterations int

	// Kicks is the number of seeded perturbation restarts the local solver tries
	// after reaching a local optimum (iterated local search; the best plan is
	// kept). 0 means automatic (more for small problems), -1 none.
	Kicks int
	// Candidates is how many of the coldest feasible children the local solver
	// tries per shard taken from a hot child; 0 means 8.
	Candidates int
	// NodeLimit bounds the branch-and-bound nodes of the exact solver; 0 means its
	// default. When hit, the result is not proven optimal.
	NodeLimit int
	// TargetMaxOverLB, when > 0 (it must then be ≥ 1), is a stopping rule of the
	// local solver: its improvement ends as soon as every balanced resource's
	// busiest child is at most this many times the resource's LB (the repair of
	// forced shards always runs to the end). 0 means no target.
	TargetMaxOverLB float64
}

// goals returns the goals to use and checks them.
func (o *Options) goals(p *Problem) ([]Goal, error) {
	gs := o.Goals
	if gs == nil {
		gs = DefaultGoals()
	}
	out := make([]Goal, len(gs))
	for i, g := range gs {
		known := false
		for _, k := range goalKinds {
			if g.Kind == k {
				known = true
			}
		}
		if !known {
			return nil, invalid(fmt.Sprintf("goals[%d].kind", i), fmt.Sprintf("must be one of %v", goalKinds), fmt.Sprintf("%q", g.Kind))
		}
		if math.IsNaN(g.Weight) || math.IsInf(g.Weight, 0) || g.Weight < 0 {
			return nil, invalid(fmt.Sprintf("goals[%d].weight", i), "must be a finite number ≥ 0 (0 = 1)", g.Weight)
		}
		if g.Weight == 0 {
			g.Weight = 1
		}
		if math.IsNaN(g.Threshold) || g.Threshold < 0 {
			return nil, invalid(fmt.Sprintf("goals[%d].threshold", i), "must be ≥ 0 (0 = 0.8)", g.Threshold)
		}
		if g.Threshold == 0 {
			g.Threshold = 0.8
		}
		for _, r := range g.Resources {
			if p.resourceIndex(r) < 0 {
				return nil, invalid(fmt.Sprintf("goals[%d].resources", i), fmt.Sprintf("must name resources of the problem %v", p.Resources), fmt.Sprintf("%q", r))
			}
		}
		out[i] = g
	}
	return out, nil
}

func (p *Problem) resourceIndex(r interfaces.Resource) int {
	for i, x := range p.Resources {
		if x == r {
			return i
		}
	}
	return -1
}

// check validates the options that do not depend on goals.
func (o *Options) check(p *Problem) error {
	if o.TimeBudget < 0 {
		return invalid("time_budget", "must be ≥ 0", o.TimeBudget)
	}
	if o.TimeBudget > 0 && o.Now == nil {
		return invalid("now", "is required with a time budget (the balancer never reads the clock)", nil)
	}
	if o.MaxIterations < 0 {
		return invalid("max_iterations", "must be ≥ 0 (0 = unlimited)", o.MaxIterations)
	}
	if o.Kicks < -1 {
		return invalid("kicks", "must be ≥ -1", o.Kicks)
	}
	if o.Candidates < 0 {
		return invalid("candidates", "must be ≥ 0 (0 = 8)", o.Candidates)
	}
	if o.NodeLimit < 0 {
		return invalid("node_limit", "must be ≥ 0", o.NodeLimit)
	}
	if t := o.TargetMaxOverLB; !ValidTargetMaxOverLB(t) {
		return invalid("target_max_over_lb", TargetMaxOverLBRule, t)
	}
	l := o.Latency
	if l.Resource != "" && p.resourceIndex(l.Resource) < 0 {
		return invalid("latency.resource", fmt.Sprintf("must name a resource of the problem %v", p.Resources), fmt.Sprintf("%q", l.Resource))
	}
	if len(l.ServiceTime) > 1 && len(l.ServiceTime) != p.NumChildren() {
		return invalid("latency.service_time", fmt.Sprintf("must have 0, 1 or %d (children) values", p.NumChildren()), len(l.ServiceTime))
	}
	for _, v := range l.ServiceTime {
		if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
			return invalid("latency.service_time", "must be finite and > 0", v)
		}
	}
	if math.IsNaN(l.Quantile) || l.Quantile < 0 || l.Quantile >= 1 {
		return invalid("latency.quantile", "must be in [0, 1) (0 = 0.99)", l.Quantile)
	}
	if math.IsNaN(l.MaxUtil) || l.MaxUtil < 0 || l.MaxUtil >= 1 {
		return invalid("latency.max_util", "must be in [0, 1) (0 = 0.95)", l.MaxUtil)
	}
	if l.SLO != nil && len(l.SLO) != p.NumShards() {
		return invalid("latency.slo", fmt.Sprintf("must have 0 or %d (shards) values", p.NumShards()), len(l.SLO))
	}
	for _, v := range l.SLO {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return invalid("latency.slo", "must be finite and ≥ 0 (0 = none)", v)
		}
	}
	return nil
}

// TargetMaxOverLBRule is the rule for Options.TargetMaxOverLB, for messages.
const TargetMaxOverLBRule = "must be 0 (none) or a finite number ≥ 1"

// ValidTargetMaxOverLB reports whether t is a valid Options.TargetMaxOverLB.
func ValidTargetMaxOverLB(t float64) bool {
	return !math.IsNaN(t) && !math.IsInf(t, 0) && (t == 0 || t >= 1)
}
