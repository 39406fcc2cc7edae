package interfaces

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"
)

// ShardID names a shard. It is unique across the whole fleet.
type ShardID string

// ChildID names a child of a tier instance: a region, a host, a slot, or a group of
// a custom tier.
type ChildID string

// Epoch is a fencing number that grows on every change of a shard's owner. A child
// ignores any message that carries an epoch older than the one it holds.
type Epoch uint64

// Built-in tier names. Custom tiers use their own names.
const (
	TierGlobal = "global"
	TierRegion = "region"
	TierHost   = "host"
)

// Shard is the unit of placement: a slice of a streaming job.
type Shard struct {
	ID  ShardID
	Job string
	// Load is the shard's demand per resource.
	Load Load
	// InputRate is the rate of records arriving for this shard, per second.
	InputRate float64
	// StateBytes is the size of the shard's state; moving the shard costs it.
	StateBytes int64
	// LatencySLO is the shard's target p99 processing latency; 0 means none.
	LatencySLO time.Duration
	// Constraints restrict where the shard may be placed.
	Constraints ShardConstraints
}

// Equal reports whether s and o describe the same shard: every field,
// constraints included (Allowed compared in order, Labels as a map). It is the
// one spec comparison: a host agent and a tier's uplink both use it to tell a
// re-sent Assign from a changed spec.
func (s Shard) Equal(o Shard) bool {
	if s.ID != o.ID || s.Job != o.Job || !s.Load.Equal(o.Load) || s.InputRate != o.InputRate ||
		s.StateBytes != o.StateBytes || s.LatencySLO != o.LatencySLO {
		return false
	}
	return s.Constraints.Equal(o.Constraints)
}

// Equal reports whether c and o are the same rules.
func (c ShardConstraints) Equal(o ShardConstraints) bool {
	if c.Pinned != o.Pinned || c.AntiAffinity != o.AntiAffinity || c.MaxPerChild != o.MaxPerChild ||
		len(c.Allowed) != len(o.Allowed) || len(c.Labels) != len(o.Labels) {
		return false
	}
	for i := range c.Allowed {
		if c.Allowed[i] != o.Allowed[i] {
			return false
		}
	}
	for k, v := range c.Labels {
		if w, ok := o.Labels[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// ShardConstraints are the per-shard placement rules a solver must obey.
type ShardConstraints struct {
	// Pinned, when set, is the only child the shard may live on.
	Pinned ChildID
	// Allowed, when non-empty, lists the children the shard may live on.
	Allowed []ChildID
	// Labels, when non-empty, must all be present with equal values on the child.
	Labels map[string]string
	// AntiAffinity names a group: at most MaxPerChild shards of one group share a
	// child. Empty means no group.
	AntiAffinity string
	// MaxPerChild is the group's limit per child; 0 with a group set means 1.
	MaxPerChild int
}

// Within returns the rules that bind the shard's placement inside tier
// instance self (a region placing the shard on its hosts): a pin to self, or
// an allowed list naming self, was the parent tier's to keep — it placed the
// shard on self — and binds nothing below, so it is dropped; the rest is
// unchanged. A job pinned to "region-1" runs on region-1's hosts. Without it,
// region-1 found no host called "region-1" and never placed the shard. sc is
// not changed (Allowed is never shared with the result when it changes).
func (sc ShardConstraints) Within(self ChildID) ShardConstraints {
	if self == "" {
		return sc
	}
	if sc.Pinned == self {
		sc.Pinned = ""
		if len(sc.Allowed) > 0 {
			sc.Allowed = nil // the pin's child was among them (ValidateShard): satisfied too
		}
	}
	if slices.Contains(sc.Allowed, self) {
		sc.Allowed = nil
	}
	return sc
}

// Excludes says why the shard's own rules keep it off child c — its pin, its
// allowed list, a label it needs that c lacks or has with another value — or ""
// when they admit c. Capacity, the child's state, anti-affinity and a tier's
// constraints are for the caller. Plan verification, cooperation and the
// control policies ask this; the solvers' view turns pins and allowed lists
// into child indices and matches labels with MatchesLabels.
func (sc *ShardConstraints) Excludes(c *Child) string {
	if sc.Pinned != "" && sc.Pinned != c.ID {
		return "pinned to " + strconv.Quote(string(sc.Pinned))
	}
	if len(sc.Allowed) > 0 && !slices.Contains(sc.Allowed, c.ID) {
		return "not among its allowed children"
	}
	if sc.MatchesLabels(c) {
		return ""
	}
	// Name the first missing label in key order, so the reason is stable.
	for _, k := range slices.Sorted(maps.Keys(sc.Labels)) {
		if got, ok := c.Labels[k]; !ok || got != sc.Labels[k] {
			return fmt.Sprintf("needs label %s=%s (the child has %q)", k, sc.Labels[k], got)
		}
	}
	return ""
}

// MatchesLabels reports whether child c has every label the shard needs, with
// the value it needs.
func (sc *ShardConstraints) MatchesLabels(c *Child) bool {
	for k, want := range sc.Labels {
		if got, ok := c.Labels[k]; !ok || got != want {
			return false
		}
	}
	return true
}

// ChildState says whether a child takes new shards.
type ChildState uint8

// Child states. Only ever append to this list: the values are on the wire.
const (
	ChildActive   ChildState = iota // takes shards
	ChildDraining                   // must be emptied; takes no new shards
	ChildFailed                     // lost; its shards must be re-placed
)

var childStateNames = [...]string{"active", "draining", "failed"}

func (s ChildState) String() string {
	if int(s) < len(childStateNames) {
		return childStateNames[s]
	}
	return "unknown"
}

// Child is what a tier places shards onto.
type Child struct {
	ID ChildID
	// Tier is the tier the child itself belongs to ("region", "host", "rack", ...).
	Tier     string
	Capacity Load
	Labels   map[string]string
	State    ChildState
}

// Assignment records that Shard is owned by Child since the change that gave it
// Epoch.
type Assignment struct {
	Shard ShardID
	Child ChildID
	Epoch Epoch
}

// Move changes a shard's owner. From is empty for a first placement. Epoch is the
// epoch the move was planned against: it commits only if the shard still has it.
type Move struct {
	Shard ShardID
	From  ChildID
	To    ChildID
	Epoch Epoch
	// Reason says which goal or constraint drove the move, for people.
	Reason string
	// Goal is the machine-readable name of that goal or constraint.
	Goal string
	// Delta is the change of the objective the move brings (negative is better).
	Delta float64
}

// Plan is the list of moves a tier wants to make, with why.
type Plan struct {
	Tier   string
	Status Status
	Moves  []Move
	// Infeasible lists the shards that could not be placed and why.
	Infeasible []Infeasible
	// Summary describes the quality of the placement the plan leads to.
	Summary Summary
}

// Infeasible explains why a shard has no feasible child: for each candidate child,
// the constraint that excluded it.
type Infeasible struct {
	Shard    ShardID
	Excluded map[ChildID]string
}

// Summary gives the quality of a placement, per resource.
type Summary struct {
	MaxOverMean  map[Resource]float64
	MaxOverLB    map[Resource]float64
	LB           map[Resource]float64
	Moves        int
	BytesMoved   int64
	SolveSeconds float64
	Objective    float64
}

// ShardLoad is one shard's measured load on a child.
type ShardLoad struct {
	Shard ShardID
	Load  Load
	// Rate is records processed per second; InputRate the records arriving.
	Rate       float64
	InputRate  float64
	LatencyP99 time.Duration
	// Lag is the records waiting for the shard (a broker's pending count);
	// 0 when the worker does not say.
	Lag float64
}

// Report is what a child tells its parent every interval.
type Report struct {
	Child    ChildID
	Epoch    uint64 // the child's report sequence number
	Capacity Load
	Used     Load
	Headroom Load
	// LatencyP50 and LatencyP99 are the child's measured processing latencies.
	LatencyP50 time.Duration
	LatencyP99 time.Duration
	// Throughput is records processed per second.
	Throughput float64
	// Shards is the per-shard load; a region reports only its heaviest shards.
	Shards []ShardLoad
	Hints  []Hint
	// Shape is how a tier instance's capacity is cut into its children
	// (ShapeOf its active children), for a parent that plans aggregates; nil
	// when not reported (host agents; not on the wire yet).
	Shape *CapacityShape
}

// HintKind says what a hint asks for. Only ever append.
type HintKind uint8

// Hint kinds.
const (
	HintHeadroom   HintKind = iota // Amount is the child's spare capacity
	HintShed                       // shed Amount of load (Shards are candidates)
	HintConstraint                 // Constraint is proposed to the parent
	HintSLOAtRisk                  // Shards' SLO is at risk on this child
)

var hintKindNames = [...]string{"headroom", "shed", "constraint", "slo_at_risk"}

func (k HintKind) String() string {
	if int(k) < len(hintKindNames) {
		return hintKindNames[k]
	}
	return "unknown"
}

// Hint is cooperation from a child: a request or a proposal to its parent.
type Hint struct {
	Kind       HintKind
	Amount     Load
	Shards     []ShardID
	Constraint *Constraint
	Reason     string
}

// ConstraintKind names a rule a solver must obey. Only ever append.
type ConstraintKind uint8

// Constraint kinds.
const (
	ConstraintCapacity     ConstraintKind = iota // Child's usable capacity is Limit
	ConstraintPin                                // Shards stay on Children[0]
	ConstraintAllowed                            // Shards may only use Children
	ConstraintAntiAffinity                       // at most Max of Shards per child
	ConstraintMaxMoves                           // at most Max moves and MaxBytes per round
	ConstraintAvoid                              // Shards should not use Children (e.g. SLO at risk there)
)

var constraintKindNames = [...]string{"capacity", "pin", "allowed", "anti_affinity", "max_moves", "avoid"}

func (k ConstraintKind) String() string {
	if int(k) < len(constraintKindNames) {
		return constraintKindNames[k]
	}
	return "unknown"
}

// ParseConstraintKind returns the kind a name (ConstraintKind.String) names.
func ParseConstraintKind(name string) (ConstraintKind, bool) {
	for k, n := range constraintKindNames {
		if n == name {
			return ConstraintKind(k), true
		}
	}
	return 0, false
}

// ConstraintKindNames lists the kinds' names, in kind order.
func ConstraintKindNames() []string { return constraintKindNames[:] }

// Constraint is a tier-level rule, given by an operator, derived from a child's hint
// or sent down by a parent as a budget.
type Constraint struct {
	Kind     ConstraintKind
	Shards   []ShardID
	Children []ChildID
	Limit    Load
	Max      int
	MaxBytes int64
	Reason   string
}
