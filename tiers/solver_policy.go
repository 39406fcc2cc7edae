package tiers

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/interfaces"
)

// SolverPolicy is a tier policy that plans with one of the balancer's solvers: it
// turns the view into a balancer.Problem, solves it and returns the plan. The
// built-in policies "greedy", "local" and "exact" are SolverPolicies; the default
// policy of the global and region tiers is "local".
type SolverPolicy struct {
	name   string
	solver string
	view   balancer.ViewOptions
	opts   balancer.Options
	goals  []balancer.Goal // DefaultGoals unless configured
	fits   *latencyFits
}

var _ interfaces.Policy = (*SolverPolicy)(nil)

// DefaultPolicy is the policy a tier uses when its configuration names none.
const DefaultPolicy = "local"

// solverPolicyKeys documents the configuration keys a SolverPolicy accepts.
var solverPolicyKeys = map[string]string{
	"headroom":           "fraction of every capacity kept free, in [0, 1)",
	"max_iterations":     "bound on improvement steps (0 = until a local optimum)",
	"kicks":              "perturbation restarts of the local solver (-1 none, 0 automatic)",
	"candidates":         "coldest children tried per shard by the local solver (0 = 8)",
	"node_limit":         "branch-and-bound node limit of the exact solver (0 = default)",
	"locality_label":     "child label naming its locality domain",
	"target_max_over_lb": "local solver: stop improving once every balanced resource's max/LB is at most this (0 = no target, else ≥ 1)",
	"goals":              "goal kinds, most important first, comma-separated, each optionally kind:weight (default " + strings.Join(DefaultGoals, ",") + ")",
	"latency_samples":    "(utilization, p99) samples kept per child for its latency model (default 64, at least 8)",
}

// NewSolverPolicy returns a policy named name that plans with the balancer solver
// of the same name, configured by cfg (keys: see PolicyKeys). Unknown keys and bad
// values are errors that name the key.
func NewSolverPolicy(name, solver string, cfg interfaces.PolicyConfig) (*SolverPolicy, error) {
	if _, err := balancer.SolverByName(solver); err != nil {
		return nil, err
	}
	p := &SolverPolicy{name: name, solver: solver, fits: &latencyFits{capacity: DefaultLatencySamples}}
	p.goals, _ = ParseGoals(strings.Join(DefaultGoals, ","))
	keys := make([]string, 0, len(cfg))
	for k := range cfg {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := cfg[k]
		var err error
		switch k {
		case "headroom":
			p.view.Headroom, err = strconv.ParseFloat(v, 64)
			if err == nil && (p.view.Headroom < 0 || p.view.Headroom >= 1) {
				err = fmt.Errorf("must be in [0, 1)")
			}
		case "max_iterations":
			p.opts.MaxIterations, err = nonNegInt(v)
		case "kicks":
			p.opts.Kicks, err = strconv.Atoi(v)
			if err == nil && p.opts.Kicks < -1 {
				err = fmt.Errorf("must be ≥ -1")
			}
		case "candidates":
			p.opts.Candidates, err = nonNegInt(v)
		case "node_limit":
			p.opts.NodeLimit, err = nonNegInt(v)
		case "target_max_over_lb":
			p.opts.TargetMaxOverLB, err = strconv.ParseFloat(v, 64)
			if err == nil && !balancer.ValidTargetMaxOverLB(p.opts.TargetMaxOverLB) {
				err = errors.New(balancer.TargetMaxOverLBRule)
			}
		case "locality_label":
			p.view.LocalityLabel = v
		case "goals":
			p.goals, err = ParseGoals(v)
		case "latency_samples":
			p.fits.capacity, err = strconv.Atoi(v)
			if err == nil && p.fits.capacity < 8 {
				err = fmt.Errorf("must be at least 8")
			}
		default:
			return nil, fmt.Errorf("policy %s: unknown key %q (known: %s): %w", name, k, strings.Join(PolicyKeys(), ", "), interfaces.ErrInvalid)
		}
		if err != nil {
			return nil, fmt.Errorf("policy %s: key %q: %v (got %q): %w", name, k, err, v, interfaces.ErrInvalid)
		}
	}
	return p, nil
}

func nonNegInt(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err == nil && n < 0 {
		err = fmt.Errorf("must be ≥ 0")
	}
	return n, err
}

// PolicyKeys lists the configuration keys of the solver policies, sorted.
func PolicyKeys() []string {
	keys := make([]string, 0, len(solverPolicyKeys))
	for k := range solverPolicyKeys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Name returns the policy's registered name.
func (p *SolverPolicy) Name() string { return p.name }

// Plan solves the view. The seed comes from the view; the solve ends early (with
// the best plan so far, Status Partial) when ctx is done, so callers bound a
// round's solve time with a context deadline and the policy never reads a clock.
func (p *SolverPolicy) Plan(ctx context.Context, v *interfaces.View) (interfaces.Plan, error) {
	prob, err := balancer.FromView(v, p.view)
	if err != nil {
		return interfaces.Plan{}, err
	}
	o := p.opts
	o.Seed = uint64(v.Seed)
	o.Latency, o.Goals = p.latency(v, prob)
	if ctx.Done() != nil {
		o.Deadline = func() bool { return ctx.Err() != nil }
	}
	res, err := balancer.Solve(p.solver, prob, o)
	if err != nil {
		return interfaces.Plan{}, err
	}
	return res.Plan(v.Tier), nil
}

func init() {
	for _, name := range []string{"greedy", "local", "exact"} {
		solver := name
		MustRegister(name, func(cfg interfaces.PolicyConfig) (interfaces.Policy, error) {
			return NewSolverPolicy(solver, solver, cfg)
		})
	}
}

// latency returns the latency model and the goals of a solve of v (problem
// prob). Each child's service time is estimated online from its reports
// (latencyFits: one (cpu utilization, p99) sample per report; a fit with
// balancer/models once the samples span enough utilizations, else a
// calibration at the utilizations seen, else the median of the children
// that have either). The latency_slo goal compares the predicted p99 with
// each shard's latency SLO: it is left out of the solve when no shard has
// an SLO or no child has been measured (predictions in seconds are then
// unknown; with nothing measured the latency goal ranks children in
// relative units, service time 1).
func (p *SolverPolicy) latency(v *interfaces.View, prob *balancer.Problem) (balancer.LatencyModel, []balancer.Goal) {
	lm, measured := p.fits.latencyFor(v, prob)
	var slo []float64
	if measured {
		byID := make(map[interfaces.ShardID]float64, len(v.Shards))
		for _, s := range v.Shards {
			if s.LatencySLO > 0 {
				byID[s.ID] = s.LatencySLO.Seconds()
			}
		}
		if len(byID) > 0 {
			slo = make([]float64, len(prob.ShardIDs))
			for i, id := range prob.ShardIDs {
				slo[i] = byID[id]
			}
		}
	}
	if slo == nil {
		goals := make([]balancer.Goal, 0, len(p.goals))
		for _, g := range p.goals {
			if g.Kind != balancer.GoalSLO {
				goals = append(goals, g)
			}
		}
		return lm, goals
	}
	lm.SLO = slo
	return lm, p.goals
}
