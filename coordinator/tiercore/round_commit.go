package tiercore

import (
	"sort"
	"strings"

	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/interfaces"
)

// State is the committed state a round's moves are screened and verified
// against, read-only. coordinator/fsm's FSM is one (its latest applied
// entry); ViewState makes one of a view (the simulator, tests).
type State interface {
	// Screen splits off the moves the tier refuses whatever else the plan
	// does (balancer.Screen).
	Screen(moves []interfaces.Move) (kept []interfaces.Move, refused []balancer.Rejection)
	// VerifyPlanned verifies moves in order on the loads and shard rules of
	// planned (balancer.PlannedLoads; nil: the state's) and the tier-level
	// rules (balancer.VerifyRules).
	VerifyPlanned(planned []interfaces.Shard, rules []interfaces.Constraint, moves []interfaces.Move) balancer.Verdict
	// Child returns a child as committed.
	Child(id interfaces.ChildID) (interfaces.Child, bool)
}

// ViewState is v as a State: what the simulator commits against (its view is
// its state), and what tests use.
func ViewState(v *interfaces.View) (State, error) {
	st, err := balancer.NewViewState(v)
	if err != nil {
		return nil, err
	}
	return viewState{st}, nil
}

type viewState struct{ st balancer.PlanState }

func (s viewState) Screen(moves []interfaces.Move) ([]interfaces.Move, []balancer.Rejection) {
	return balancer.Screen(s.st, moves)
}

func (s viewState) VerifyPlanned(planned []interfaces.Shard, rules []interfaces.Constraint, moves []interfaces.Move) balancer.Verdict {
	st := s.st
	if planned != nil {
		st = balancer.PlannedLoads(st, planned)
	}
	return balancer.VerifyRules(st, rules, moves)
}

func (s viewState) Child(id interfaces.ChildID) (interfaces.Child, bool) { return s.st.Child(id) }

// Batch is the verified moves of one commit, in plan order, and for each
// whether it is begun (revoke → ack → commit: a move off a live child) or
// committed directly (a first placement, a move off a failed child). The
// driver commits it as one entry (all its moves or none).
type Batch struct {
	Moves []interfaces.Move
	Begin []bool
}

// VerifyMoves checks moves against st, on the loads they were planned on
// (planned: the planning view's shards; nil = the declared ones), and the
// tier-level rules the policy was given less its capacity limits
// (balancer.CommitRules: those are measured on reported loads and left to
// planning). It returns the accepted moves as a Batch, each with
// defaultReason when it has no reason, and every rejection (earlier's, of
// the same plan, first). The control round and an operator's ApplyPlan both
// commit what it accepts.
func VerifyMoves(st State, moves []interfaces.Move, rules []interfaces.Constraint, planned []interfaces.Shard, defaultReason string, earlier []balancer.Rejection) (Batch, []balancer.Rejection) {
	verdict := st.VerifyPlanned(planned, balancer.CommitRules(rules), moves)
	rejections := append(earlier[:len(earlier):len(earlier)], verdict.Rejected...)
	b := Batch{Moves: make([]interfaces.Move, 0, len(verdict.Accepted)), Begin: make([]bool, 0, len(verdict.Accepted))}
	for _, m := range verdict.Accepted {
		if m.Reason == "" {
			m.Reason = defaultReason
		}
		src, ok := st.Child(m.From)
		b.Moves = append(b.Moves, m)
		b.Begin = append(b.Begin, m.From != "" && ok && src.State != interfaces.ChildFailed)
	}
	return b, rejections
}

// CarryOut follows up a committed batch (ops are its moves' results, in
// order): an Assign to the new owner of a direct move at its new epoch, a
// Revoke to the old owner of a begun one at the move's epoch. It returns the
// moves that committed, the messages and how many moves failed.
func CarryOut(b Batch, ops []OpResult) (applied []interfaces.Move, tell []Tell, failed int) {
	for i, m := range b.Moves {
		if i >= len(ops) || ops[i].Err != nil {
			failed++
			continue
		}
		applied = append(applied, m)
		if b.Begin[i] {
			tell = append(tell, Tell{Child: m.From, Kind: Revoke, Shard: m.Shard, Epoch: m.Epoch})
			continue
		}
		tell = append(tell, Tell{Child: m.To, Kind: Assign, Shard: m.Shard, Epoch: ops[i].Epoch})
	}
	return applied, tell, failed
}

// DropLeaving returns moves without those of the shards leaving (nil: none),
// which the tier's own parent is taking back: never moved here again.
func DropLeaving(moves []interfaces.Move, leaving func(interfaces.ShardID) bool) []interfaces.Move {
	if leaving == nil {
		return moves
	}
	out := moves[:0:0]
	for _, m := range moves {
		if !leaving(m.Shard) {
			out = append(out, m)
		}
	}
	return out
}

// DropShards removes the shards for which gone is true from v (shards,
// assignments, in-flight moves and the shard lists of constraints; a
// constraint left without shards is dropped). The slices are copied.
func DropShards(v *interfaces.View, gone func(interfaces.ShardID) bool) {
	shards := make([]interfaces.Shard, 0, len(v.Shards))
	for _, s := range v.Shards {
		if !gone(s.ID) {
			shards = append(shards, s)
		}
	}
	v.Shards = shards
	as := make([]interfaces.Assignment, 0, len(v.Assignments))
	for _, a := range v.Assignments {
		if !gone(a.Shard) {
			as = append(as, a)
		}
	}
	v.Assignments = as
	var fl []interfaces.Move
	for _, m := range v.InFlight {
		if !gone(m.Shard) {
			fl = append(fl, m)
		}
	}
	v.InFlight = fl
	v.Constraints = dropFromConstraints(v.Constraints, gone)
}

func dropFromConstraints(cs []interfaces.Constraint, gone func(interfaces.ShardID) bool) []interfaces.Constraint {
	out := make([]interfaces.Constraint, 0, len(cs))
	for _, c := range cs {
		if len(c.Shards) == 0 {
			out = append(out, c)
			continue
		}
		keep := make([]interfaces.ShardID, 0, len(c.Shards))
		for _, id := range c.Shards {
			if !gone(id) {
				keep = append(keep, id)
			}
		}
		if len(keep) == 0 {
			continue
		}
		c.Shards = keep
		out = append(out, c)
	}
	return out
}

// Infeasible maps each shard plan placed nowhere to why (InfeasibleWhy); nil
// when there is none.
func Infeasible(plan interfaces.Plan) map[interfaces.ShardID]string {
	var inf map[interfaces.ShardID]string
	for _, x := range plan.Infeasible {
		if inf == nil {
			inf = make(map[interfaces.ShardID]string, len(plan.Infeasible))
		}
		inf[x.Shard] = InfeasibleWhy(x)
	}
	return inf
}

// InfeasibleWhy says why no child takes x: the one reason when every child
// gives the same (a pin to a missing child), else each child's, sorted.
func InfeasibleWhy(x interfaces.Infeasible) string {
	ids := make([]string, 0, len(x.Excluded))
	same, first := true, ""
	for id, why := range x.Excluded {
		ids = append(ids, string(id))
		if first == "" {
			first = why
		} else if why != first {
			same = false
		}
	}
	if len(ids) == 0 {
		return "no child to place it on"
	}
	if same {
		return first
	}
	sort.Strings(ids)
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = id + ": " + x.Excluded[interfaces.ChildID(id)]
	}
	return strings.Join(parts, "; ")
}
