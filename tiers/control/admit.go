package control

import (
	"fmt"
	"slices"

	"github.com/strata-sched/strata/interfaces"
)

// Apply returns the view to solve this round: a shallow copy of v with the
// children declared failed marked failed and the decision's constraints
// appended. v itself is not modified.
func (d *Decision) Apply(v *interfaces.View) *interfaces.View {
	vv := *v
	if len(d.DeclareFailed) > 0 {
		vv.Children = make([]interfaces.Child, len(v.Children))
		for i, ch := range v.Children {
			if slices.Contains(d.DeclareFailed, ch.ID) {
				ch.State = interfaces.ChildFailed
			}
			vv.Children[i] = ch
		}
	}
	if len(d.Constraints) > 0 {
		vv.Constraints = make([]interfaces.Constraint, 0, len(v.Constraints)+len(d.Constraints))
		vv.Constraints = append(append(vv.Constraints, v.Constraints...), d.Constraints...)
	}
	return &vv
}

// Rejection is a planned move Admit refused, with the rule it broke.
type Rejection struct {
	Move interfaces.Move
	Why  string
}

// Admit keeps the moves of plan that the decision allows, in plan order: none
// in a hold round; in an emergency round only the moves of the shards to
// evacuate; in a periodic round at most MaxMoves relocations and MaxBytes state
// bytes (first placements are free); never a move of a shard back to a
// child it recently left; and never a move held back after the commit
// rejected it HoldAfter rounds in a row (Backoff). v is the view the plan was made from (for state
// sizes). The caller still verifies the admitted moves against its state.
func (d *Decision) Admit(v *interfaces.View, plan interfaces.Plan) (accepted []interfaces.Move, rejected []Rejection) {
	bytes := map[interfaces.ShardID]int64{}
	if v != nil {
		for i := range v.Shards {
			bytes[v.Shards[i].ID] = v.Shards[i].StateBytes
		}
	}
	evac := make(map[interfaces.ShardID]bool, len(d.Evacuate))
	for _, id := range d.Evacuate {
		evac[id] = true
	}
	moved, movedBytes := 0, int64(0)
	for _, m := range plan.Moves {
		why := ""
		switch {
		case d.Mode == ModeHold:
			why = "hold round: " + d.Record.Why
		case d.held[backoffKey{m.Shard, m.To}].Shard != "":
			why = d.held[backoffKey{m.Shard, m.To}].String()
		case d.Mode == ModeEmergency && !evac[m.Shard]:
			why = "emergency round: only unplaced shards and shards of failed or draining children move"
		case !evac[m.Shard] && slices.Contains(d.bounce[m.Shard], m.To):
			why = fmt.Sprintf("anti-bounce: %s recently left %s", m.Shard, m.To)
		case d.Mode == ModePeriodic && m.From != "":
			if (d.MaxMoves > 0 && moved+1 > d.MaxMoves) || (d.MaxBytes > 0 && bytes[m.Shard] > d.MaxBytes-movedBytes) {
				why = fmt.Sprintf("over the round's budget (%d moves, %d bytes)", d.MaxMoves, d.MaxBytes)
			} else {
				moved++
				movedBytes += bytes[m.Shard]
			}
		}
		if why != "" {
			rejected = append(rejected, Rejection{Move: m, Why: why})
			continue
		}
		accepted = append(accepted, m)
	}
	return accepted, rejected
}
