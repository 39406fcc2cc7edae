package hostagent

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/interfaces/wire"
)

// A start that fails is acked with failed set (evidence for the parent's
// doctor), and so is a re-sent assign of that epoch; a stale assign is not.
func TestAckMarksAFailedStart(t *testing.T) {
	r := newRig(t)
	a := r.open(t, "h1")
	defer a.Close()
	now := r.clock.Now()
	lease := &wire.ParentMessage{Msg: &wire.ParentMessage_LeaseGrant{LeaseGrant: &wire.LeaseGrant{LeaseId: "l1", TtlNanos: int64(10 * time.Second)}}}
	if _, err := a.HandleParent(ctx, now, lease); err != nil {
		t.Fatal(err)
	}
	r.synth.FailNextStart(errors.New("exit status 3"))
	out, err := a.HandleParent(ctx, now, wire.AssignToWire(spec("s1"), 2))
	if err != nil {
		t.Fatal(err)
	}
	k := out.GetAck()
	if k.Ok || !k.Failed || !strings.Contains(k.Error, "exit status 3") {
		t.Fatalf("failed start ack %+v", k)
	}
	// The parent re-sends the assign of that epoch: refused as the failure it
	// was (evidence again), while an older epoch is merely stale.
	out, _ = a.HandleParent(ctx, now, wire.AssignToWire(spec("s1"), 2))
	if k := out.GetAck(); k.Ok || !k.Failed || !strings.Contains(k.Error, "its start failed") {
		t.Fatalf("a re-sent assign of the failed epoch is acked %+v", k)
	}
	out, _ = a.HandleParent(ctx, now, wire.AssignToWire(spec("s1"), 1))
	if k := out.GetAck(); k.Ok || k.Failed {
		t.Fatalf("a stale assign is acked %+v", k)
	}
	out, _ = a.HandleParent(ctx, now, wire.AssignToWire(spec("s2"), 1))
	if k := out.GetAck(); !k.Ok || k.Failed {
		t.Fatalf("a good start is acked %+v", k)
	}
}
