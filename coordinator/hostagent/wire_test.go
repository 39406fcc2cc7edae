package hostagent

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

func TestHandleParentMessages(t *testing.T) {
	r := newRig(t)
	a := r.open(t, "h1")
	defer a.Close()
	now := r.clock.Now()
	lease := &wire.ParentMessage{Msg: &wire.ParentMessage_LeaseGrant{LeaseGrant: &wire.LeaseGrant{LeaseId: "l1", TtlNanos: int64(10 * time.Second)}}}
	if out, err := a.HandleParent(ctx, now, lease); out != nil || err != nil {
		t.Fatalf("lease: %v %v", out, err)
	}
	ack := func(m *wire.ParentMessage) *wire.Ack {
		t.Helper()
		out, err := a.HandleParent(ctx, now, m)
		if err != nil || out.GetAck() == nil {
			t.Fatalf("no ack: %v %v", out, err)
		}
		return out.GetAck()
	}
	if k := ack(wire.AssignToWire(spec("s1"), 2)); !k.Ok || k.Shard != "s1" || k.Epoch != 2 || k.Kind != wire.AckKind_ACK_KIND_ASSIGN {
		t.Fatalf("assign ack %+v", k)
	}
	if k := ack(wire.AssignToWire(spec("s1"), 1)); k.Ok || !strings.Contains(k.Error, "held epoch 2, got 1") {
		t.Fatalf("stale assign ack %+v", k)
	}
	bad := wire.AssignToWire(spec("s2"), 1)
	bad.GetAssign().Shard.Job = ""
	if k := ack(bad); k.Ok || k.Shard != "s2" || !strings.Contains(k.Error, "assign.shard.job") {
		t.Fatalf("malformed assign ack %+v", k)
	}
	if k := ack(wire.RevokeToWire("s1", 2)); !k.Ok || k.Kind != wire.AckKind_ACK_KIND_REVOKE {
		t.Fatalf("revoke ack %+v", k)
	}
	if len(a.Held()) != 0 {
		t.Fatalf("held %v", a.Held())
	}
	_, err := a.HandleParent(ctx, now, &wire.ParentMessage{Msg: &wire.ParentMessage_LeaseGrant{LeaseGrant: &wire.LeaseGrant{LeaseId: "l2"}}})
	if !errors.Is(err, interfaces.ErrInvalid) {
		t.Fatalf("lease without ttl: %v", err)
	}
	if out, err := a.HandleParent(ctx, now, &wire.ParentMessage{Msg: &wire.ParentMessage_Redirect{Redirect: &wire.Redirect{}}}); out != nil || err != nil {
		t.Fatalf("redirect: %v %v", out, err)
	}

	_ = a.Assign(ctx, now, spec("s3"), 4)
	h := a.HelloMessage("host", map[string]string{"zone": "a"}).GetHello()
	if h.ChildId != "h1" || h.Tier != "host" || h.HeldEpochs["s3"] != 4 || len(h.HeldEpochs) != 1 || h.Capacity.Cpu != 8 {
		t.Fatalf("hello %+v", h)
	}
	rep := a.ReportMessage(now).GetReport()
	back, err := wire.ReportFromWire(rep)
	if err != nil || back.Child != "h1" || len(back.Shards) != 1 || back.Shards[0].Shard != "s3" {
		t.Fatalf("report round trip: %+v %v", back, err)
	}
}
