package wire_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

func TestStatusMapping(t *testing.T) {
	all := []error{interfaces.ErrInvalid, interfaces.ErrNotFound, interfaces.ErrStaleEpoch, interfaces.ErrConflict, wire.ErrNoCommonVersion, interfaces.ErrNotLeader}
	codesFor := map[error]codes.Code{
		interfaces.ErrInvalid:    codes.InvalidArgument,
		interfaces.ErrNotFound:   codes.NotFound,
		interfaces.ErrStaleEpoch: codes.FailedPrecondition,
		interfaces.ErrConflict:   codes.FailedPrecondition,
		wire.ErrNoCommonVersion:  codes.FailedPrecondition,
		interfaces.ErrNotLeader:  codes.Unavailable,
	}
	for _, sentinel := range all {
		err := fmt.Errorf("shard s1 at epoch 3: %w", sentinel)
		st := wire.ToStatus(err)
		if got := status.Code(st); got != codesFor[sentinel] {
			t.Errorf("%v: code %v, want %v", sentinel, got, codesFor[sentinel])
		}
		back := wire.FromStatus(st)
		if back.Error() != err.Error() {
			t.Errorf("%v: message %q, want %q", sentinel, back.Error(), err.Error())
		}
		for _, other := range all {
			if got := errors.Is(back, other); got != (other == sentinel) {
				t.Errorf("%v came back with errors.Is(%v) = %v", sentinel, other, got)
			}
		}
		if status.Code(back) != codesFor[sentinel] {
			t.Errorf("%v: the code is lost after FromStatus: %v", sentinel, status.Code(back))
		}
		if wire.ToStatus(back) != back {
			t.Errorf("%v: ToStatus of a status must return it unchanged", sentinel)
		}
	}
}

func TestStatusMappingEdges(t *testing.T) {
	if wire.ToStatus(nil) != nil || wire.FromStatus(nil) != nil {
		t.Error("nil must stay nil")
	}
	if c := status.Code(wire.ToStatus(errors.New("disk on fire"))); c != codes.Unknown {
		t.Errorf("plain error: %v", c)
	}
	if c := status.Code(wire.ToStatus(fmt.Errorf("plan: %w", context.DeadlineExceeded))); c != codes.DeadlineExceeded {
		t.Errorf("deadline: %v", c)
	}
	if c := status.Code(wire.ToStatus(context.Canceled)); c != codes.Canceled {
		t.Errorf("canceled: %v", c)
	}
	plain := errors.New("not a status")
	if wire.FromStatus(plain) != plain {
		t.Error("a non-status error must pass through")
	}
	// Statuses from other servers, without Strata's detail: the code decides, and an
	// Unavailable is a transport failure, not a follower's answer.
	if err := wire.FromStatus(status.Error(codes.FailedPrecondition, "x")); !errors.Is(err, interfaces.ErrConflict) {
		t.Errorf("bare FailedPrecondition: %v", err)
	}
	if err := wire.FromStatus(status.Error(codes.InvalidArgument, "x")); !errors.Is(err, interfaces.ErrInvalid) {
		t.Errorf("bare InvalidArgument: %v", err)
	}
	unavailable := status.Error(codes.Unavailable, "connection refused")
	if err := wire.FromStatus(unavailable); errors.Is(err, interfaces.ErrNotLeader) || err != unavailable {
		t.Errorf("bare Unavailable: %v", err)
	}
	internal := status.Error(codes.Internal, "boom")
	if wire.FromStatus(internal) != internal {
		t.Error("Internal must pass through")
	}
}
