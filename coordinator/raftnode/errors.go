package raftnode

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
	"github.com/strata-sched/strata/interfaces"
)

// ErrIndeterminate: the command was handed to Raft but the outcome is unknown (the
// leader lost leadership or shut down, or the wait timed out before the entry was
// applied). It may or may not commit; callers retry with an idempotent or
// compare-and-set command, or read to find out.
var ErrIndeterminate = errors.New("outcome unknown: the command may or may not have committed")

// NotLeaderError says this replica is not the leader and, when known, where the
// leader is. errors.Is(err, interfaces.ErrNotLeader) holds. The command was not
// appended to the log.
type NotLeaderError struct {
	LeaderID    string `json:"leader_id,omitempty"`
	LeaderAddr  string `json:"leader_addr,omitempty"`
	LeaderAdmin string `json:"leader_admin,omitempty"`
}

func (e *NotLeaderError) Error() string {
	if e.LeaderID == "" && e.LeaderAddr == "" {
		return "not leader: no leader known (election in progress?)"
	}
	s := fmt.Sprintf("not leader: leader is %s at %s", e.LeaderID, e.LeaderAddr)
	if e.LeaderAdmin != "" {
		s += " (admin " + e.LeaderAdmin + ")"
	}
	return s
}

// Unwrap makes errors.Is(err, interfaces.ErrNotLeader) true.
func (e *NotLeaderError) Unwrap() error { return interfaces.ErrNotLeader }

// Error codes on the admin endpoint's JSON errors. They map onto the sentinel errors
// so that errors.Is works on the client side.
const (
	CodeInvalid       = "invalid"
	CodeNotFound      = "not_found"
	CodeStaleEpoch    = "stale_epoch"
	CodeConflict      = "conflict"
	CodeNotLeader     = "not_leader"
	CodeIndeterminate = "indeterminate"
	CodeInternal      = "internal"
	// CodeForbidden: a raw write on a replica that serves none (no sentinel).
	CodeForbidden = "forbidden"
)

// codeOf classifies err for the wire.
func codeOf(err error) string {
	switch {
	case errors.Is(err, interfaces.ErrInvalid):
		return CodeInvalid
	case errors.Is(err, interfaces.ErrNotFound):
		return CodeNotFound
	case errors.Is(err, interfaces.ErrStaleEpoch):
		return CodeStaleEpoch
	case errors.Is(err, interfaces.ErrConflict):
		return CodeConflict
	case errors.Is(err, interfaces.ErrNotLeader):
		return CodeNotLeader
	case errors.Is(err, ErrIndeterminate):
		return CodeIndeterminate
	}
	return CodeInternal
}

// sentinelOf is the inverse of codeOf; nil for internal errors.
func sentinelOf(code string) error {
	switch code {
	case CodeInvalid:
		return interfaces.ErrInvalid
	case CodeNotFound:
		return interfaces.ErrNotFound
	case CodeStaleEpoch:
		return interfaces.ErrStaleEpoch
	case CodeConflict:
		return interfaces.ErrConflict
	case CodeNotLeader:
		return interfaces.ErrNotLeader
	case CodeIndeterminate:
		return ErrIndeterminate
	}
	return nil
}

// RemoteError is an error reported by a replica's admin endpoint. errors.Is matches
// the sentinel its code names.
type RemoteError struct {
	Code    string `json:"code"`
	Message string `json:"error"`
	// LeaderAdmin is set with CodeNotLeader when the replica knows the leader.
	LeaderAdmin string `json:"leader_admin,omitempty"`
	LeaderID    string `json:"leader_id,omitempty"`
}

func (e *RemoteError) Error() string { return e.Message }

// Unwrap returns the sentinel the code names (nil for internal errors).
func (e *RemoteError) Unwrap() error { return sentinelOf(e.Code) }

// mapRaftErr turns raft's errors into ours. notLeader builds the redirect.
func mapRaftErr(err error, notLeader func() *NotLeaderError) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return notLeader()
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("raft: %w (not appended; retry)", err)
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrRaftShutdown),
		errors.Is(err, raft.ErrAbortedByRestore):
		return fmt.Errorf("raft: %v: %w", err, ErrIndeterminate)
	}
	return fmt.Errorf("raft: %w", err)
}
