package hostagent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

// Adapters between the session stream (interfaces/wire, session.proto) and the
// Agent API, for the session client: it sends HelloMessage on (re)connect, passes
// every ParentMessage to HandleParent and sends back what it returns, and sends
// ReportMessage every report interval.

// HelloMessage builds the session Hello: the agent as a child of tier with
// labels, its capacity, and every held shard with its epoch (fenced or not).
func (a *Agent) HelloMessage(tier string, labels map[string]string) *wire.ChildMessage {
	h := a.Hello()
	held := make(map[interfaces.ShardID]interfaces.Epoch, len(h.Held))
	for _, s := range h.Held {
		held[s.Shard] = s.Epoch
	}
	c := interfaces.Child{ID: h.Host, Tier: tier, Capacity: h.Capacity, Labels: labels}
	hello := wire.HelloToWire(c, held)
	hello.StopBudgetNanos = int64(h.StopBudget)
	return &wire.ChildMessage{Msg: &wire.ChildMessage_Hello{Hello: hello}}
}

// HandleParent applies one message from the parent, received at local time now,
// and returns the message to send back:
//   - Assign, Revoke: an Ack (ok, or the error's text; a malformed message is
//     acked with its validation error; failed is set when the shard's start
//     failed, ErrShardFailed) and a nil error;
//   - LeaseGrant: no reply; the lease runs from now (a caller that knows when
//     it sent the report the grant answers passes that); the error is non-nil
//     when the grant is malformed or executing it failed (a grant too short
//     to keep the safety margin is no error: it renews nothing);
//   - Constraints, Redirect and empty messages: no reply and no error — they
//     are the session client's business.
func (a *Agent) HandleParent(ctx context.Context, now time.Time, m *wire.ParentMessage) (*wire.ChildMessage, error) {
	switch x := m.GetMsg().(type) {
	case *wire.ParentMessage_Assign:
		spec, epoch, err := wire.AssignFromWire(x.Assign)
		if err != nil {
			return wire.AckToWire(wire.AckKind_ACK_KIND_ASSIGN, interfaces.ShardID(x.Assign.GetShard().GetId()), interfaces.Epoch(x.Assign.GetEpoch()), err), nil
		}
		return a.AssignAck(spec.ID, epoch, a.Assign(ctx, now, spec, epoch)), nil
	case *wire.ParentMessage_Revoke:
		shard, epoch, err := wire.RevokeFromWire(x.Revoke)
		if err != nil {
			return wire.AckToWire(wire.AckKind_ACK_KIND_REVOKE, interfaces.ShardID(x.Revoke.GetShard()), interfaces.Epoch(x.Revoke.GetEpoch()), err), nil
		}
		return wire.AckToWire(wire.AckKind_ACK_KIND_REVOKE, shard, epoch, a.Revoke(ctx, now, shard, epoch)), nil
	case *wire.ParentMessage_LeaseGrant:
		ttl, err := wire.LeaseFromWire(x.LeaseGrant)
		if err != nil {
			return nil, fmt.Errorf("lease grant: %w", err)
		}
		return nil, a.LeaseGrant(ctx, now, ttl, nil)
	}
	return nil, nil
}

// AckToWire is wire.AckToWire with Ack.failed set when err says the shard's
// process failed here (ErrShardFailed): what a host sends its parent.
func AckToWire(kind wire.AckKind, shard interfaces.ShardID, epoch interfaces.Epoch, err error) *wire.ChildMessage {
	m := wire.AckToWire(kind, shard, epoch, err)
	if errors.Is(err, ErrShardFailed) {
		m.GetAck().Failed = true
	}
	return m
}

// AssignAck is the ack of an Assign of shard at epoch that returned err:
// AckToWire's, with Ack.revoked_at set when the agent revoked the shard at
// that epoch or a later one (its tombstone), so that the parent places it again
// under a new epoch rather than re-send this one for ever (a failed-start mark
// does not survive a restart; the tombstone does).
func (a *Agent) AssignAck(shard interfaces.ShardID, epoch interfaces.Epoch, err error) *wire.ChildMessage {
	m := AckToWire(wire.AckKind_ACK_KIND_ASSIGN, shard, epoch, err)
	if err != nil && errors.Is(err, interfaces.ErrStaleEpoch) {
		a.mu.Lock()
		t, ok := a.core.Tombstone(shard)
		a.mu.Unlock()
		if ok && epoch <= t {
			m.GetAck().RevokedAt = uint64(t)
		}
	}
	return m
}

// ReportMessage builds the session Report at now (see Agent.Report).
func (a *Agent) ReportMessage(now time.Time) *wire.ChildMessage {
	return &wire.ChildMessage{Msg: &wire.ChildMessage_Report{Report: wire.ReportToWire(a.Report(now))}}
}
