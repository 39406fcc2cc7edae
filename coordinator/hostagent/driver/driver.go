package driver

import (
	"context"
	"errors"

	"github.com/strata-sched/strata/interfaces"
)

// Driver runs shards on a host. Implementations must be safe for concurrent use:
// the agent calls Start and Stop from its executor and Measure from its reporter.
type Driver interface {
	// Start begins running spec under epoch. It returns once the shard is running
	// (or has failed to start). Starting a shard that is already running under the
	// same epoch is a no-op; under another epoch it is an error wrapping
	// interfaces.ErrConflict (the agent always stops before re-starting).
	Start(ctx context.Context, spec interfaces.Shard, epoch interfaces.Epoch) error
	// Stop stops the shard and returns once it no longer runs. Stopping a shard
	// that does not run returns an error wrapping interfaces.ErrNotFound; callers
	// that only need "not running" treat that as success.
	Stop(shard interfaces.ShardID) error
	// Measure returns the measured load of every running shard.
	Measure() map[interfaces.ShardID]interfaces.ShardLoad
}

// Closer is implemented by drivers that hold resources beyond their shards
// (listeners, processes). The agent calls Close when it shuts down.
type Closer interface {
	Close() error
}

// IgnoreNotFound returns nil for errors wrapping interfaces.ErrNotFound and err
// otherwise: stopping a shard that is already stopped is the desired end state.
func IgnoreNotFound(err error) error {
	if errors.Is(err, interfaces.ErrNotFound) {
		return nil
	}
	return err
}
