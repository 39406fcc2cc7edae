package wire

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strata-sched/strata/interfaces"
)

// The sentinel errors travel as gRPC status codes (as interfaces documents them),
// with an ErrorDetail whose reason names the sentinel, so that the ones that share
// FailedPrecondition stay apart:
//
//	sentinel            code                 reason
//	ErrInvalid          InvalidArgument      INVALID
//	ErrNotFound         NotFound             NOT_FOUND
//	ErrStaleEpoch       FailedPrecondition   STALE_EPOCH
//	ErrConflict         FailedPrecondition   CONFLICT
//	ErrNoCommonVersion  FailedPrecondition   NO_COMMON_VERSION
//	ErrNotLeader        Unavailable          NOT_LEADER

type sentinelCode struct {
	err    error
	code   codes.Code
	reason string
}

var sentinels = []sentinelCode{
	{interfaces.ErrInvalid, codes.InvalidArgument, "INVALID"},
	{interfaces.ErrNotFound, codes.NotFound, "NOT_FOUND"},
	{interfaces.ErrStaleEpoch, codes.FailedPrecondition, "STALE_EPOCH"},
	{interfaces.ErrConflict, codes.FailedPrecondition, "CONFLICT"},
	{ErrNoCommonVersion, codes.FailedPrecondition, "NO_COMMON_VERSION"},
	{interfaces.ErrNotLeader, codes.Unavailable, "NOT_LEADER"},
}

// ToStatus turns an error into a gRPC status error: the code and the ErrorDetail
// reason follow the table above (context cancellation and deadline map to Canceled
// and DeadlineExceeded, anything else to Unknown), and the message is err's
// message. nil stays nil; an error that already carries a status is returned as it
// is.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			st := status.New(s.code, err.Error())
			if withInfo, derr := st.WithDetails(&ErrorDetail{Reason: s.reason}); derr == nil {
				st = withInfo
			}
			return st.Err()
		}
	}
	switch {
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Unknown, err.Error())
}

// remoteError is an error received over gRPC: its message is the remote one, and
// it wraps the sentinel it stands for.
type remoteError struct {
	st       *status.Status
	sentinel error
}

func (e *remoteError) Error() string { return e.st.Message() }

func (e *remoteError) Unwrap() error { return e.sentinel }

// GRPCStatus lets status.FromError and status.Code see the original status.
func (e *remoteError) GRPCStatus() *status.Status { return e.st }

// FromStatus turns a gRPC status error back into an error that errors.Is matches
// against the sentinel it stands for, keeping the message. The ErrorDetail reason
// decides when present; without it InvalidArgument, NotFound and FailedPrecondition
// read as ErrInvalid, ErrNotFound and ErrConflict. Other codes (Unavailable without
// the NOT_LEADER reason is a transport failure), and errors that are not statuses,
// are returned as they are.
func FromStatus(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	for _, d := range st.Details() {
		info, ok := d.(*ErrorDetail)
		if !ok {
			continue
		}
		for _, s := range sentinels {
			if s.reason == info.GetReason() && s.code == st.Code() {
				return &remoteError{st: st, sentinel: s.err}
			}
		}
	}
	var sentinel error
	switch st.Code() {
	case codes.InvalidArgument:
		sentinel = interfaces.ErrInvalid
	case codes.NotFound:
		sentinel = interfaces.ErrNotFound
	case codes.FailedPrecondition:
		sentinel = interfaces.ErrConflict
	default:
		// Unavailable without the detail is a transport failure (connection
		// refused, server shutting down), not a follower's answer.
		return err
	}
	return &remoteError{st: st, sentinel: sentinel}
}
