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
	// Depth bounds the rounds in flight: verified and proposed to the log, not yet
	// committed (default 4). With 1 a round is verified only once the previous one
	// has committed.
	Depth int
	// MinPipelined is the fewest moves a round needs to start while other rounds
	// are in flight (default MaxBatch/8; 1 starts rounds as soon as a slot is
	// free). With no round in flight a round starts at once. Every round costs
	// an AppendEntries and an fsync on each replica, so tiny rounds in flight
	// would trade throughput for latency.
	MinPipelined int
}

// DefaultApplierDepth is ApplierConfig.Depth when it is 0.
const DefaultApplierDepth = 4

// Applier is the plan applier of a tier leader. Plans submitted concurrently are
// gathered into rounds (group commit): each round verifies all its plans' moves at
// once with balancer.Verify (through fsm.FSM.VerifyPlanPending) against the latest
// state, so moves accepted from one plan count against the next, then proposes the
// accepted moves in ApplyPlan log entries of at most MaxBatch moves, and answers
// every plan with its committed moves (and their new epochs) and its rejected moves
// (with reasons).
//
// Rounds are pipelined: up to Depth rounds may be in flight (proposed, not yet
// committed and applied) at once, so plans that arrive while a round commits are
// verified and proposed without waiting for that round. A round starts at once
// when none is in flight; while some are, it starts once it has MinPipelined
// moves (every round costs an AppendEntries and fsyncs on each replica, so a
// stream of tiny rounds would cost throughput), and while Depth rounds are in
// flight it keeps gathering: the busier the leader, the larger the batches.
//
// Safety with rounds in flight. Every move proposed and not yet resolved is
// pending; a new round is verified against the applied state plus the pending
// moves (fsm.FSM.VerifyPlanPending, which has the full argument), so:
//
//   - no shard is moved by two rounds in flight: while a pending move has not been
//     applied its shard reads as in flight and every new move of it is rejected;
//     once applied, the state shows the new owner and epoch;
//   - no child is overfilled when rounds overlap: a pending move's load counts on
//     its target until it has landed or can no longer land, and a child is
//     credited the load of a pending move out of it only once the move has landed;
//   - a round that fails or is rejected in part changes neither: a move the FSM
//     rejects (its compare-and-set failed) or that is lost with the leadership
//     only made the counts more conservative while it was pending. After any
//     failed round the applier lets the rounds in flight finish and issues a
//     Barrier before it verifies again, so it never verifies against a state that
//     misses entries of an unknown outcome.
//
// The state a round verifies against is current: the first round of a term, any
// round after a failure, and any round after other writers appended entries (the
// log grew by more than this applier's own entries) wait for the rounds in flight
// and start with a Barrier. Moves are also checked again by the FSM when applied
// (owner and epoch compare-and-set), so a write that slips in between verify and
// commit makes a move fail, never double-applies it. (The FSM does not check
// capacity: within one round, a move that fits only because an earlier move of the
// round frees its target relies on that move landing, as with a single plan.)
type Applier struct {
	t     *Tier
	cfg   ApplierConfig
	queue chan *planReq
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once

	commits  chan *round // loop → finisher, in proposal order
	finished chan *round // finisher → loop

	// Owned by the loop goroutine.
	term     uint64
	expect   uint64   // the log's last index if only this applier appended since the last barrier
	resync   bool     // a round failed: drain and barrier before verifying again
	inflight []*round // proposed, not yet finished, in order
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

// round is one verified round on its way through the log.
type round struct {
	live    []*planReq
	results []*PlanResult
	pending []fsm.Pending // the accepted moves, as proposed
	chunks  []*chunk
	failed  bool // set by the finisher: some entry's outcome is not known
}

type chunk struct {
	moves  []interfaces.Move
	owners []int
	f      raft.ApplyFuture
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
	if cfg.Depth <= 0 {
		cfg.Depth = DefaultApplierDepth
	}
	if cfg.MinPipelined <= 0 {
		cfg.MinPipelined = max(1, cfg.MaxBatch/8)
	}
	a := &Applier{t: t, cfg: cfg, queue: make(chan *planReq, cfg.QueueLen),
		stop: make(chan struct{}), done: make(chan struct{}),
		commits: make(chan *round, cfg.Depth), finished: make(chan *round, cfg.Depth)}
	go a.loop()
	return a
}

// Close stops the applier; queued plans fail with ErrApplierClosed, rounds in
// flight are answered first.
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
	fin := make(chan struct{})
	go a.finisher(fin)
	defer func() {
		// Answer the rounds in flight, then the plans still queued.
		close(a.commits)
		<-fin
		a.drain()
		close(a.done)
	}()
	var pending *planReq
	for {
		a.retire(false)
		var round []*planReq
		n := 0
		if pending != nil {
			round, n, pending = append(round, pending), len(pending.moves), nil
		}
		// Wait until the round may start: it has a plan and no round is in
		// flight, or a slot is free and it has MinPipelined moves (or is full).
		for len(round) == 0 || len(a.inflight) >= a.cfg.Depth ||
			len(a.inflight) > 0 && n < a.cfg.MinPipelined && pending == nil {
			var queue chan *planReq
			if pending == nil && n < a.cfg.MaxBatch {
				queue = a.queue
			}
			select {
			case r := <-queue:
				if len(round) > 0 && n+len(r.moves) > a.cfg.MaxBatch {
					pending = r // full: it starts the next round
					continue
				}
				round, n = append(round, r), n+len(r.moves)
			case r := <-a.finished:
				a.finish(r)
			case <-a.stop:
				if pending != nil {
					round = append(round, pending)
				}
				for _, r := range round {
					r.resp <- planResp{err: ErrApplierClosed}
				}
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

// retire takes finished rounds off the pending list: all of them when wait is
// set, else those already reported.
func (a *Applier) retire(wait bool) {
	for len(a.inflight) > 0 {
		if wait {
			a.finish(<-a.finished)
			continue
		}
		select {
		case r := <-a.finished:
			a.finish(r)
		default:
			return
		}
	}
}

func (a *Applier) finish(r *round) {
	// Rounds finish in proposal order (one finisher, raft applies in order).
	if len(a.inflight) > 0 && a.inflight[0] == r {
		a.inflight = a.inflight[1:]
	}
	if r.failed {
		a.resync = true
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

// round verifies the plans of one round and proposes the accepted moves; the
// finisher answers the plans once the entries are committed.
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
	// Make the FSM current: after a leadership change, after a failed round, or
	// when entries other than ours were appended since our last barrier. The
	// rounds in flight finish first, so that none of them is pending across the
	// barrier with an outcome the state already decides.
	if term := rf.CurrentTerm(); term != a.term || a.resync || rf.LastIndex() > a.expect {
		a.retire(true)
		if err := a.t.wait(context.Background(), rf.Barrier(a.t.cfg.Timeouts.Apply)); err != nil {
			fail(mapRaftErr(err, a.t.notLeader))
			return
		}
		// Entries appended after the barrier are concurrent with this round; the
		// FSM's compare-and-set still guards owners and epochs against them.
		a.term, a.expect, a.resync = term, rf.LastIndex(), false
	}

	// One Verify over all moves of the round, in submission order, against the
	// state plus the moves of the rounds in flight.
	var all []interfaces.Move
	owner := make([]int, 0, len(live)) // owner[i]: the request of all[i]
	for ri, r := range live {
		all = append(all, r.moves...)
		for range r.moves {
			owner = append(owner, ri)
		}
	}
	var pending []fsm.Pending
	for _, r := range a.inflight {
		pending = append(pending, r.pending...)
	}
	verdict, accepted := a.t.FSM.VerifyPlanPending(pending, all)
	rd := &round{live: live, results: make([]*PlanResult, len(live))}
	for i := range rd.results {
		rd.results[i] = &PlanResult{}
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
			rd.results[owner[i]].Rejected = append(rd.results[owner[i]].Rejected, verdict.Rejected[rj])
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
	if len(verdict.Accepted) == 0 {
		for i, r := range live {
			r.resp <- planResp{res: rd.results[i]}
		}
		return
	}
	// The accepted moves with the loads Verify counted, under the same lock.
	rd.pending = accepted

	// Propose the accepted moves in entries of at most MaxBatch moves; raft
	// pipelines them.
	var cmds [][]byte
	for lo := 0; lo < len(verdict.Accepted); lo += a.cfg.MaxBatch {
		hi := min(lo+a.cfg.MaxBatch, len(verdict.Accepted))
		c := &chunk{moves: verdict.Accepted[lo:hi], owners: acceptedOwner[lo:hi]}
		b, err := fsm.Encode(&fsm.ApplyPlan{Tier: a.cfg.Tier, Begin: a.cfg.Begin, Moves: c.moves})
		if err != nil {
			// Verify accepted it, so this is a bug, not bad input.
			fail(fmt.Errorf("encode plan batch: %w", err))
			return
		}
		rd.chunks, cmds = append(rd.chunks, c), append(cmds, b)
	}
	for i, c := range rd.chunks {
		c.f = rf.Apply(cmds[i], a.t.cfg.Timeouts.Apply)
		a.expect++
	}
	a.inflight = append(a.inflight, rd)
	a.commits <- rd
}

// finisher waits for each round's entries, in order, answers its plans and hands
// the round back to the loop.
func (a *Applier) finisher(fin chan<- struct{}) {
	defer close(fin)
	for rd := range a.commits {
		rd.failed = !a.complete(rd)
		a.finished <- rd
	}
}

// complete waits for a round's entries and answers its plans; false when some
// entry's outcome is unknown.
func (a *Applier) complete(rd *round) bool {
	var firstErr error
	committed := false
	for _, c := range rd.chunks {
		if err := a.t.wait(context.Background(), c.f); err != nil {
			if firstErr == nil {
				firstErr = mapRaftErr(err, a.t.notLeader)
			}
			continue
		}
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
			pr := rd.results[c.owners[i]]
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
		for _, r := range rd.live {
			r.resp <- planResp{err: firstErr}
		}
		return false
	}
	for i, r := range rd.live {
		r.resp <- planResp{res: rd.results[i]}
	}
	return true
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
