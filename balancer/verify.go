package balancer

import (
	"fmt"
	"slices"

	"github.com/strata-sched/strata/interfaces"
)

// PlanState is the tier state a plan is verified against. The coordinator's FSM
// implements it over its replicated state; NewViewState builds one from an
// interfaces.View for the simulator and for tests.
type PlanState interface {
	// Child returns a child's spec.
	Child(id interfaces.ChildID) (interfaces.Child, bool)
	// Shard returns a shard's spec.
	Shard(id interfaces.ShardID) (interfaces.Shard, bool)
	// Owner returns the shard's owner ("" when unassigned) and its current epoch.
	Owner(id interfaces.ShardID) (interfaces.ChildID, interfaces.Epoch)
	// InFlight returns the shard's in-flight move, if any.
	InFlight(id interfaces.ShardID) (interfaces.Move, bool)
	// Used returns the load that counts on a child: its owned shards plus incoming
	// in-flight moves, minus outgoing in-flight moves (in-flight moves count as
	// done, as everywhere in the balancer).
	Used(id interfaces.ChildID) interfaces.Load
}

// Quarantiner is a PlanState that knows quarantined shards (the daemons' FSM):
// Verify rejects their moves (constraint) before anything else, as if they were
// not in the plan, as the FSM refuses them at commit.
type Quarantiner interface {
	// Quarantined says why shard id is quarantined, "" when it is not.
	Quarantined(id interfaces.ShardID) string
}

// RejectCode says why Verify rejected a move. Only ever append.
type RejectCode uint8

// Reject codes.
const (
	RejectInvalid        RejectCode = iota + 1 // malformed move: empty target, target = source, non-finite delta, over-long reason or goal
	RejectDuplicate                            // the shard already has a move earlier in this plan
	RejectUnknownShard                         // no such shard
	RejectUnknownChild                         // no such target child
	RejectInFlight                             // the shard already has a move in flight
	RejectWrongOwner                           // the shard is not on Move.From (or is placed when From is empty)
	RejectStaleEpoch                           // the shard's epoch is not Move.Epoch
	RejectTargetInactive                       // the target child is draining or failed
	RejectConstraint                           // the shard's pin, allowed list or labels, or a tier-level pin, allowed or anti-affinity rule, exclude the target
	RejectCapacity                             // the target would exceed its capacity, or a tier-level capacity rule
)

var rejectNames = [...]string{"", "invalid", "duplicate", "unknown_shard", "unknown_child", "in_flight",
	"wrong_owner", "stale_epoch", "target_inactive", "constraint", "capacity"}

func (c RejectCode) String() string {
	if c > 0 && int(c) < len(rejectNames) {
		return rejectNames[c]
	}
	return "unknown"
}

// Sentinel returns the interfaces error a code maps onto, for callers that answer
// with errors: ErrInvalid, ErrNotFound, ErrStaleEpoch or ErrConflict.
func (c RejectCode) Sentinel() error {
	switch c {
	case RejectInvalid:
		return interfaces.ErrInvalid
	case RejectUnknownShard, RejectUnknownChild:
		return interfaces.ErrNotFound
	case RejectStaleEpoch:
		return interfaces.ErrStaleEpoch
	}
	return interfaces.ErrConflict
}

// Rejection is a move Verify refused, with why.
type Rejection struct {
	Move   interfaces.Move
	Code   RejectCode
	Reason string
}

// Err returns the rejection as an error wrapping its code's sentinel.
func (r Rejection) Err() error {
	return fmt.Errorf("move of shard %q to %q rejected (%s): %s: %w", r.Move.Shard, r.Move.To, r.Code, r.Reason, r.Code.Sentinel())
}

// Verdict splits a plan's moves into the accepted ones, in plan order, and the
// rejected ones, in plan order, each with a reason.
type Verdict struct {
	Accepted []interfaces.Move
	Rejected []Rejection
}

// capacityTolerance absorbs floating-point rounding in summed loads: a child is
// over capacity when load > capacity·(1+tol) + tol.
const capacityTolerance = 1e-9

// Verify checks a plan's moves one by one, in order, against st and against the
// moves it has already accepted from the same plan. A move is accepted when:
//
//   - it names a target and the target differs from its source, its Delta is a
//     finite number and its Reason and Goal are at most interfaces.MaxTextLen
//     bytes (else invalid: a tier could not commit it);
//   - its shard has no earlier move in this plan (else duplicate);
//   - the shard and the target child exist (else unknown_shard / unknown_child);
//   - the shard has no move in flight (else in_flight);
//   - the shard is on Move.From — unassigned when From is empty (else wrong_owner);
//   - for a move of a placed shard, the shard's epoch equals Move.Epoch (else
//     stale_epoch); a first placement carries no epoch to compare;
//   - the target is active (else target_inactive);
//   - the shard's pin, allowed list and label constraints admit the target (else
//     constraint);
//   - the target's used load, plus the loads of moves already accepted into it,
//     minus those accepted out of it, plus this shard's load, fits its capacity in
//     every dimension (else capacity). In-flight moves are already in Used.
//
// Verify is pure: it reads st, never modifies it, and returns the same verdict for
// the same input. It checks no tier-level rule: VerifyRules does.
func Verify(st PlanState, moves []interfaces.Move) Verdict {
	return VerifyRules(st, nil, moves)
}

// VerifyRules is Verify that also holds each move to the tier-level hard rules
// the plan's policy was given (interfaces.View.Constraints: an operator's, the
// ones derived from children's hints, a parent's), as the balancer's own
// solvers do:
//
//   - pin: a listed shard may only move to the rule's child (else constraint);
//   - allowed: a listed shard may only move to one of the rule's children (else
//     constraint);
//   - anti_affinity: at most Max (0 means 1) of the listed shards on one child,
//     counting in-flight moves on their targets and the moves already accepted
//     (else constraint);
//   - capacity: the rule's Limit, in each dimension where it is above zero,
//     caps the child's usable capacity (else capacity).
//
// avoid is a preference and max_moves a budget (the tier's controller admits
// within it): neither is checked here. A rule's shards and children that st
// does not have are ignored. Each rejection names the rule's Reason.
func VerifyRules(st PlanState, rules []interfaces.Constraint, moves []interfaces.Move) Verdict {
	v := Verdict{}
	delta := map[interfaces.ChildID]interfaces.Load{}
	tr := newTierRules(st, rules)
	reject := func(m interfaces.Move, code RejectCode, format string, args ...any) {
		v.Rejected = append(v.Rejected, Rejection{Move: m, Code: code, Reason: fmt.Sprintf(format, args...)})
	}
	one := newMoveChecker(st, len(moves))
	for _, m := range moves {
		shard, child, code, why := one.check(m)
		if code != 0 {
			reject(m, code, "%s", why)
			continue
		}
		if why := tr.excludes(m); why != "" {
			reject(m, RejectConstraint, "shard %q may not use child %q: %s", m.Shard, m.To, why)
			continue
		}
		after := st.Used(m.To).Add(delta[m.To]).Add(shard.Load)
		if r, over, ok := overCapacity(after, child.Capacity); ok {
			reject(m, RejectCapacity, "target child %q would carry %s=%g, capacity %g", m.To, r, over, child.Capacity.Get(r))
			continue
		}
		if r, over, limit, why, ok := tr.overLimit(m.To, after); ok {
			reject(m, RejectCapacity, "target child %q would carry %s=%g, limit %g (the tier's %s)", m.To, r, over, limit, why)
			continue
		}
		tr.accept(m)
		delta[m.To] = delta[m.To].Add(shard.Load)
		if m.From != "" {
			delta[m.From] = delta[m.From].Sub(shard.Load)
		}
		v.Accepted = append(v.Accepted, m)
	}
	return v
}

// CommitRules are the tier-level rules a commit holds moves to (VerifyRules at
// commit, in coordinator/tierd and in the simulator's control rounds): pin,
// allowed and anti_affinity. Capacity limits are left to planning: the policy
// and the limits (an operator's usable capacity, cooperation's load minus a
// cut) work on the loads the children measured, while the state counts the
// declared ones — checked against those, a move that fits as planned was
// refused every round wherever the declared loads exceed the measured ones.
// The commit holds every move to the child's own capacity, on the loads the
// plan was made on where the caller passes them (PlannedLoads; the daemons
// do), else on the state's declared ones. rules is not changed.
func CommitRules(rules []interfaces.Constraint) []interfaces.Constraint {
	var out []interfaces.Constraint
	for _, k := range rules {
		if k.Kind != interfaces.ConstraintCapacity {
			out = append(out, k)
		}
	}
	return out
}

// Screen splits a plan's moves into the ones the tier may still accept, in
// plan order, and the ones it refuses whatever else the plan does: a shard's
// second move, and each move that, verified alone, is invalid, names an
// unknown shard or child, meets a move in flight, the wrong owner or a stale
// epoch, or targets an inactive child. Capacity and constraint refusals depend
// on the other moves (what leaves a child first makes room) and are left to
// Verify on the moves a round admits. A control round screens before it
// admits, so that refused moves spend none of its move budget, and never
// refuses a move for the room of one the round then drops.
func Screen(st PlanState, moves []interfaces.Move) (kept []interfaces.Move, refused []Rejection) {
	one := newMoveChecker(st, len(moves))
	for _, m := range moves {
		if _, _, code, why := one.check(m); code != 0 && code != RejectConstraint {
			refused = append(refused, Rejection{Move: m, Code: code, Reason: why})
			continue
		}
		kept = append(kept, m)
	}
	return kept, refused
}

// moveChecker checks a plan's moves one at a time for what depends on no
// other move of the plan (Verify's first rules, Screen's whole): quarantine,
// malformed, repeated shard, unknown shard or child, in flight, wrong owner,
// stale epoch, inactive target, and the shard's own pin, allowed list and
// labels.
type moveChecker struct {
	st   PlanState
	q    Quarantiner // nil when st knows no quarantine
	seen map[interfaces.ShardID]struct{}
}

func newMoveChecker(st PlanState, n int) *moveChecker {
	q, _ := st.(Quarantiner)
	return &moveChecker{st: st, q: q, seen: make(map[interfaces.ShardID]struct{}, n)}
}

// check returns m's shard and target, or the code and reason of its
// rejection (code 0 when it passes).
func (c *moveChecker) check(m interfaces.Move) (shard interfaces.Shard, child interfaces.Child, code RejectCode, why string) {
	st := c.st
	fail := func(code RejectCode, format string, args ...any) (interfaces.Shard, interfaces.Child, RejectCode, string) {
		return interfaces.Shard{}, interfaces.Child{}, code, fmt.Sprintf(format, args...)
	}
	if c.q != nil {
		if why := c.q.Quarantined(m.Shard); why != "" {
			return fail(RejectConstraint, "shard %q is quarantined (%s); release it first", m.Shard, why)
		}
	}
	if m.To == "" {
		return fail(RejectInvalid, "the move names no target child")
	}
	if m.To == m.From {
		return fail(RejectInvalid, "the target %q is the source", m.To)
	}
	if err := interfaces.ValidateMoveFields("move", m); err != nil {
		return fail(RejectInvalid, "%v", err)
	}
	if _, dup := c.seen[m.Shard]; dup {
		return fail(RejectDuplicate, "shard %q already has a move earlier in this plan", m.Shard)
	}
	c.seen[m.Shard] = struct{}{}
	shard, ok := st.Shard(m.Shard)
	if !ok {
		return fail(RejectUnknownShard, "shard %q does not exist", m.Shard)
	}
	child, ok = st.Child(m.To)
	if !ok {
		return fail(RejectUnknownChild, "target child %q does not exist", m.To)
	}
	if fl, ok := st.InFlight(m.Shard); ok {
		return fail(RejectInFlight, "shard %q already has a move to %q in flight", m.Shard, fl.To)
	}
	owner, epoch := st.Owner(m.Shard)
	if owner != m.From {
		switch {
		case m.From == "":
			return fail(RejectWrongOwner, "first placement of shard %q, but it is on %q", m.Shard, owner)
		case owner == "":
			return fail(RejectWrongOwner, "shard %q is unassigned, the move expects it on %q", m.Shard, m.From)
		default:
			return fail(RejectWrongOwner, "shard %q is on %q, the move expects it on %q", m.Shard, owner, m.From)
		}
	}
	if m.From != "" && epoch != m.Epoch {
		return fail(RejectStaleEpoch, "shard %q is at epoch %d, the move was planned at epoch %d", m.Shard, epoch, m.Epoch)
	}
	if child.State != interfaces.ChildActive {
		return fail(RejectTargetInactive, "target child %q is %s", m.To, child.State)
	}
	if why := shard.Constraints.Excludes(&child); why != "" {
		return fail(RejectConstraint, "shard %q may not use child %q: %s", m.Shard, m.To, why)
	}
	return shard, child, 0, ""
}

// overCapacity returns the first dimension (in Names order) where load exceeds
// capacity beyond the rounding tolerance.
func overCapacity(load, capacity interfaces.Load) (interfaces.Resource, float64, bool) {
	for _, r := range interfaces.UnionNames(load, capacity) {
		l, c := load.Get(r), capacity.Get(r)
		if l > c*(1+capacityTolerance)+capacityTolerance {
			return r, l, true
		}
	}
	return "", 0, false
}

// tierRules indexes the tier-level hard rules of a plan's verification.
type tierRules struct {
	st     PlanState
	rules  []interfaces.Constraint
	shards map[interfaces.ShardID][]int // pin, allowed and anti_affinity rules naming the shard
	limits map[interfaces.ChildID][]int // capacity rules naming the child
	// counts holds, per anti_affinity rule, how many of its shards each child
	// has (in flight counted on the target, accepted moves counted as done),
	// built when the rule is first needed.
	counts map[int]map[interfaces.ChildID]int
}

func newTierRules(st PlanState, rules []interfaces.Constraint) *tierRules {
	tr := &tierRules{st: st, rules: rules}
	for i, k := range rules {
		switch k.Kind {
		case interfaces.ConstraintPin, interfaces.ConstraintAllowed, interfaces.ConstraintAntiAffinity:
			if tr.shards == nil {
				tr.shards = map[interfaces.ShardID][]int{}
			}
			for _, id := range k.Shards {
				if l := tr.shards[id]; len(l) == 0 || l[len(l)-1] != i {
					tr.shards[id] = append(l, i)
				}
			}
		case interfaces.ConstraintCapacity:
			if tr.limits == nil {
				tr.limits = map[interfaces.ChildID][]int{}
			}
			for _, id := range k.Children {
				if l := tr.limits[id]; len(l) == 0 || l[len(l)-1] != i {
					tr.limits[id] = append(l, i)
				}
			}
		}
	}
	return tr
}

// ruleWhy names a rule in a rejection: its kind and reason.
func ruleWhy(k interfaces.Constraint) string {
	if k.Reason == "" {
		return k.Kind.String() + " rule"
	}
	return k.Kind.String() + " rule: " + k.Reason
}

// excludes says which pin, allowed or anti_affinity rule m breaks, or "".
func (tr *tierRules) excludes(m interfaces.Move) string {
	for _, i := range tr.shards[m.Shard] {
		k := tr.rules[i]
		switch k.Kind {
		case interfaces.ConstraintPin:
			if len(k.Children) > 0 && k.Children[0] != m.To {
				return fmt.Sprintf("pinned to %q by the tier's %s", k.Children[0], ruleWhy(k))
			}
		case interfaces.ConstraintAllowed:
			if !slices.Contains(k.Children, m.To) {
				return fmt.Sprintf("not among the children the tier's %s allows", ruleWhy(k))
			}
		case interfaces.ConstraintAntiAffinity:
			limit := max(k.Max, 1)
			if n := tr.count(i)[m.To]; n >= limit {
				return fmt.Sprintf("the child already holds %d of the shards of the tier's %s (at most %d per child)", n, ruleWhy(k), limit)
			}
		}
	}
	return ""
}

// count returns the per-child count of anti_affinity rule i's shards.
func (tr *tierRules) count(i int) map[interfaces.ChildID]int {
	if c, ok := tr.counts[i]; ok {
		return c
	}
	c := map[interfaces.ChildID]int{}
	seen := map[interfaces.ShardID]bool{}
	for _, id := range tr.rules[i].Shards {
		if seen[id] {
			continue
		}
		seen[id] = true
		on, _ := tr.st.Owner(id)
		if fl, ok := tr.st.InFlight(id); ok {
			on = fl.To
		}
		if on != "" {
			c[on]++
		}
	}
	if tr.counts == nil {
		tr.counts = map[int]map[interfaces.ChildID]int{}
	}
	tr.counts[i] = c
	return c
}

// accept counts an accepted move in the anti_affinity rules of its shard.
func (tr *tierRules) accept(m interfaces.Move) {
	for _, i := range tr.shards[m.Shard] {
		if tr.rules[i].Kind != interfaces.ConstraintAntiAffinity {
			continue
		}
		c := tr.count(i)
		c[m.To]++
		if m.From != "" {
			c[m.From]--
		}
	}
}

// overLimit returns the first dimension in which load exceeds a capacity rule
// of child, with the rule's limit and why.
func (tr *tierRules) overLimit(child interfaces.ChildID, load interfaces.Load) (interfaces.Resource, float64, float64, string, bool) {
	for _, i := range tr.limits[child] {
		k := tr.rules[i]
		for _, r := range interfaces.UnionNames(load, k.Limit) {
			l, lim := load.Get(r), k.Limit.Get(r)
			if lim > 0 && l > lim*(1+capacityTolerance)+capacityTolerance {
				return r, l, lim, ruleWhy(k), true
			}
		}
	}
	return "", 0, 0, "", false
}

// viewState indexes an interfaces.View for Verify.
type viewState struct {
	children map[interfaces.ChildID]interfaces.Child
	shards   map[interfaces.ShardID]*interfaces.Shard
	owners   map[interfaces.ShardID]interfaces.Assignment
	inflight map[interfaces.ShardID]interfaces.Move
	used     map[interfaces.ChildID]interfaces.Load
}

// NewViewState indexes v for Verify. Used loads are summed from v's shards,
// assignments and in-flight moves (an in-flight move's load counts on its target,
// not its source). It fails with ErrInvalid when v is inconsistent: duplicate IDs,
// an assignment or move naming an unknown shard, or two in-flight moves of one shard.
// An unassigned shard's epoch is unknown to a View and reads as 0.
func NewViewState(v *interfaces.View) (PlanState, error) {
	if v == nil {
		return nil, fmt.Errorf("view: is required: %w", interfaces.ErrInvalid)
	}
	st := &viewState{
		children: make(map[interfaces.ChildID]interfaces.Child, len(v.Children)),
		shards:   make(map[interfaces.ShardID]*interfaces.Shard, len(v.Shards)),
		owners:   make(map[interfaces.ShardID]interfaces.Assignment, len(v.Assignments)),
		inflight: make(map[interfaces.ShardID]interfaces.Move, len(v.InFlight)),
		used:     make(map[interfaces.ChildID]interfaces.Load, len(v.Children)),
	}
	for i, c := range v.Children {
		if _, dup := st.children[c.ID]; dup {
			return nil, fmt.Errorf("view.children[%d]: child %q appears twice: %w", i, c.ID, interfaces.ErrInvalid)
		}
		st.children[c.ID] = c
	}
	for i := range v.Shards {
		s := &v.Shards[i]
		if _, dup := st.shards[s.ID]; dup {
			return nil, fmt.Errorf("view.shards[%d]: shard %q appears twice: %w", i, s.ID, interfaces.ErrInvalid)
		}
		st.shards[s.ID] = s
	}
	for i, a := range v.Assignments {
		if _, ok := st.shards[a.Shard]; !ok {
			return nil, fmt.Errorf("view.assignments[%d]: shard %q is not in view.shards: %w", i, a.Shard, interfaces.ErrInvalid)
		}
		if _, dup := st.owners[a.Shard]; dup {
			return nil, fmt.Errorf("view.assignments[%d]: shard %q is assigned twice: %w", i, a.Shard, interfaces.ErrInvalid)
		}
		st.owners[a.Shard] = a
	}
	for i, m := range v.InFlight {
		if _, ok := st.shards[m.Shard]; !ok {
			return nil, fmt.Errorf("view.in_flight[%d]: shard %q is not in view.shards: %w", i, m.Shard, interfaces.ErrInvalid)
		}
		if _, dup := st.inflight[m.Shard]; dup {
			return nil, fmt.Errorf("view.in_flight[%d]: shard %q has two moves in flight: %w", i, m.Shard, interfaces.ErrInvalid)
		}
		st.inflight[m.Shard] = m
	}
	// Sum in view order so the result does not depend on map iteration.
	for i := range v.Shards {
		s := &v.Shards[i]
		on := st.owners[s.ID].Child
		if m, ok := st.inflight[s.ID]; ok {
			on = m.To
		}
		if on != "" {
			st.used[on] = st.used[on].Add(s.Load)
		}
	}
	return st, nil
}

func (s *viewState) Child(id interfaces.ChildID) (interfaces.Child, bool) {
	c, ok := s.children[id]
	return c, ok
}

func (s *viewState) Shard(id interfaces.ShardID) (interfaces.Shard, bool) {
	if p, ok := s.shards[id]; ok {
		return *p, true
	}
	return interfaces.Shard{}, false
}

func (s *viewState) Owner(id interfaces.ShardID) (interfaces.ChildID, interfaces.Epoch) {
	a := s.owners[id]
	return a.Child, a.Epoch
}

func (s *viewState) InFlight(id interfaces.ShardID) (interfaces.Move, bool) {
	m, ok := s.inflight[id]
	return m, ok
}

func (s *viewState) Used(id interfaces.ChildID) interfaces.Load { return s.used[id] }

// VerifyView is Verify against a View (tests, and tools that verify a plan
// against a view they hold). It does not check v.Constraints; VerifyViewRules
// does.
func VerifyView(v *interfaces.View, moves []interfaces.Move) (Verdict, error) {
	st, err := NewViewState(v)
	if err != nil {
		return Verdict{}, err
	}
	return Verify(st, moves), nil
}

// VerifyViewRules is VerifyRules against a View and its Constraints: the rules
// a policy's plan must keep, on the view's loads (a policy's tests call it; a
// tier checks the same at commit against its state, capacity limits aside).
func VerifyViewRules(v *interfaces.View, moves []interfaces.Move) (Verdict, error) {
	st, err := NewViewState(v)
	if err != nil {
		return Verdict{}, err
	}
	return VerifyRules(st, v.Constraints, moves), nil
}
