package tiercore

import (
	"slices"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// Unreachable lists, sorted, the live children this leader has not heard
// from for longer than silence: no grant answered a report of theirs since
// (or since this replica began to lead, if later). Failed children are not in
// it — the round moves their shards away — nor are children heard from
// recently.
//
// A child that has gone quiet still holds its lease: its shards run, and no
// other child may be given them until the lease ends and the child is
// declared failed. In the meantime a round must neither start moves to it (an
// Assign it cannot receive leaves the shard stopped everywhere: the revoke
// from the source lands, the start never does) nor start moves off it (the
// revoke cannot land either; the move would stop the shard only once the
// child comes back). Freeze and Reachable keep the round off these children.
func Unreachable(now, leaderSince time.Time, heard map[interfaces.ChildID]time.Time, children []interfaces.Child, silence time.Duration) []interfaces.ChildID {
	if silence <= 0 {
		return nil
	}
	var out []interfaces.ChildID
	for _, c := range children {
		if c.State == interfaces.ChildFailed {
			continue
		}
		last := heard[c.ID]
		if last.Before(leaderSince) {
			last = leaderSince
		}
		if now.Sub(last) > silence {
			out = append(out, c.ID)
		}
	}
	slices.Sort(out)
	return out
}

// Freeze returns the constraints that keep a solver's plan off the children
// in unreachable (sorted): every shard assigned to one stays there (a pin),
// and every other shard may use only the other children (allowed). When no
// child is reachable nothing is added (nothing can be placed; Reachable drops
// whatever a plan proposes).
func Freeze(v *interfaces.View, unreachable []interfaces.ChildID) []interfaces.Constraint {
	if len(unreachable) == 0 {
		return nil
	}
	const reason = "unreachable: no report heard for the silence limit (control.step_down_after); its shards stay until its lease ends"
	on := map[interfaces.ChildID][]interfaces.ShardID{}
	frozen := map[interfaces.ShardID]bool{}
	moving := map[interfaces.ShardID]bool{}
	for _, m := range v.InFlight {
		moving[m.Shard] = true // the move decides where it ends: no pin
	}
	for _, a := range v.Assignments {
		if moving[a.Shard] {
			frozen[a.Shard] = true
			continue
		}
		if _, ok := slices.BinarySearch(unreachable, a.Child); ok {
			on[a.Child] = append(on[a.Child], a.Shard)
			frozen[a.Shard] = true
		}
	}
	var out []interfaces.Constraint
	for _, c := range unreachable {
		if len(on[c]) > 0 {
			out = append(out, interfaces.Constraint{Kind: interfaces.ConstraintPin, Shards: on[c], Children: []interfaces.ChildID{c}, Reason: reason})
		}
	}
	var others []interfaces.ShardID
	for _, s := range v.Shards {
		if !frozen[s.ID] {
			others = append(others, s.ID)
		}
	}
	var reachable []interfaces.ChildID
	for _, c := range v.Children {
		if _, ok := slices.BinarySearch(unreachable, c.ID); !ok {
			reachable = append(reachable, c.ID)
		}
	}
	// A hard rule, not a preference: a solver that ignores an avoid (greedy
	// does) would plan the same dropped placement every round.
	if len(others) > 0 && len(reachable) > 0 {
		out = append(out, interfaces.Constraint{Kind: interfaces.ConstraintAllowed, Shards: others, Children: reachable, Reason: reason})
	}
	return out
}

// Reachable returns the moves that touch no child in unreachable (sorted),
// and how many it dropped.
func Reachable(moves []interfaces.Move, unreachable []interfaces.ChildID) ([]interfaces.Move, int) {
	if len(unreachable) == 0 {
		return moves, 0
	}
	in := func(c interfaces.ChildID) bool { _, ok := slices.BinarySearch(unreachable, c); return ok }
	out := moves[:0:0]
	for _, m := range moves {
		if (m.From != "" && in(m.From)) || in(m.To) {
			continue
		}
		out = append(out, m)
	}
	return out, len(moves) - len(out)
}
