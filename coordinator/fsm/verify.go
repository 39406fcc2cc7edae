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
	f.mu.RLock()
	defer f.mu.RUnlock()
	return balancer.Verify(planState{f.st}, moves)
}
