package interfaces

import "errors"

// Status is the outcome of a placement decision. Infeasible is a result, not an
// error: the caller keeps the current assignment and reports why.
type Status uint8

// Statuses. Only ever append.
const (
	StatusOK         Status = iota // every shard placed
	StatusInfeasible               // some shards could not be placed; see Plan.Infeasible
	StatusPartial                  // a budget (time, moves, deadline) ended the solve early; the plan is valid, shards it had not reached may be unplaced
)

var statusNames = [...]string{"ok", "infeasible", "partial"}

func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "unknown"
}

// Sentinel errors, compared with errors.Is. They map onto gRPC codes at the wire.
var (
	// ErrInvalid: the input is malformed (gRPC InvalidArgument).
	ErrInvalid = errors.New("invalid argument")
	// ErrNotFound: a named shard, job, child or tier does not exist (NotFound).
	ErrNotFound = errors.New("not found")
	// ErrStaleEpoch: a message carries an epoch older than the one held
	// (FailedPrecondition).
	ErrStaleEpoch = errors.New("stale epoch")
	// ErrConflict: the state changed since the caller read it (FailedPrecondition).
	ErrConflict = errors.New("conflict")
	// ErrNotLeader: the replica is not the leader; the error says where it is
	// (Unavailable).
	ErrNotLeader = errors.New("not leader")
)
