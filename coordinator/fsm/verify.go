package fsm

import (
	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/interfaces"
)

// planState adapts the state to balancer.PlanState. It must only be used while
// the FSM's lock is held.
type planState struct{ s *state }

var _ balancer.PlanState = planState{}

func (p planState) Child(id interfaces.ChildID) (interfaces.Child, bool) {
	c, ok := p.s.children[id]
	if !ok {
		return interfaces.Child{}, false
	}
	return c.child, true
}

func (p planState) Shard(id interfaces.ShardID) (interfaces.Shard, bool) {
	r := p.s.shard(id)
	if r == nil {
		return interfaces.Shard{}, false
	}
	return r.spec(), true
}

func (p planState) Owner(id interfaces.ShardID) (interfaces.ChildID, interfaces.Epoch) {
	r := p.s.shard(id)
	if r == nil {
		return "", 0
	}
	return r.owner, r.epoch
}

func (p planState) InFlight(id interfaces.ShardID) (interfaces.Move, bool) {
	r := p.s.shard(id)
	if r == nil || r.flight == nil {
		return interfaces.Move{}, false
	}
	return *r.flight, true
}

// Quarantined makes planState a balancer.Quarantiner: Apply refuses the moves
// of a quarantined shard, and so does verification.
func (p planState) Quarantined(id interfaces.ShardID) string {
	if r := p.s.shard(id); r != nil {
		return r.quarantine
	}
	return ""
}

func (p planState) Used(id interfaces.ChildID) interfaces.Load {
	if c, ok := p.s.children[id]; ok {
		return c.used
	}
	return interfaces.Load{}
}

// VerifyPlan runs balancer.Verify on moves against the FSM's current state (as of
// the last applied entry on this replica) without copying it. The plan applier on
// the leader calls it, after a Barrier, then commits the accepted moves with
// ApplyPlan. It is O(len(moves)).
func (f *FSM) VerifyPlan(moves []interfaces.Move) balancer.Verdict {
	return f.VerifyPlanRules(nil, moves)
}

// VerifyPlanRules is VerifyPlan that also holds the moves to the tier-level
// rules the plan's policy was given (balancer.VerifyRules): the tier's
// constraints are not in the replicated state, the caller passes them.
func (f *FSM) VerifyPlanRules(rules []interfaces.Constraint, moves []interfaces.Move) balancer.Verdict {
	return f.VerifyPlanned(nil, rules, moves)
}

// VerifyPlanned is VerifyPlanRules on the loads the plan was made on:
// planned is the planning view's shards (balancer.PlannedLoads), whose loads
// may be the measured ones; nil verifies on the declared loads the state
// holds. The owners, epochs and moves in flight are the state's.
func (f *FSM) VerifyPlanned(planned []interfaces.Shard, rules []interfaces.Constraint, moves []interfaces.Move) balancer.Verdict {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var st balancer.PlanState = planState{f.st}
	if planned != nil {
		st = balancer.PlannedLoads(st, planned)
	}
	return balancer.VerifyRules(st, rules, moves)
}

// Screen is balancer.Screen against the FSM's current state: the moves of a
// plan the tier refuses whatever else the plan does, split off before a round
// admits the rest.
func (f *FSM) Screen(moves []interfaces.Move) (kept []interfaces.Move, refused []balancer.Rejection) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return balancer.Screen(planState{f.st}, moves)
}

// Pending is a move the plan applier has proposed to the log and whose outcome it
// does not know yet, with the load Verify counted for it.
type Pending struct {
	Move interfaces.Move
	Load interfaces.Load
}

// VerifyPlanPending runs balancer.Verify on moves against the FSM's current state
// plus pending: moves accepted by earlier rounds of the plan applier and proposed
// to the log, which may or may not have been applied yet (in proposal order). It
// is what lets the applier verify a round while earlier rounds are still being
// committed. Two rules make the result safe whatever happens to the pending moves
// (applied, rejected by the FSM, or lost with the leadership):
//
//   - A pending move whose compare-and-set would still pass on the current state
//     (same owner, same epoch, no move in flight; for a first placement, the shard
//     still unassigned) has not been applied. Its shard reads as having that move
//     in flight, so Verify rejects every new move of it (in_flight). A pending move
//     whose compare-and-set fails has either been applied — the state shows it —
//     or can no longer be applied as planned, so the state is the truth for its
//     shard. Hence no two moves of one shard planned against the same owner and
//     epoch are ever both accepted.
//   - Capacity: a pending move's load counts on its target until the shard's
//     epoch has passed the move's epoch (epochs only grow, so from then on the move
//     has landed, and the state counts it, or never will). Its source keeps the
//     load until the state shows the move (a move that fails frees nothing). A
//     first placement carries no epoch to compare: it counts on its target for as
//     long as it is pending (counted twice for the short time between its apply
//     and its round being retired — conservative). So for every child, the load
//     Verify sees is at least what the child can carry once the pending moves
//     that can still land have landed.
//
// The caller must pass every move it proposed and has not seen resolved (answered
// by the FSM or known lost). Like VerifyPlan it reads the state under the FSM's
// read lock; it is O(len(pending) + len(moves)).
//
// It also returns the accepted moves as Pending entries, each with the load
// Verify counted for the shard, read under the same lock (what the caller
// passes back as pending until the moves resolve).
func (f *FSM) VerifyPlanPending(pending []Pending, moves []interfaces.Move) (balancer.Verdict, []Pending) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var st balancer.PlanState = planState{f.st}
	if len(pending) > 0 {
		st = newPendingState(planState{f.st}, pending)
	}
	v := balancer.Verify(st, moves)
	accepted := make([]Pending, len(v.Accepted))
	for i, m := range v.Accepted {
		accepted[i].Move = m
		if r := f.st.shard(m.Shard); r != nil {
			accepted[i].Load = r.load
		}
	}
	return v, accepted
}

// pendingState is the state seen through the applier's pending moves.
type pendingState struct {
	planState
	flight map[interfaces.ShardID]interfaces.Move // unapplied pending moves
	extra  map[interfaces.ChildID]interfaces.Load // pending load that may still land
}

func newPendingState(base planState, pending []Pending) *pendingState {
	p := &pendingState{planState: base, flight: map[interfaces.ShardID]interfaces.Move{},
		extra: map[interfaces.ChildID]interfaces.Load{}}
	for _, pm := range pending {
		m := pm.Move
		r := base.s.shard(m.Shard)
		if m.From == "" || r == nil || r.epoch <= m.Epoch {
			p.extra[m.To] = p.extra[m.To].Add(pm.Load)
		}
		if _, ok := p.flight[m.Shard]; ok || r == nil {
			continue
		}
		unapplied := r.flight == nil && r.owner == m.From && (m.From == "" || r.epoch == m.Epoch)
		if unapplied {
			p.flight[m.Shard] = m
		}
	}
	return p
}

func (p *pendingState) InFlight(id interfaces.ShardID) (interfaces.Move, bool) {
	if m, ok := p.flight[id]; ok {
		return m, true
	}
	return p.planState.InFlight(id)
}

func (p *pendingState) Used(id interfaces.ChildID) interfaces.Load {
	return p.planState.Used(id).Add(p.extra[id])
}
