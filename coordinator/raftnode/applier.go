package raftnode

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/hashicorp/raft"
	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/interfaces"
)

// ApplierConfig configures the plan applier.
type ApplierConfig struct {
	// Tier names the tier in the applied-plan log.
	Tier string
	// MaxBatch bounds the moves in one log entry (default 1024). A round gathers
	// queued plans up to this many moves; a larger plan is committed in several
	// entries.
	MaxBatch int
	// Begin commits moves as in flight (BeginMove: revoke → ack → commit) instead
	// of committing the new owner at once.
	Begin bool
	// QueueLen is how many plans may wait for a round (default 4096).
	QueueLen int
}

// Applier is the plan applier of a tier leader. Plans submitted concurrently are
// gathered into rounds (group commit): each round verifies all its plans' moves at
// once with balancer.Verify (through fsm.FSM.VerifyPlan) against the latest state,
// so moves accepted from one plan count against the next, then commits the accepted
// moves in ApplyPlan log entries of at most MaxBatch moves, and answers every plan
// with its committed moves (and their new epochs) and its rejected moves (with
// reasons). While a round commits, the next one queues: the busier the leader, the
// larger the batches.
//
// The state a round verifies against is current: the first round of a term, and
// any round after other writers appended entries, starts with a Barrier. Moves are
// also checked again by the FSM when applied (owner and epoch compare-and-set), so a
// write that slips in between verify and commit makes a move fail, never
// double-applies it.
type Applier struct {
	t     *Tier
	cfg   ApplierConfig
	queue chan *planReq
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once

	// Owned by the loop goroutine.
	term      uint64
	lastIndex uint64
}

// CommittedMove is a move the log committed, with the shard's new epoch.
type CommittedMove struct {
	Move  interfaces.Move
	Epoch interfaces.Epoch
}

// PlanResult is the applier's answer for one plan.
type PlanResult struct {
	// Indexes are the log indexes of the entries that carried the plan's moves.
	Indexes   []uint64
	Committed []CommittedMove
	Rejected  []balancer.Rejection
}

type planReq struct {
	ctx   context.Context
	moves []interfaces.Move
	resp  chan planResp
}

type planResp struct {
	res *PlanResult
	err error
}

// ErrApplierClosed is returned by Submit after Close.
var ErrApplierClosed = errors.New("plan applier closed")

// NewApplier starts an applier for the tier replica t. It serves only while t
// leads (plans sent to a follower fail with *NotLeaderError).
func NewApplier(t *Tier, cfg ApplierConfig) *Applier {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 1024
	}
	if cfg.QueueLen <= 0 {
		cfg.QueueLen = 4096
	}
	a := &Applier{t: t, cfg: cfg, queue: make(chan *planReq, cfg.QueueLen),
		stop: make(chan struct{}), done: make(chan struct{})}
	go a.loop()
	return a
}

// Close stops the applier; queued plans fail with ErrApplierClosed.
func (a *Applier) Close() {
	a.once.Do(func() { close(a.stop) })
	<-a.done
}

// Submit verifies and commits a plan's moves and returns what happened to each.
// A rejected move is a result, not an error; the error is about the commit itself
// (not leader, outcome unknown, context ended, applier closed).
func (a *Applier) Submit(ctx context.Context, plan interfaces.Plan) (*PlanResult, error) {
	if len(plan.Moves) == 0 {
		return &PlanResult{}, nil
	}
	if !a.t.IsLeader() {
		return nil, a.t.notLeader()
	}
	// Malformed moves (over-long reasons, non-finite deltas, ...) are refused here,
	// so that one bad plan cannot fail the round it would share with others.
	if _, err := fsm.Encode(&fsm.ApplyPlan{Tier: a.cfg.Tier, Begin: a.cfg.Begin, Moves: plan.Moves}); err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	req := &planReq{ctx: ctx, moves: plan.Moves, resp: make(chan planResp, 1)}
	select {
	case a.queue <- req:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-a.stop:
		return nil, ErrApplierClosed
	}
	select {
	case r := <-req.resp:
		return r.res, r.err
	case <-ctx.Done():
		// The round may still commit the plan: its outcome is unknown to us.
		return nil, fmt.Errorf("plan submit: %w: %w", ctx.Err(), ErrIndeterminate)
	case <-a.done:
		return nil, ErrApplierClosed
	}
}

func (a *Applier) loop() {
	defer close(a.done)
	var pending *planReq
	for {
		var round []*planReq
		n := 0
		if pending != nil {
			round, n, pending = append(round, pending), len(pending.moves), nil
		} else {
			select {
			case r := <-a.queue:
				round, n = append(round, r), len(r.moves)
			case <-a.stop:
				a.drain()
				return
			}
		}
	gather:
		for n < a.cfg.MaxBatch {
			select {
			case r := <-a.queue:
				if n+len(r.moves) > a.cfg.MaxBatch {
					pending = r
					break gather
				}
				round, n = append(round, r), n+len(r.moves)
			default:
				break gather
			}
		}
		a.round(round)
	}
}

func (a *Applier) drain() {
	for {
		select {
		case r := <-a.queue:
			r.resp <- planResp{err: ErrApplierClosed}
		default:
			return
		}
	}
}

// round verifies and commits the plans of one round.
func (a *Applier) round(reqs []*planReq) {
	live := reqs[:0:0]
	for _, r := range reqs {
		if err := r.ctx.Err(); err != nil {
			r.resp <- planResp{err: err}
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	fail := func(err error) {
		for _, r := range live {
			r.resp <- planResp{err: err}
		}
	}
	rf := a.t.Raft()
	if rf.State() != raft.Leader {
		fail(a.t.notLeader())
		return
	}
	// Make the FSM current: after a leadership change, or when entries other than
	// ours were appended since our last round.
	if term := rf.CurrentTerm(); term != a.term || rf.LastIndex() != a.lastIndex {
		if err := a.t.wait(context.Background(), rf.Barrier(a.t.cfg.Timeouts.Apply)); err != nil {
			fail(mapRaftErr(err, a.t.notLeader))
			return
		}
		// Entries appended after the barrier are concurrent with this round; the
		// FSM's compare-and-set still guards owners and epochs against them.
		a.term, a.lastIndex = term, rf.LastIndex()
	}

	// One Verify over all moves of the round, in submission order.
	var all []interfaces.Move
	owner := make([]int, 0, len(live)) // owner[i]: the request of all[i]
	for ri, r := range live {
		all = append(all, r.moves...)
		for range r.moves {
			owner = append(owner, ri)
		}
	}
	verdict := a.t.FSM.VerifyPlan(all)
	results := make([]*PlanResult, len(live))
	for i := range results {
		results[i] = &PlanResult{}
	}
	// Rejections carry the move; find their request by walking in order (Verify
	// keeps plan order in both lists).
	acceptedOwner := make([]int, 0, len(verdict.Accepted))
	ai, rj := 0, 0
	for i, m := range all {
		switch {
		case ai < len(verdict.Accepted) && sameMove(verdict.Accepted[ai], m):
			acceptedOwner = append(acceptedOwner, owner[i])
			ai++
		case rj < len(verdict.Rejected) && sameMove(verdict.Rejected[rj].Move, m):
			results[owner[i]].Rejected = append(results[owner[i]].Rejected, verdict.Rejected[rj])
			rj++
		}
	}

	if len(acceptedOwner) != len(verdict.Accepted) || rj != len(verdict.Rejected) {
		// Verify must return every move once, unchanged, in order; anything else
		// is a bug, and committing blind would misreport results.
		fail(fmt.Errorf("plan applier: verdict does not match the %d submitted moves (%d accepted, %d rejected, matched %d and %d)",
			len(all), len(verdict.Accepted), len(verdict.Rejected), len(acceptedOwner), rj))
		return
	}

	// Commit the accepted moves in entries of at most MaxBatch moves, pipelined.
	type chunk struct {
		moves  []interfaces.Move
		owners []int
		f      raft.ApplyFuture
	}
	var chunks []*chunk
	for lo := 0; lo < len(verdict.Accepted); lo += a.cfg.MaxBatch {
		hi := min(lo+a.cfg.MaxBatch, len(verdict.Accepted))
		c := &chunk{moves: verdict.Accepted[lo:hi], owners: acceptedOwner[lo:hi]}
		b, err := fsm.Encode(&fsm.ApplyPlan{Tier: a.cfg.Tier, Begin: a.cfg.Begin, Moves: c.moves})
		if err != nil {
			// Verify accepted it, so this is a bug, not bad input.
			fail(fmt.Errorf("encode plan batch: %w", err))
			return
		}
		c.f = rf.Apply(b, a.t.cfg.Timeouts.Apply)
		chunks = append(chunks, c)
	}
	var firstErr error
	committed := false
	for _, c := range chunks {
		if err := a.t.wait(context.Background(), c.f); err != nil {
			if firstErr == nil {
				firstErr = mapRaftErr(err, a.t.notLeader)
			}
			continue
		}
		a.lastIndex = c.f.Index()
		committed = true
		res, ok := c.f.Response().(*fsm.Result)
		if !ok || len(res.Ops) != len(c.moves) {
			if firstErr == nil {
				firstErr = fmt.Errorf("entry %d: unexpected FSM response %T", c.f.Index(), c.f.Response())
			}
			continue
		}
		seen := map[int]bool{}
		for i, op := range res.Ops {
			pr := results[c.owners[i]]
			if !seen[c.owners[i]] {
				pr.Indexes = append(pr.Indexes, c.f.Index())
				seen[c.owners[i]] = true
			}
			if op.Err != nil {
				pr.Rejected = append(pr.Rejected, balancer.Rejection{Move: c.moves[i], Code: rejectCodeOf(op.Err), Reason: op.Err.Error()})
				continue
			}
			pr.Committed = append(pr.Committed, CommittedMove{Move: c.moves[i], Epoch: op.Epoch})
		}
	}
	if firstErr != nil {
		// Some entries may have committed: the plans' outcomes are unknown.
		if committed || !errors.Is(firstErr, interfaces.ErrNotLeader) && !errors.Is(firstErr, ErrIndeterminate) {
			firstErr = fmt.Errorf("%w: %w", firstErr, ErrIndeterminate)
		}
		fail(firstErr)
		return
	}
	for i, r := range live {
		r.resp <- planResp{res: results[i]}
	}
}

func sameMove(a, b interfaces.Move) bool {
	return a.Shard == b.Shard && a.From == b.From && a.To == b.To && a.Epoch == b.Epoch && a.Reason == b.Reason
}

// rejectCodeOf maps an FSM apply error onto the verify codes.
func rejectCodeOf(err error) balancer.RejectCode {
	switch {
	case errors.Is(err, interfaces.ErrStaleEpoch):
		return balancer.RejectStaleEpoch
	case errors.Is(err, interfaces.ErrNotFound):
		return balancer.RejectUnknownShard
	case errors.Is(err, interfaces.ErrInvalid):
		return balancer.RejectInvalid
	}
	return balancer.RejectWrongOwner
}
