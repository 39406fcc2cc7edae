package driver

import (
	"context"
	"errors"
	"time"

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

// StopBudgeter is implemented by drivers whose Stop may take long: StopBudget
// is the longest a Stop can take (a graceful stop's timeout plus the kill).
// The agent announces it in its Hello, and its parent waits that much longer
// before it places a silent host's shards elsewhere (the host may still be
// stopping them after its fence). Drivers without it stop at once.
type StopBudgeter interface {
	StopBudget() time.Duration
}

// LeaseHolder is implemented by drivers whose shards hold the host's lease
// themselves and stop at its end even when the agent cannot stop them (frozen
// by SIGSTOP, dead): the exec driver's supervisor processes, the callback
// driver's SDK workers. Start's context carries the lease deadline of a new
// shard; after that the agent calls RenewLease every time its lease deadline
// changes, with the time left until its own fence as measured on its clock
// just before the call (a renewal the parent granted while the agent was busy
// too, as soon as it arrives). Calls are serialised; RenewLease must not
// block for long (a worker that does not take a renewal at once misses it
// and stops at the deadline it has). A left ≤ 0 ends the lease now.
type LeaseHolder interface {
	RenewLease(left time.Duration)
}

// MaxStopTimeout bounds a driver's stop timeout: a parent refuses a stop budget
// above an hour (coordinator/tierd), and a driver adds a little to its timeout.
const MaxStopTimeout = 30 * time.Minute

// StopBudget is d's StopBudget, or 0 when d does not say.
func StopBudget(d Driver) time.Duration {
	if b, ok := d.(StopBudgeter); ok {
		return b.StopBudget()
	}
	return 0
}

// IgnoreNotFound returns nil for errors wrapping interfaces.ErrNotFound and err
// otherwise: stopping a shard that is already stopped is the desired end state.
func IgnoreNotFound(err error) error {
	if errors.Is(err, interfaces.ErrNotFound) {
		return nil
	}
	return err
}
