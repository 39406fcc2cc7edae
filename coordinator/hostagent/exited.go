package hostagent

import (
	"context"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// exitWatcher is implemented by drivers whose shard processes can end on their
// own (the exec driver): ExitError says whether shard's process ended and how.
type exitWatcher interface {
	ExitError(shard interfaces.ShardID) (why string, exited bool)
}

// stopTimer is implemented by drivers that know when a shard's process had
// really ended, when a Stop found it ended already (the exec driver: its
// supervisor fenced it while the agent was frozen, or it exited on its
// own): the ledger's stop then carries that time, so that the interval the
// ledger records still covers the real run but no more of it — a frozen
// agent's ledger would otherwise show its shards running until it thawed,
// overlapping their next owner's.
type stopTimer interface {
	StoppedAt(shard interfaces.ShardID) (time.Time, bool)
}

// stopTime is the ledger time of a stop of shard the driver has just done.
func (a *Agent) stopTime(shard interfaces.ShardID) int64 {
	now := a.cfg.Clock.Now()
	if st, ok := a.cfg.Driver.(stopTimer); ok {
		if t, ok := st.StoppedAt(shard); ok && t.Before(now) {
			return t.UnixNano()
		}
	}
	return now.UnixNano()
}

// reapExited drops the running shards whose process ended on its own
// (Core.Exited): they are stopped and tombstoned, and the parent learns of
// the failure when it assigns them again (ErrShardFailed in the ack).
func (a *Agent) reapExited(ctx context.Context) error {
	w, ok := a.cfg.Driver.(exitWatcher)
	if !ok {
		return nil
	}
	return a.step(ctx, func(c *Core) ([]Effect, error) {
		var effs []Effect
		for _, id := range c.Running() {
			why, exited := w.ExitError(id)
			if !exited {
				continue
			}
			r, _ := c.Record(id)
			effs = append(effs, c.Exited(id, r.Epoch, why)...)
		}
		return effs, nil
	})
}
