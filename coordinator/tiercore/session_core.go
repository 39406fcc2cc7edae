package tiercore

import (
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// LeaseConfig is how a tier counts its children's leases.
type LeaseConfig struct {
	// TTL is the lease a grant gives (a child fences at its own send of the
	// message the grant answers + TTL − its margin).
	TTL time.Duration
	// DriftMargin is added to a silent child's lease (and its stop budget)
	// before its shards may move: it covers the rate at which the two clocks
	// may drift apart over one lease.
	DriftMargin time.Duration
	// Grace is the extra wait, after the lease and margin, before a silent
	// child is declared lost.
	Grace time.Duration
	// Mutations: zero outside tests (see Mutations).
	Mutations Mutations
}

// Leases is the parent side of its children's leases, on the leader: when each
// child was last granted, since when this replica leads, which children are
// being declared lost. It says when a child's lease ends as this side counts it
// (LeaseEnd) — never before the child's own count ends — and so when a silent
// child's shards may be given to another. Lease grants are state a new leader
// does not inherit: it counts every child's lease from its own election
// (StepUp), which is at least as late as any grant its predecessor sent. It is
// not safe for concurrent use.
type Leases struct {
	cfg       LeaseConfig
	leading   bool
	term      uint64
	since     time.Time
	lastGrant map[interfaces.ChildID]time.Time
	declaring map[interfaces.ChildID]bool
	// dropped is when each child's last session ended (the
	// ReplaceOnSessionLoss mutant only).
	dropped map[interfaces.ChildID]time.Time
}

// NewLeases returns the lease state of a replica that does not lead.
func NewLeases(cfg LeaseConfig) *Leases {
	return &Leases{cfg: cfg, lastGrant: map[interfaces.ChildID]time.Time{}, declaring: map[interfaces.ChildID]bool{}, dropped: map[interfaces.ChildID]time.Time{}}
}

// StepUp: this replica leads in term from now on.
func (l *Leases) StepUp(term uint64, now time.Time) {
	l.leading, l.term, l.since = true, term, now
	clear(l.lastGrant)
	clear(l.declaring)
	clear(l.dropped)
}

// StepDown: this replica no longer leads; what it counted is forgotten.
func (l *Leases) StepDown() {
	l.leading = false
	clear(l.lastGrant)
	clear(l.declaring)
	clear(l.dropped)
}

// Leading reports whether this replica leads, and in which term.
func (l *Leases) Leading() (bool, uint64) { return l.leading, l.term }

// Grant decides whether a lease grant may leave for child at now, on a
// session opened in term: this replica still leads in that term, and the
// child is neither failed nor being declared lost. If so it records the grant:
// the child's lease, as this side counts it, runs from now.
func (l *Leases) Grant(child interfaces.ChildID, term uint64, failed bool, now time.Time) bool {
	if !l.leading || l.term != term || failed || l.declaring[child] {
		return false
	}
	l.lastGrant[child] = now
	delete(l.dropped, child)
	return true
}

// LastGrant is when child was last granted by this leader, if it was.
func (l *Leases) LastGrant(child interfaces.ChildID) (time.Time, bool) {
	t, ok := l.lastGrant[child]
	return t, ok
}

// SessionLost records that child's session ended at now. A lease outlives its
// session: only the ReplaceOnSessionLoss mutant counts this.
func (l *Leases) SessionLost(child interfaces.ChildID, now time.Time) {
	if l.leading {
		l.dropped[child] = now
	}
}

// LeaseEnd is when child's lease ends as this leader counts it: its last
// grant (or this leader's election, if later) plus TTL, the stop budget it
// announced and the drift margin. The child fences by then on its own clock
// (its lease is timed from its send of the message the grant answered, which
// preceded the grant's send) and has had its stop budget to stop its shards.
func (l *Leases) LeaseEnd(child interfaces.ChildID, stopBudget time.Duration) time.Time {
	end := LeaseEnd(l.lastGrant[child], l.since, l.cfg.TTL+stopBudget+l.cfg.DriftMargin)
	if d, ok := l.dropped[child]; ok && l.cfg.Mutations.ReplaceOnSessionLoss && d.Before(end) {
		end = d
	}
	return end
}

// LeaseEnd is the rule Leases.LeaseEnd applies: a child's lease, as its
// parent's leader counts it, ends wait (TTL + the child's stop budget + the
// drift margin) after its last grant, or after the leader's election (since)
// if that is later. tierd's loop (leaseEnd) applies the same rule to the
// state it keeps itself.
func LeaseEnd(lastGrant, since time.Time, wait time.Duration) time.Time {
	from := lastGrant
	if from.Before(since) {
		from = since
	}
	return from.Add(wait)
}

// Silent reports whether child's lease has ended at now (from this leader's
// view), and when it ended.
func (l *Leases) Silent(child interfaces.ChildID, stopBudget time.Duration, now time.Time) (time.Time, bool) {
	end := l.LeaseEnd(child, stopBudget)
	return end, now.After(end)
}

// StartDeclaring reports whether child is still silent past its lease, stop
// budget and grace at now and, if so, marks it as being declared lost: no
// grant leaves for it (Grant) until Declared. The driver then commits the
// child failed and may move its shards.
func (l *Leases) StartDeclaring(child interfaces.ChildID, stopBudget time.Duration, now time.Time) bool {
	if !l.leading || now.Before(l.LeaseEnd(child, stopBudget).Add(l.cfg.Grace)) {
		return false
	}
	l.declaring[child] = true
	return true
}

// Declared ends the declaration of child (committed or failed).
func (l *Leases) Declared(child interfaces.ChildID) { delete(l.declaring, child) }

// SentAssign is the last Assign sent for a shard: when, at which wire epoch,
// and whether the child acked it.
type SentAssign struct {
	At    time.Time
	Epoch uint64
	Acked bool
}

// Assigns tracks the last Assign sent per shard and its ack, so that a
// child's report re-sends an Assign only when it is due (AssignDue). The zero
// value is ready; it is not safe for concurrent use.
type Assigns struct {
	m map[interfaces.ShardID]SentAssign
}

// Sent records an Assign of shard at wire epoch sent at now.
func (a *Assigns) Sent(shard interfaces.ShardID, epoch uint64, now time.Time) {
	if a.m == nil {
		a.m = map[interfaces.ShardID]SentAssign{}
	}
	a.m[shard] = SentAssign{At: now, Epoch: epoch}
}

// Acked records the child's ack of the Assign of shard at wire epoch: ok, or
// refused (then it is due again at the next report). It reports whether the
// ack is of the last Assign sent.
func (a *Assigns) Acked(shard interfaces.ShardID, epoch uint64, ok bool) bool {
	st, found := a.m[shard]
	if !found || st.Epoch != epoch {
		return false
	}
	if ok {
		st.Acked = true
	} else {
		st.At = time.Time{}
	}
	a.m[shard] = st
	return true
}

// Last is the last Assign sent for shard.
func (a *Assigns) Last(shard interfaces.ShardID) (SentAssign, bool) {
	st, ok := a.m[shard]
	return st, ok
}

// Due reports whether an Assign of shard, which its owner does not run, is due
// again at now: when the child acked the last one and still does not run it
// (it fenced or lost it) after two report intervals, or when no ack came for
// four lease TTLs. A child busy with a burst of assigns is not flooded with
// copies.
func (a *Assigns) Due(shard interfaces.ShardID, now time.Time, reportInterval, ttl time.Duration) bool {
	last := a.m[shard]
	wait := 2 * reportInterval
	if !last.Acked {
		wait = 4 * ttl
	}
	return now.Sub(last.At) > wait
}
