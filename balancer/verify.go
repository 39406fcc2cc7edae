package balancer

import (
	"fmt"
	"math"

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
	RejectConstraint                           // the shard's pin, allowed list or labels exclude the target
	RejectCapacity                             // the target would exceed its capacity
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
// the same input.
func Verify(st PlanState, moves []interfaces.Move) Verdict {
	v := Verdict{}
	seen := make(map[interfaces.ShardID]struct{}, len(moves))
	delta := map[interfaces.ChildID]interfaces.Load{}
	reject := func(m interfaces.Move, code RejectCode, format string, args ...any) {
		v.Rejected = append(v.Rejected, Rejection{Move: m, Code: code, Reason: fmt.Sprintf(format, args...)})
	}
	for _, m := range moves {
		if m.To == "" {
			reject(m, RejectInvalid, "the move names no target child")
			continue
		}
		if m.To == m.From {
			reject(m, RejectInvalid, "the target %q is the source", m.To)
			continue
		}
		if why := uncommittable(m); why != "" {
			reject(m, RejectInvalid, "%s", why)
			continue
		}
		if _, dup := seen[m.Shard]; dup {
			reject(m, RejectDuplicate, "shard %q already has a move earlier in this plan", m.Shard)
			continue
		}
		seen[m.Shard] = struct{}{}
		shard, ok := st.Shard(m.Shard)
		if !ok {
			reject(m, RejectUnknownShard, "shard %q does not exist", m.Shard)
			continue
		}
		child, ok := st.Child(m.To)
		if !ok {
			reject(m, RejectUnknownChild, "target child %q does not exist", m.To)
			continue
		}
		if fl, ok := st.InFlight(m.Shard); ok {
			reject(m, RejectInFlight, "shard %q already has a move to %q in flight", m.Shard, fl.To)
			continue
		}
		owner, epoch := st.Owner(m.Shard)
		if owner != m.From {
			switch {
			case m.From == "":
				reject(m, RejectWrongOwner, "first placement of shard %q, but it is on %q", m.Shard, owner)
			case owner == "":
				reject(m, RejectWrongOwner, "shard %q is unassigned, the move expects it on %q", m.Shard, m.From)
			default:
				reject(m, RejectWrongOwner, "shard %q is on %q, the move expects it on %q", m.Shard, owner, m.From)
			}
			continue
		}
		if m.From != "" && epoch != m.Epoch {
			reject(m, RejectStaleEpoch, "shard %q is at epoch %d, the move was planned at epoch %d", m.Shard, epoch, m.Epoch)
			continue
		}
		if child.State != interfaces.ChildActive {
			reject(m, RejectTargetInactive, "target child %q is %s", m.To, child.State)
			continue
		}
		if why := shard.Constraints.Excludes(&child); why != "" {
			reject(m, RejectConstraint, "shard %q may not use child %q: %s", m.Shard, m.To, why)
			continue
		}
		after := st.Used(m.To).Add(delta[m.To]).Add(shard.Load)
		if r, over, ok := overCapacity(after, child.Capacity); ok {
			reject(m, RejectCapacity, "target child %q would carry %s=%g, capacity %g", m.To, r, over, child.Capacity.Get(r))
			continue
		}
		delta[m.To] = delta[m.To].Add(shard.Load)
		if m.From != "" {
			delta[m.From] = delta[m.From].Sub(shard.Load)
		}
		v.Accepted = append(v.Accepted, m)
	}
	return v
}

// uncommittable says why a move's other fields could not be committed — a
// non-finite Delta, a Reason or Goal over interfaces.MaxTextLen bytes — or "".
func uncommittable(m interfaces.Move) string {
	switch {
	case math.IsNaN(m.Delta) || math.IsInf(m.Delta, 0):
		return fmt.Sprintf("delta: must be a finite number (got %g)", m.Delta)
	case len(m.Reason) > interfaces.MaxTextLen:
		return fmt.Sprintf("reason: length %d exceeds the limit of %d bytes", len(m.Reason), interfaces.MaxTextLen)
	case len(m.Goal) > interfaces.MaxTextLen:
		return fmt.Sprintf("goal: length %d exceeds the limit of %d bytes", len(m.Goal), interfaces.MaxTextLen)
	}
	return ""
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

// VerifyView is Verify against a View: the simulator's entry point.
func VerifyView(v *interfaces.View, moves []interfaces.Move) (Verdict, error) {
	st, err := NewViewState(v)
	if err != nil {
		return Verdict{}, err
	}
	return Verify(st, moves), nil
}
