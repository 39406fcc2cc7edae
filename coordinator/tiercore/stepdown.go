package tiercore

import (
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// CutOff is the rule by which a leader that its children cannot reach hands
// its leadership to another replica of its group.
//
// Raft keeps a leader that reaches a quorum of its followers, whether or not
// its children reach it: a leader partitioned from the children but not from
// the followers would lead on, its children would find only followers (which
// redirect to it) and their leases would run out, stopping shards that nobody
// else was given. A child cannot elect a leader; the leader can notice it is
// cut off — its children have gone quiet together — and transfer leadership
// to a follower the children may still reach.
//
// The rule: this replica has led for at least Silence, and more than half of
// the children it heard from in its term within Window (a grant answered a
// report of theirs) have not been heard from for Silence. One child going
// quiet is that child's fault (a host down or cut off: its lease runs out and
// its shards move, as they should); most of them at once is this replica's.
// A new leader has heard from nobody, so a group whose children are all down
// does not pass leadership around: each replica steps down at most once for
// the children it lost.
type CutOff struct {
	// Silence is how long a child may go unheard before it counts as lost
	// (a few report intervals; well inside the children's lease so that they
	// find the new leader before their leases end).
	Silence time.Duration
	// Window bounds which children count: those heard within it (a child gone
	// for longer is down, not cut off, and its absence says nothing of this
	// replica). At least Silence.
	Window time.Duration
}

// Lost reports whether the leader should step down at now: it has led since
// leaderSince and heard holds, per child, when it last heard from it in this
// term. It also returns how many counted children are silent and how many
// count, for the log line.
func (c CutOff) Lost(now, leaderSince time.Time, heard map[interfaces.ChildID]time.Time) (lost bool, silent, counted int) {
	if c.Silence <= 0 || now.Sub(leaderSince) < c.Silence {
		return false, 0, 0
	}
	window := max(c.Window, c.Silence)
	for _, at := range heard {
		age := now.Sub(at)
		if age > window {
			continue
		}
		counted++
		if age > c.Silence {
			silent++
		}
	}
	return counted > 0 && 2*silent > counted, silent, counted
}
