package tierd

import (
	"context"
	"errors"
	"maps"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-sched/strata/coordinator/tiercore"
)

// watchChildren is the leader's cut-off watch (tiercore.CutOff): when most of
// the children it heard from in its term go silent together, it hands its
// leadership to another replica, which the children — cycling through the
// group's replicas — may still reach. It runs on every replica and acts only
// while this one leads.
//
// The children counted are those this replica heard from in any of its terms
// (within the window): Raft may elect a cut-off leader again — it still reaches
// its followers — and in its new term it has heard from nobody. It steps down
// again once it has led for the silence limit without hearing from them; a
// failed transfer is retried after twice the limit.
//
// A lull of this process (a pause, a stalled machine) silences every child at
// once as this replica sees it — it sent no grants — without anyone being cut
// off: a tick that comes late by more than half the silence limit starts the
// watch over, so that the children's queued reports are answered first.
func (d *Daemon) watchChildren(ctx context.Context) {
	rule := tiercore.CutOff{Silence: d.cfg.StepDownAfter, Window: d.cfg.LeaseTTL + d.cfg.StepDownAfter}
	if rule.Silence <= 0 {
		return
	}
	every := max(rule.Silence/8, time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	last := time.Now()
	var settled time.Time // no evaluation before it (the end of a lull plus the silence)
	var tried time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		if now.Sub(last) > rule.Silence/2 {
			settled = now.Add(rule.Silence)
		}
		last = now
		if now.Before(settled) || now.Sub(tried) < 2*rule.Silence {
			continue
		}
		d.mu.Lock()
		leading, since, term := d.leader, d.leaderSince, d.leaderTerm
		heard := maps.Clone(d.heard)
		d.mu.Unlock()
		if !leading {
			continue
		}
		lost, silent, counted := rule.Lost(now, since, heard)
		if !lost {
			continue
		}
		tried = now
		d.logger.Printf("cut off from my children: %d of the %d heard from in term %d silent for over %v; handing leadership over", silent, counted, term, rule.Silence)
		d.scope.Counter("leader_cut_off_total").Inc(1)
		go func() {
			if err := d.tier.Raft().LeadershipTransfer().Error(); err != nil && !errors.Is(err, raft.ErrNotLeader) {
				d.logger.Printf("leadership transfer: %v", err)
			}
		}()
	}
}
