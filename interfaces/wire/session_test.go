package wire_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

func TestHelloRoundTrip(t *testing.T) {
	c := interfaces.Child{ID: "h1", Tier: "host", Capacity: interfaces.Load{CPU: 8, Extra: map[string]float64{"gpu": 2}}, Labels: map[string]string{"zone": "a"}}
	held := map[interfaces.ShardID]interfaces.Epoch{"s1": 4, "s2": 9}
	m := wire.HelloToWire(c, held)
	if m.GetProtocolVersion() != wire.ContractVersion || m.GetMinProtocolVersion() != wire.MinContractVersion {
		t.Fatalf("versions: %v", m)
	}
	gotC, gotHeld, err := wire.HelloFromWire(m)
	if err != nil || !reflect.DeepEqual(gotC, c) || !reflect.DeepEqual(gotHeld, held) {
		t.Fatalf("got %#v %v %v", gotC, gotHeld, err)
	}
	_, gotHeld, err = wire.HelloFromWire(wire.HelloToWire(c, map[interfaces.ShardID]interfaces.Epoch{}))
	if err != nil || gotHeld != nil {
		t.Fatalf("no held shards must come back nil: %v %v", gotHeld, err)
	}
}

func TestSessionHelperErrors(t *testing.T) {
	cases := []struct {
		name, field, rule string
		err               error
	}{
		{"hello no id", "hello.child_id", "is required", func() error {
			_, _, err := wire.HelloFromWire(&wire.Hello{Tier: "host", Capacity: &wire.Load{Cpu: 1}})
			return err
		}()},
		{"hello zero capacity", "hello.capacity", "must be > 0", func() error {
			_, _, err := wire.HelloFromWire(&wire.Hello{ChildId: "h1", Tier: "host"})
			return err
		}()},
		{"hello bad held shard", "hello.held_epochs", interfaces.IDRule, func() error {
			_, _, err := wire.HelloFromWire(&wire.Hello{ChildId: "h1", Tier: "host", Capacity: &wire.Load{Cpu: 1}, HeldEpochs: map[string]uint64{"a b": 1}})
			return err
		}()},
		{"assign bad load", "assign.shard.load.cpu", "must be ≥ 0", func() error {
			_, _, err := wire.AssignFromWire(&wire.Assign{Shard: &wire.Shard{Id: "s1", Job: "j", Load: &wire.Load{Cpu: -1}}, Epoch: 2})
			return err
		}()},
		{"assign nil", "assign.shard.id", "is required", func() error { _, _, err := wire.AssignFromWire(nil); return err }()},
		{"revoke no shard", "revoke.shard", "is required", func() error { _, _, err := wire.RevokeFromWire(&wire.Revoke{Epoch: 1}); return err }()},
		{"ack unspecified", "ack.kind", "must be assign or revoke", wire.CheckAck(&wire.Ack{Shard: "s1"})},
		{"ack undeclared", "ack.kind", "must be assign or revoke", wire.CheckAck(&wire.Ack{Shard: "s1", Kind: 7})},
		{"lease no id", "lease_grant.lease_id", "is required", func() error { _, err := wire.LeaseFromWire(&wire.LeaseGrant{TtlNanos: 1}); return err }()},
		{"lease zero ttl", "lease_grant.ttl", "must be > 0", func() error { _, err := wire.LeaseFromWire(&wire.LeaseGrant{LeaseId: "l"}); return err }()},
		{"lease negative interval", "lease_grant.report_interval", "must be ≥ 0", func() error {
			_, err := wire.LeaseFromWire(&wire.LeaseGrant{LeaseId: "l", TtlNanos: 1, ReportIntervalNanos: -1})
			return err
		}()},
		{"constraints budget", "constraints.budget.max_moves", "must be ≥ 0", func() error {
			_, _, _, err := wire.ConstraintsFromWire(&wire.Constraints{Budget: &wire.Budget{MaxMoves: -1}})
			return err
		}()},
		{"constraints listed", "constraints.constraints[0].kind", "must be one of", func() error {
			_, _, _, err := wire.ConstraintsFromWire(&wire.Constraints{Constraints: []*wire.Constraint{{Kind: 40}}})
			return err
		}()},
		{"constraints pinned", "constraints.pinned_shards[0]", "is required", func() error {
			_, _, _, err := wire.ConstraintsFromWire(&wire.Constraints{PinnedShards: []string{""}})
			return err
		}()},
		{"constraints target", "constraints.targets.utilization.mem", "must be ≥ 0", func() error {
			_, _, _, err := wire.ConstraintsFromWire(&wire.Constraints{Targets: &wire.Targets{Utilization: &wire.Load{Mem: -0.1}}})
			return err
		}()},
	}
	for _, c := range cases {
		var fe *interfaces.FieldError
		if !errors.As(c.err, &fe) || !errors.Is(c.err, interfaces.ErrInvalid) {
			t.Errorf("%s: error %v is not a FieldError wrapping ErrInvalid", c.name, c.err)
			continue
		}
		if fe.Field != c.field || !strings.Contains(fe.Rule, c.rule) {
			t.Errorf("%s: got %q %q; want field %q rule containing %q", c.name, fe.Field, fe.Rule, c.field, c.rule)
		}
	}
}

func TestSessionHelpersAccept(t *testing.T) {
	s := interfaces.Shard{ID: "s1", Job: "j", Load: interfaces.Load{CPU: 1}, StateBytes: 10}
	msg := wire.AssignToWire(s, 5)
	gotS, gotE, err := wire.AssignFromWire(msg.GetAssign())
	if err != nil || gotE != 5 || !reflect.DeepEqual(gotS, s) {
		t.Errorf("assign: %#v %d %v", gotS, gotE, err)
	}
	gotID, gotE, err := wire.RevokeFromWire(wire.RevokeToWire("s1", 6).GetRevoke())
	if err != nil || gotID != "s1" || gotE != 6 {
		t.Errorf("revoke: %q %d %v", gotID, gotE, err)
	}
	ok := wire.AckToWire(wire.AckKind_ACK_KIND_ASSIGN, "s1", 5, nil).GetAck()
	if wire.CheckAck(ok) != nil || !ok.GetOk() || ok.GetError() != "" || ok.GetEpoch() != 5 {
		t.Errorf("ok ack: %v", ok)
	}
	failed := wire.AckToWire(wire.AckKind_ACK_KIND_REVOKE, "s1", 3, interfaces.ErrStaleEpoch).GetAck()
	if wire.CheckAck(failed) != nil || failed.GetOk() || failed.GetError() != "stale epoch" {
		t.Errorf("failed ack: %v", failed)
	}
	ttl, err := wire.LeaseFromWire(&wire.LeaseGrant{LeaseId: "l", TtlNanos: int64(3 * time.Second)})
	if err != nil || ttl != 3*time.Second {
		t.Errorf("lease: %v %v", ttl, err)
	}
	rules, pinned, target, err := wire.ConstraintsFromWire(&wire.Constraints{
		Budget:       &wire.Budget{MaxMoves: 4, MaxBytes: 1 << 30},
		PinnedShards: []string{"s1", "s2"},
		Targets:      &wire.Targets{Utilization: &wire.Load{Cpu: 0.7}},
		Constraints:  []*wire.Constraint{{Kind: wire.ConstraintKind_CONSTRAINT_KIND_AVOID, Shards: []string{"s3"}, Children: []string{"h2"}}},
		Sequence:     12,
	})
	if err != nil || len(rules) != 2 || rules[0].Kind != interfaces.ConstraintMaxMoves || rules[0].Max != 4 || rules[0].MaxBytes != 1<<30 ||
		rules[1].Kind != interfaces.ConstraintAvoid || len(pinned) != 2 || pinned[1] != "s2" || target.CPU != 0.7 {
		t.Errorf("constraints: %#v %v %#v %v", rules, pinned, target, err)
	}
	rules, pinned, target, err = wire.ConstraintsFromWire(&wire.Constraints{})
	if err != nil || rules != nil || pinned != nil || !target.IsZero() {
		t.Errorf("empty constraints: %#v %v %#v %v", rules, pinned, target, err)
	}
}
