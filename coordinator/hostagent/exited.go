package hostagent

import (
	"context"

	"github.com/strata-sched/strata/interfaces"
)

// exitWatcher is implemented by drivers whose shard processes can end on their
// own (the exec driver): ExitError says whether shard's process ended and how.
type exitWatcher interface {
	ExitError(shard interfaces.ShardID) (why string, exited bool)
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
