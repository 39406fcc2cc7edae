package control

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/interfaces"
)

// Backoff is the backstop against a plan the commit keeps refusing: a move
// (a shard to a target child) that the commit's verification rejects for the
// same reason (its RejectCode) After rounds in a row is held for Hold — not
// planned again (Rules keeps it out of the policy's view), and refused by
// Decision.Admit in a plan that proposes it anyway (a policy that ignores the
// view's rules). The Controller keeps one (Config.HoldAfter, HoldFor) and is
// told the commit's rejections in RoundResult.Rejected. Without it, a disagreement between what a policy plans and what
// the commit accepts made a tier re-propose one move every round for as long
// as it lasted (issue 20, item 6: 249 times in two minutes), with nothing
// marking the shard.
//
// Backoff is pure and deterministic: time comes in as now, and the same
// observations give the same holds. The zero value holds after
// DefaultBackoffAfter rejections for DefaultBackoffHold; it is not safe for
// concurrent use.
type Backoff struct {
	// After is how many rejections in a row, for the same reason, hold a
	// move (0 = DefaultBackoffAfter).
	After int
	// Hold is how long a held move stays held (0 = DefaultBackoffHold).
	Hold time.Duration

	moves map[backoffKey]*backoffEntry
}

// Backoff defaults.
const (
	DefaultBackoffAfter = 3
	DefaultBackoffHold  = time.Minute
)

type backoffKey struct {
	shard interfaces.ShardID
	to    interfaces.ChildID
}

type backoffEntry struct {
	code   balancer.RejectCode
	n      int       // rejections in a row with code
	reason string    // the last rejection's
	last   time.Time // when it was last rejected
	until  time.Time // held until (zero: not held)
}

// Held is a move the backoff holds.
type Held struct {
	Shard interfaces.ShardID
	To    interfaces.ChildID
	// Rejections is how many times in a row the commit rejected it, Code and
	// Reason the last rejection's.
	Rejections int
	Code       balancer.RejectCode
	Reason     string
	Until      time.Time
}

// String says what is held and why, for logs and explanations.
func (h Held) String() string {
	return fmt.Sprintf("backoff: move of %s to %s held until %s: rejected %d times in a row (%s: %s)",
		h.Shard, h.To, h.Until.UTC().Format(time.RFC3339), h.Rejections, h.Code, h.Reason)
}

func (b *Backoff) after() int {
	if b.After > 0 {
		return b.After
	}
	return DefaultBackoffAfter
}

func (b *Backoff) hold() time.Duration {
	if b.Hold > 0 {
		return b.Hold
	}
	return DefaultBackoffHold
}

// Observe counts one commit's verdict at now: each rejected move counts once
// more for its reason (a different reason starts the count again), a move
// whose count reaches After is held until now+Hold (returned, in verdict
// order), and an accepted move of a shard forgets every count of that shard.
// Moves already held are not counted again.
func (b *Backoff) Observe(now time.Time, rejected []balancer.Rejection, accepted []interfaces.Move) []Held {
	b.expire(now)
	if len(accepted) > 0 && len(b.moves) > 0 {
		moved := make(map[interfaces.ShardID]bool, len(accepted))
		for _, m := range accepted {
			moved[m.Shard] = true
		}
		for k := range b.moves {
			if moved[k.shard] {
				delete(b.moves, k)
			}
		}
	}
	var held []Held
	for _, r := range rejected {
		k := backoffKey{r.Move.Shard, r.Move.To}
		e := b.moves[k]
		if e == nil {
			if b.moves == nil {
				b.moves = map[backoffKey]*backoffEntry{}
			}
			e = &backoffEntry{}
			b.moves[k] = e
		}
		if !e.until.IsZero() {
			continue
		}
		if e.code != r.Code {
			e.code, e.n = r.Code, 0
		}
		e.n++
		e.reason, e.last = r.Reason, now
		if e.n >= b.after() {
			e.until = now.Add(b.hold())
			held = append(held, b.held(k, e))
		}
	}
	return held
}

// expire forgets the holds that ended by now (the move may be planned
// again, and counts from zero), and the counts of moves last rejected a Hold
// ago or more (not proposed since: no longer "in a row"; this also bounds
// the memory to the moves rejected within one Hold).
func (b *Backoff) expire(now time.Time) {
	for k, e := range b.moves {
		if e.until.IsZero() {
			if now.Sub(e.last) >= b.hold() {
				delete(b.moves, k)
			}
		} else if !now.Before(e.until) {
			delete(b.moves, k)
		}
	}
}

func (b *Backoff) held(k backoffKey, e *backoffEntry) Held {
	return Held{Shard: k.shard, To: k.to, Rejections: e.n, Code: e.code, Reason: e.reason, Until: e.until}
}

// Held returns the moves held at now, sorted by shard and target.
func (b *Backoff) Held(now time.Time) []Held {
	b.expire(now)
	var out []Held
	for k, e := range b.moves {
		if !e.until.IsZero() {
			out = append(out, b.held(k, e))
		}
	}
	slices.SortFunc(out, func(x, y Held) int {
		if c := strings.Compare(string(x.Shard), string(y.Shard)); c != 0 {
			return c
		}
		return strings.Compare(string(x.To), string(y.To))
	})
	return out
}

// Rules returns, for the shards of v with held moves at now, the rules that
// keep the policy off the held targets (interfaces.ConstraintAllowed: every
// child of v but those, as the anti-bounce rules), one per shard, in shard
// order. A shard held off every child is allowed none (infeasible until the
// hold ends).
func (b *Backoff) Rules(now time.Time, v *interfaces.View) []interfaces.Constraint {
	held := b.Held(now)
	var out []interfaces.Constraint
	for i := 0; i < len(held); {
		j := i
		var ex []string
		for j < len(held) && held[j].Shard == held[i].Shard {
			ex = append(ex, string(held[j].To))
			j++
		}
		allowed := []interfaces.ChildID{}
		for _, c := range v.Children {
			if !slices.Contains(ex, string(c.ID)) {
				allowed = append(allowed, c.ID)
			}
		}
		out = append(out, interfaces.Constraint{Kind: interfaces.ConstraintAllowed, Shards: []interfaces.ShardID{held[i].Shard}, Children: allowed,
			Reason: fmt.Sprintf("backoff: not to %s until %s (the commit rejected it %d times in a row: %s)", strings.Join(ex, ","), held[i].Until.UTC().Format(time.RFC3339), held[i].Rejections, held[i].Code)})
		i = j
	}
	return out
}

// Reset forgets everything (a new leader starts afresh).
func (b *Backoff) Reset() { b.moves = nil }
