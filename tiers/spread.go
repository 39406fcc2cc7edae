package tiers

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/strata-sched/strata/interfaces"
)

// Spread is the example custom tier policy: it spreads each job's shards evenly
// across the children (at most ⌈shards/children⌉ + slack of one job per child, an
// anti-affinity rule), then balances load with the local solver within that rule.
// A region whose children are racks uses it so that losing a rack costs every job
// only its share; the racks themselves balance their hosts with "local".
//
// Configuration: "slack" (extra shards of a job a child may hold above the even
// share, default 0) and every key of the solver policies.
type Spread struct {
	slack int
	inner *SolverPolicy
}

var _ interfaces.Policy = (*Spread)(nil)

// SpreadName is the registered name of the example policy.
const SpreadName = "spread"

func init() { MustRegister(SpreadName, NewSpread) }

// NewSpread builds the policy from cfg.
func NewSpread(cfg interfaces.PolicyConfig) (interfaces.Policy, error) {
	s := &Spread{}
	rest := interfaces.PolicyConfig{}
	for k, v := range cfg {
		if k == "slack" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("policy %s: key \"slack\": must be an integer ≥ 0 (got %q): %w", SpreadName, v, interfaces.ErrInvalid)
			}
			s.slack = n
			continue
		}
		rest[k] = v
	}
	inner, err := NewSolverPolicy(SpreadName, "local", rest)
	if err != nil {
		return nil, err
	}
	s.inner = inner
	return s, nil
}

// Name returns "spread".
func (s *Spread) Name() string { return SpreadName }

// Plan adds one anti-affinity constraint per job to the view's constraints and
// solves. The view itself is not modified.
func (s *Spread) Plan(ctx context.Context, v *interfaces.View) (interfaces.Plan, error) {
	active := 0
	for _, c := range v.Children {
		if c.State == interfaces.ChildActive {
			active++
		}
	}
	if active == 0 {
		return s.inner.Plan(ctx, v)
	}
	jobs := map[string][]interfaces.ShardID{}
	for _, sh := range v.Shards {
		jobs[sh.Job] = append(jobs[sh.Job], sh.ID)
	}
	names := make([]string, 0, len(jobs))
	for j := range jobs {
		names = append(names, j)
	}
	sort.Strings(names)
	w := *v
	w.Constraints = append([]interfaces.Constraint(nil), v.Constraints...)
	for _, j := range names {
		ids := jobs[j]
		if len(ids) < 2 {
			continue
		}
		limit := (len(ids)+active-1)/active + s.slack
		w.Constraints = append(w.Constraints, interfaces.Constraint{
			Kind: interfaces.ConstraintAntiAffinity, Shards: ids, Max: limit,
			Reason: fmt.Sprintf("spread job %s: at most %d of its %d shards per child", j, limit, len(ids)),
		})
	}
	return s.inner.Plan(ctx, &w)
}
