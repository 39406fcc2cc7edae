package tierd

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/tiers/coop"
)

// Integration modes (Config.Integration).
const (
	IntegrationDecoupled     = "decoupled"
	IntegrationManual        = "manual"
	IntegrationCollaborative = "collaborative"
)

// coopState is a replica's cooperation state (collaborative mode): as a
// parent, the memory of held shards, what it derived last and what it sent each
// child; as a child, what its parent sent it. Guarded by its own lock: the
// control loop, the uplink's report and the Admin service read it.
type coopState struct {
	mu   sync.Mutex
	mem  coop.Memory
	last []interfaces.Constraint // derived in the last round
	sent map[interfaces.ChildID]sentDown
	seq  uint32

	// From the parent: its last Constraints message.
	parentSeq    uint64
	parentRules  []interfaces.Constraint
	parentTarget float64
}

type sentDown struct {
	s    *childSession
	down coop.Down
}

// validateIntegration checks the integration settings of c.
func (c Config) validateIntegration() error {
	bad := func(field, rule string) error {
		return fmt.Errorf("%s: %s: %w", field, rule, interfaces.ErrInvalid)
	}
	switch c.Integration {
	case IntegrationDecoupled, IntegrationManual, IntegrationCollaborative:
	default:
		return bad("integration", fmt.Sprintf("must be decoupled, manual or collaborative (got %q)", c.Integration))
	}
	if len(c.Constraints) > 0 && c.Integration != IntegrationManual {
		return bad("constraints", "operator constraints need integration: manual")
	}
	for i, k := range c.Constraints {
		field := fmt.Sprintf("constraints[%d]", i)
		switch k.Kind {
		case interfaces.ConstraintCapacity, interfaces.ConstraintPin, interfaces.ConstraintAllowed, interfaces.ConstraintAvoid:
			if len(k.Children) == 0 {
				return bad(field+".children", "is required for "+k.Kind.String())
			}
		case interfaces.ConstraintAntiAffinity, interfaces.ConstraintMaxMoves:
		default:
			return bad(field+".kind", fmt.Sprintf("must be capacity, pin, allowed, anti_affinity, max_moves or avoid (got %d)", k.Kind))
		}
		if k.Kind == interfaces.ConstraintPin && len(k.Children) != 1 {
			return bad(field+".children", "must name exactly one child for pin")
		}
		if (k.Kind == interfaces.ConstraintPin || k.Kind == interfaces.ConstraintAllowed || k.Kind == interfaces.ConstraintAvoid || k.Kind == interfaces.ConstraintAntiAffinity) && len(k.Shards) == 0 {
			return bad(field+".shards", "is required for "+k.Kind.String())
		}
		if err := interfaces.ValidateLoad(field+".limit", k.Limit); err != nil {
			return err
		}
		if k.Max < 0 || k.MaxBytes < 0 {
			return bad(field, "max and max_bytes must be ≥ 0")
		}
		for j, id := range k.Shards {
			if err := interfaces.ValidateID(fmt.Sprintf("%s.shards[%d]", field, j), string(id)); err != nil {
				return err
			}
		}
		for j, id := range k.Children {
			if err := interfaces.ValidateID(fmt.Sprintf("%s.children[%d]", field, j), string(id)); err != nil {
				return err
			}
		}
	}
	if err := c.Coop.Validate(); err != nil {
		return err
	}
	for k := range c.Labels {
		if k == "" {
			return bad("labels", "keys must not be empty")
		}
	}
	return nil
}

// cooperate returns the constraints this tier adds to its own solve (the
// integration mode decides which). Called from observe with d.decide held.
//
//   - decoupled: the capacity-shape rules only (coop.ShapeRules; every mode
//     has them at a tier over tier instances).
//   - manual: the operator constraints of the config, keeping only the shards
//     and children of the view (a constraint left without what it needs is
//     dropped).
//   - collaborative: the budget the parent sent (for rounds without shards to
//     place or evacuate), and, when the children are tier instances, the
//     constraints tiers/coop derives from their hints; the budgets and targets
//     it computes go down to them. A tier over hosts derives nothing from the
//     host agents' hints: it measures its hosts directly.
func (d *Daemon) cooperate(v *interfaces.View) []interfaces.Constraint {
	// In every mode, a tier over tier instances keeps shards off the children
	// none of whose hosts can hold them (the capacity shapes they report): what
	// a hierarchy without runtime hints knows, the fair decoupled baseline.
	var shape []interfaces.Constraint
	if d.cfg.ChildTier != interfaces.TierHost {
		shape = coop.ShapeRules(v)
	}
	switch d.cfg.Integration {
	case IntegrationManual:
		return append(shape, coop.InView(v, d.cfg.Constraints)...)
	case IntegrationCollaborative:
	default:
		return shape
	}
	if d.cfg.ChildTier == interfaces.TierHost {
		// A tier over hosts measures them directly (their reports' per-shard
		// loads replace the declared ones, and the controller acts on them):
		// the host agents' headroom and shed hints would only say it again.
		// Only the parent's budget applies.
		return d.parentBudget(v)
	}
	out := append(shape, d.parentBudget(v)...)
	d.coop.mu.Lock()
	mem := d.coop.mem
	d.coop.mu.Unlock()
	der, err := coop.Derive(v, d.cfg.Coop, mem)
	if err != nil {
		d.logger.Printf("cooperation: %v", err) // the config is validated: not expected
		return out
	}
	d.coop.mu.Lock()
	d.coop.mem = der.Memory
	d.coop.last = der.Constraints
	d.coop.mu.Unlock()
	// The controller measures a child against its capacity in the view: a
	// child asked to shed is seen with the limit it got, so the round runs.
	coop.LowerCapacities(v, der.Shed)
	d.sendDown(der.Down)
	return append(out, der.Constraints...)
}

// rulesInForce returns the cooperation rules a round of v would plan with,
// without a round's side effects (nothing derived anew, nothing sent down): the
// operator constraints in manual mode, the rules last derived from the
// children's hints in collaborative mode. For what-if plans (Plan).
func (d *Daemon) rulesInForce(v *interfaces.View) []interfaces.Constraint {
	switch d.cfg.Integration {
	case IntegrationManual:
		return coop.InView(v, d.cfg.Constraints)
	case IntegrationCollaborative:
		d.coop.mu.Lock()
		last := d.coop.last
		d.coop.mu.Unlock()
		return coop.InView(v, last)
	}
	return nil
}

// parentBudget returns the rules the parent sent (its move budget) for a round
// of v, unless v has shards to place or evacuate: the budget bounds
// relocations only.
func (d *Daemon) parentBudget(v *interfaces.View) []interfaces.Constraint {
	d.coop.mu.Lock()
	parent := d.coop.parentRules
	d.coop.mu.Unlock()
	if len(parent) == 0 || coop.NeedsPlacement(v) {
		return nil
	}
	return coop.InView(v, parent)
}

// sendDown sends each child tier its budget and target, when they changed or
// its session is new.
func (d *Daemon) sendDown(downs []coop.Down) {
	for _, x := range downs {
		d.mu.Lock()
		s := d.sessions[x.Child]
		d.mu.Unlock()
		if s == nil {
			continue
		}
		d.coop.mu.Lock()
		if d.coop.sent == nil {
			d.coop.sent = map[interfaces.ChildID]sentDown{}
		}
		if last, ok := d.coop.sent[x.Child]; ok && last.s == s && last.down == x {
			d.coop.mu.Unlock()
			continue
		}
		d.coop.seq++
		// The term makes sequences grow across leaders.
		seq := d.tier.Raft().CurrentTerm()<<32 | uint64(d.coop.seq)
		d.coop.sent[x.Child] = sentDown{s, x}
		d.coop.mu.Unlock()
		t := x.Target
		s.send(&wire.ParentMessage{Msg: &wire.ParentMessage_Constraints{Constraints: &wire.Constraints{
			Budget:   &wire.Budget{MaxMoves: int64(x.MaxMoves)},
			Targets:  &wire.Targets{Utilization: wire.LoadToWire(interfaces.Load{CPU: t, Mem: t, Net: t})},
			Sequence: seq,
		}}})
	}
}

// fromParent takes the parent's Constraints (collaborative mode only): its
// budget becomes a max_moves rule of this tier's rounds and its target the
// target of the hints sent up. A message older than the last one is dropped.
func (d *Daemon) fromParent(m *wire.Constraints) {
	if d.cfg.Integration != IntegrationCollaborative {
		return
	}
	rules, _, target, err := wire.ConstraintsFromWire(m)
	if err != nil {
		d.logger.Printf("uplink: bad constraints from the parent: %v", err)
		return
	}
	for i := range rules {
		if rules[i].Kind == interfaces.ConstraintMaxMoves {
			rules[i].Reason = fmt.Sprintf("budget from the parent tier: at most %d moves per round (sequence %d)", rules[i].Max, m.GetSequence())
		}
	}
	d.coop.mu.Lock()
	defer d.coop.mu.Unlock()
	if m.GetSequence() != 0 && m.GetSequence() <= d.coop.parentSeq {
		return
	}
	d.coop.parentSeq = m.GetSequence()
	d.coop.parentRules = rules
	_, d.coop.parentTarget = target.MaxDim()
}

// forgetParent drops what the parent sent (its session ended).
func (d *Daemon) forgetParent() {
	d.coop.mu.Lock()
	d.coop.parentSeq, d.coop.parentRules, d.coop.parentTarget = 0, nil, 0
	d.coop.mu.Unlock()
}

// childHints are the hints this tier instance sends its parent with each
// report (collaborative mode): tiers/coop's from its own view, with the target
// the parent sent, if any.
func (d *Daemon) childHints() []interfaces.Hint {
	if d.cfg.Integration != IntegrationCollaborative {
		return nil
	}
	view, _ := d.baseView(time.Now())
	cfg := d.cfg.Coop
	d.coop.mu.Lock()
	if t := d.coop.parentTarget; t > 0 && t <= 1 {
		cfg.Target = t
	}
	d.coop.mu.Unlock()
	hs, err := coop.ChildHints(view, cfg)
	if err != nil {
		d.logger.Printf("cooperation: hints: %v", err)
		return nil
	}
	return hs
}

// coopFindings explains, for strata explain, the cooperation rules of the last
// round that name the shard, and the children it is held away from.
func (d *Daemon) coopFindings(shard interfaces.ShardID) []string {
	d.coop.mu.Lock()
	defer d.coop.mu.Unlock()
	var out []string
	for _, c := range d.coop.last {
		for _, s := range c.Shards {
			if s == shard {
				out = append(out, fmt.Sprintf("%s rule: %s", c.Kind, c.Reason))
				break
			}
		}
	}
	var held []string
	for _, h := range d.coop.mem.Held {
		if h.Shard == shard {
			held = append(held, fmt.Sprintf("cooperation: kept off %s until %s: %s", h.Child, h.Until.UTC().Format(time.RFC3339), h.Reason))
		}
	}
	sort.Strings(held)
	return append(out, held...)
}

// capacityShape is the shape of this instance's capacity for its report to
// the parent: interfaces.ShapeOf its active children.
func (d *Daemon) capacityShape() *interfaces.CapacityShape {
	var cs []interfaces.Child
	for _, cu := range d.tier.FSM.Children() {
		cs = append(cs, cu.Child)
	}
	sh := interfaces.ShapeOf(cs)
	return &sh
}
