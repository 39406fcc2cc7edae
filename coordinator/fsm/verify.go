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
// the last applied entry on this replica) without copying it. It is
// O(len(moves)).
func (f *FSM) VerifyPlan(moves []interfaces.Move) balancer.Verdict {
	return f.VerifyPlanned(nil, nil, moves)
}

// VerifyPlanned is VerifyPlan on the loads the plan was made on, holding the
// moves also to the tier-level rules the plan's policy was given
// (balancer.VerifyRules: the tier's constraints are not in the replicated
// state, the caller passes them). planned is the planning view's shards
// (balancer.PlannedLoads), whose loads may be the measured ones; nil verifies
// on the declared loads the state holds. The owners, epochs and moves in
// flight are the state's. coordinator/tierd's control round and the Admin
// API's ApplyPlan commit what it accepts.
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
