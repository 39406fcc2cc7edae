package wire

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// Helpers for the session messages (session.proto). They are not domain types, so
// they have no FromWire twin that returns one; instead each checks a received
// message and returns the domain values it carries, with the same error rules as
// convert.go (a FieldError naming the field, wrapping interfaces.ErrInvalid).

// HelloToWire builds the Hello a child opens its session with: its spec, the shards
// it holds with their epochs, and the contract versions this build speaks.
func HelloToWire(c interfaces.Child, held map[interfaces.ShardID]interfaces.Epoch) *Hello {
	m := &Hello{
		ChildId:            string(c.ID),
		Tier:               c.Tier,
		Capacity:           LoadToWire(c.Capacity),
		Labels:             copyMap[string](c.Labels),
		ProtocolVersion:    ContractVersion,
		MinProtocolVersion: MinContractVersion,
	}
	if len(held) > 0 {
		m.HeldEpochs = make(map[string]uint64, len(held))
		for s, e := range held {
			m.HeldEpochs[string(s)] = uint64(e)
		}
	}
	return m
}

// HelloFromWire checks a Hello and returns the child it describes (state active)
// and the shards it holds. It does not negotiate the version: see HelloVersions
// and Negotiate.
func HelloFromWire(m *Hello) (interfaces.Child, map[interfaces.ShardID]interfaces.Epoch, error) {
	c, err := ChildFromWire(&Child{Id: m.GetChildId(), Tier: m.GetTier(), Capacity: m.GetCapacity(), Labels: m.GetLabels()})
	if err != nil {
		if err2 := reroot(err, "child.id", "hello.child_id"); err2 != err {
			return interfaces.Child{}, nil, err2
		}
		return interfaces.Child{}, nil, reroot(err, "child", "hello")
	}
	var held map[interfaces.ShardID]interfaces.Epoch
	if len(m.GetHeldEpochs()) > 0 {
		held = make(map[interfaces.ShardID]interfaces.Epoch, len(m.GetHeldEpochs()))
		for _, k := range slices.Sorted(maps.Keys(m.GetHeldEpochs())) {
			if err := interfaces.ValidateID("hello.held_epochs", k); err != nil {
				return interfaces.Child{}, nil, err
			}
			held[interfaces.ShardID(k)] = interfaces.Epoch(m.GetHeldEpochs()[k])
		}
	}
	return c, held, nil
}

// AssignToWire builds the message that gives shard s to a child at epoch e.
func AssignToWire(s interfaces.Shard, e interfaces.Epoch) *ParentMessage {
	return &ParentMessage{Msg: &ParentMessage_Assign{Assign: &Assign{Shard: ShardToWire(s), Epoch: uint64(e)}}}
}

// AssignFromWire checks an Assign and returns its shard spec and epoch.
func AssignFromWire(m *Assign) (interfaces.Shard, interfaces.Epoch, error) {
	s, err := ShardFromWire(m.GetShard())
	if err != nil {
		return interfaces.Shard{}, 0, reroot(err, "shard", "assign.shard")
	}
	return s, interfaces.Epoch(m.GetEpoch()), nil
}

// RevokeToWire builds the message that takes shard s from a child at epoch e.
func RevokeToWire(s interfaces.ShardID, e interfaces.Epoch) *ParentMessage {
	return &ParentMessage{Msg: &ParentMessage_Revoke{Revoke: &Revoke{Shard: string(s), Epoch: uint64(e)}}}
}

// RevokeFromWire checks a Revoke and returns its shard and epoch.
func RevokeFromWire(m *Revoke) (interfaces.ShardID, interfaces.Epoch, error) {
	if err := interfaces.ValidateID("revoke.shard", m.GetShard()); err != nil {
		return "", 0, err
	}
	return interfaces.ShardID(m.GetShard()), interfaces.Epoch(m.GetEpoch()), nil
}

// AckToWire builds a child's acknowledgement of an Assign or Revoke; a nil failure
// is ok, otherwise its message travels.
func AckToWire(kind AckKind, s interfaces.ShardID, e interfaces.Epoch, failure error) *ChildMessage {
	a := &Ack{Shard: string(s), Epoch: uint64(e), Kind: kind, Ok: failure == nil}
	if failure != nil {
		a.Error = failure.Error()
	}
	return &ChildMessage{Msg: &ChildMessage_Ack{Ack: a}}
}

// CheckAck checks an Ack: a shard identifier and a kind of assign or revoke
// (ACK_KIND_UNSPECIFIED and undeclared values are refused).
func CheckAck(m *Ack) error {
	if err := interfaces.ValidateID("ack.shard", m.GetShard()); err != nil {
		return err
	}
	switch m.GetKind() {
	case AckKind_ACK_KIND_ASSIGN, AckKind_ACK_KIND_REVOKE:
		return nil
	}
	return fieldErr("ack.kind", "must be assign or revoke", int32(m.GetKind()))
}

// LeaseFromWire checks a LeaseGrant and returns its time to live: a lease id is
// required and the ttl must be > 0.
func LeaseFromWire(m *LeaseGrant) (time.Duration, error) {
	if m.GetLeaseId() == "" {
		return 0, fieldErr("lease_grant.lease_id", "is required", nil)
	}
	if m.GetTtlNanos() <= 0 {
		return 0, fieldErr("lease_grant.ttl", "must be > 0", time.Duration(m.GetTtlNanos()))
	}
	if m.GetReportIntervalNanos() < 0 {
		return 0, fieldErr("lease_grant.report_interval", "must be ≥ 0", time.Duration(m.GetReportIntervalNanos()))
	}
	return time.Duration(m.GetTtlNanos()), nil
}

// ConstraintsFromWire checks a Constraints message from a parent and returns its
// rules as domain constraints: the budget as a ConstraintMaxMoves (Max moves,
// MaxBytes bytes) and then the listed constraints. Pinned shards and targets are
// returned apart: the pinned shard ids and the target utilization per resource.
func ConstraintsFromWire(m *Constraints) (rules []interfaces.Constraint, pinned []interfaces.ShardID, target interfaces.Load, err error) {
	b := m.GetBudget()
	maxMoves, err := checkNonNegInt("constraints.budget.max_moves", b.GetMaxMoves())
	if err != nil {
		return nil, nil, interfaces.Load{}, err
	}
	if b.GetMaxBytes() < 0 {
		return nil, nil, interfaces.Load{}, fieldErr("constraints.budget.max_bytes", "must be ≥ 0", b.GetMaxBytes())
	}
	listed, err := constraintsFromWire("constraints.constraints", m.GetConstraints())
	if err != nil {
		return nil, nil, interfaces.Load{}, err
	}
	if err := checkIDs("constraints.pinned_shards", m.GetPinnedShards()); err != nil {
		return nil, nil, interfaces.Load{}, err
	}
	target, err = loadFromWire("constraints.targets.utilization", m.GetTargets().GetUtilization())
	if err != nil {
		return nil, nil, interfaces.Load{}, err
	}
	if d := m.GetTargets().GetLatencyP99Nanos(); d < 0 {
		return nil, nil, interfaces.Load{}, fieldErr("constraints.targets.latency_p99", "must be ≥ 0", d)
	}
	rules = make([]interfaces.Constraint, 0, 1+len(listed))
	if b != nil {
		rules = append(rules, interfaces.Constraint{Kind: interfaces.ConstraintMaxMoves, Max: maxMoves, MaxBytes: b.GetMaxBytes(), Reason: fmt.Sprintf("budget from parent (sequence %d)", m.GetSequence())})
	}
	rules = append(rules, listed...)
	if len(rules) == 0 {
		rules = nil
	}
	return rules, ids[interfaces.ShardID](m.GetPinnedShards()), target, nil
}
