package interfaces

import (
	"context"
	"time"
)

// View is the read-only picture of one tier instance that a Policy plans from.
// Policies must not modify anything reachable from it.
type View struct {
	// Tier is the name of the tier ("global", "region", "rack", ...); Instance the
	// tier instance ("eu-1").
	Tier     string
	Instance string
	// Now is the time of the decision; policies never read a clock.
	Now time.Time
	// Seed is the seed for any randomness the policy uses.
	Seed int64
	// Children, Shards and Assignments describe the current state. Assignments
	// holds one entry per placed shard.
	Children    []Child
	Shards      []Shard
	Assignments []Assignment
	// InFlight moves have been decided but have not landed; policies count them as
	// done and never propose them again or undo them.
	InFlight []Move
	// Constraints are the tier-level rules in force (budgets from the parent,
	// operator constraints, constraints derived from children's hints).
	Constraints []Constraint
	// Reports are the children's latest reports, by child.
	Reports map[ChildID]Report
}

// Policy is the one small interface a scheduler implements to be a tier: given a
// view, return a plan. Plan must be deterministic for the same view (time and seed
// come in the view) and must not block on I/O. An infeasible placement is a Plan
// with Status Infeasible, not an error; an error means the policy itself failed.
type Policy interface {
	Name() string
	Plan(ctx context.Context, v *View) (Plan, error)
}

// Optional powers of a Policy, found by type assertion (as hashicorp/raft finds
// a BatchingFSM): a tier asks for them, never for a concrete type.

// PolicyHealth is what a HealthReporter says of itself.
type PolicyHealth struct {
	Healthy bool
	// Failures counts the calls that failed (and fell back) so far.
	Failures int
	// Describe is one line for people: "healthy", "not called yet",
	// "unhealthy: <last error>".
	Describe string
}

// HealthReporter is a policy that depends on something outside the tier (an
// out-of-process plugin) and can say whether that is healthy; the tier shows it
// in its status and metrics.
type HealthReporter interface {
	Health() PolicyHealth
}

// CallTimeouter is a policy whose calls have a time-out of their own (a
// plugin's RPC time-out); the tier warns when it cannot take effect under the
// round's solve time-out.
type CallTimeouter interface {
	CallTimeout() time.Duration
}

// PolicyConfig is the configuration a factory receives: the policy's own settings
// by key, as read from the tier chain's configuration.
type PolicyConfig map[string]string

// Factory builds a Policy from its configuration. Registries map names to
// factories.
type Factory func(cfg PolicyConfig) (Policy, error)

// Clock tells the time. The daemons use the wall clock; the simulator a virtual
// one. Code that must be deterministic takes the time as a value instead.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives the time once d has passed.
	After(d time.Duration) <-chan time.Time
}
