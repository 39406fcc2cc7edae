package fsm

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/acl"
	"github.com/strata-sched/strata/interfaces"
)

// sampleCommands has one command of every type, with every optional field set
// somewhere, so that round trips exercise the whole encoding.
func sampleCommands() []Command {
	return []Command{
		&PutChild{Child: interfaces.Child{ID: "h1", Tier: "host",
			Capacity: interfaces.Load{CPU: 8, Mem: 1 << 34, Net: 1e9, Tasks: 64, Extra: map[string]float64{"gpu": 2, "disk": 1e12}},
			Labels:   map[string]string{"zone": "a", "rack": "r1"}, State: interfaces.ChildDraining}},
		&RemoveChild{ID: "h9"},
		&PutShards{Shards: []interfaces.Shard{
			{ID: "s1", Job: "job-a", Load: interfaces.Load{CPU: 0.5, Mem: 1 << 20}},
			{ID: "s2", Job: "job-a", Load: interfaces.Load{CPU: 1, Extra: map[string]float64{"gpu": 1}},
				InputRate: 1234.5, StateBytes: 1 << 30, LatencySLO: 250 * time.Millisecond,
				Constraints: interfaces.ShardConstraints{Pinned: "h1", Allowed: []interfaces.ChildID{"h1", "h2"},
					Labels: map[string]string{"zone": "a"}, AntiAffinity: "grp", MaxPerChild: 2}},
		}},
		&DeleteShards{IDs: []interfaces.ShardID{"s1", "s2", "s3"}},
		&Assign{Shard: "s1", Child: "h1", Reason: "first placement"},
		&Unassign{Shard: "s1", Epoch: 7, Reason: "child failed"},
		&Move{Move: interfaces.Move{Shard: "s1", From: "h1", To: "h2", Epoch: 3, Reason: "balance cpu", Goal: "balance", Delta: -0.25}},
		&BeginMove{Move: interfaces.Move{Shard: "s1", From: "h1", To: "h2", Epoch: 1 << 40}},
		&CompleteMove{Shard: "s1", Epoch: 4},
		&AbortMove{Shard: "s1", Epoch: 4, Reason: "ack timed out"},
		&ApplyPlan{Tier: "region", Begin: true, Moves: []interfaces.Move{
			{Shard: "s1", To: "h1", Reason: "place"},
			{Shard: "s2", From: "h1", To: "h2", Epoch: 2, Goal: "drain", Delta: 1.5},
		}},
		&Quarantine{Shard: "s1", Reason: "doctor: failed on 3 hosts within 10m"},
		&DropShards{IDs: []interfaces.ShardID{"s1", "s2"}, Reason: "job deleted"},
		&RetireShards{DropShards: DropShards{IDs: []interfaces.ShardID{"s1", "s2"}, Reason: "job deleted"}},
		&PlanBatch{Tier: "region", Drain: []interfaces.ChildID{"h1", "h3"}, Moves: []interfaces.Move{
			{Shard: "s1", To: "h2", Reason: "place"},
			{Shard: "s2", From: "h1", To: "h2", Epoch: 2, Goal: "drain", Delta: 1.5},
		}, Begin: []bool{false, true}},
		&PutToken{Token: acl.Token{ID: "ci", Policy: acl.PolicyOperate, Hash: acl.HashSecret("s3cret"), Description: "the deploy job"}},
		&DeleteToken{ID: "ci"},
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	seen := map[CmdType]bool{}
	for _, c := range sampleCommands() {
		t.Run(c.Type().String(), func(t *testing.T) {
			b, err := Encode(c)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if CmdType(b[0]) != c.Type() {
				t.Fatalf("first byte %d, want type %d", b[0], c.Type())
			}
			got, err := Decode(b)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, c) {
				t.Fatalf("round trip changed the command:\n got %#v\nwant %#v", got, c)
			}
			b2 := MustEncode(got)
			if !bytes.Equal(b, b2) {
				t.Fatalf("re-encoding differs:\n%x\n%x", b, b2)
			}
		})
		seen[c.Type()] = true
	}
	for ty := CmdType(1); ty < cmdEnd; ty++ {
		if !seen[ty] {
			t.Errorf("command type %s has no round-trip sample", ty)
		}
	}
}

// TestCmdTypeValuesAreStable pins the on-disk values: a change here breaks every
// existing log.
func TestCmdTypeValuesAreStable(t *testing.T) {
	want := map[CmdType]uint8{CmdPutChild: 1, CmdRemoveChild: 2, CmdPutShards: 3, CmdDeleteShards: 4,
		CmdAssign: 5, CmdUnassign: 6, CmdMove: 7, CmdBeginMove: 8, CmdCompleteMove: 9, CmdAbortMove: 10, CmdApplyPlan: 11, CmdQuarantine: 12,
		CmdDropShards: 13, CmdPlanBatch: 14, CmdRetireShards: 15, CmdPutToken: 16, CmdDeleteToken: 17}
	for ty, v := range want {
		if uint8(ty) != v {
			t.Errorf("%s = %d, want %d", ty, uint8(ty), v)
		}
	}
	if int(cmdEnd) != len(want)+1 {
		t.Errorf("cmdEnd = %d: a type was added without pinning its value here", cmdEnd)
	}
}

func TestEncodeRejectsInvalidCommands(t *testing.T) {
	long := strings.Repeat("x", MaxStringLen+1)
	cases := []struct {
		name  string
		cmd   Command
		field string
	}{
		{"nil", nil, "command"},
		{"child without id", &PutChild{Child: interfaces.Child{Tier: "host", Capacity: interfaces.Load{CPU: 1}}}, "child.id"},
		{"child zero capacity", &PutChild{Child: interfaces.Child{ID: "h", Tier: "host"}}, "child.capacity"},
		{"child bad state", &PutChild{Child: interfaces.Child{ID: "h", Tier: "host", Capacity: interfaces.Load{CPU: 1}, State: 9}}, "child.state"},
		{"remove bad id", &RemoveChild{ID: "-x"}, "child.id"},
		{"empty shard batch", &PutShards{}, "shards"},
		{"shard negative load", &PutShards{Shards: []interfaces.Shard{{ID: "s", Job: "j", Load: interfaces.Load{CPU: -1}}}}, "shard.load.cpu"},
		{"shard NaN load", &PutShards{Shards: []interfaces.Shard{{ID: "s", Job: "j", Load: interfaces.Load{Mem: math.NaN()}}}}, "shard.load.mem"},
		{"duplicate shard", &PutShards{Shards: []interfaces.Shard{{ID: "s", Job: "j"}, {ID: "s", Job: "j"}}}, "shards[1].id"},
		{"empty delete", &DeleteShards{}, "ids"},
		{"duplicate delete", &DeleteShards{IDs: []interfaces.ShardID{"a", "a"}}, "ids[1]"},
		{"assign no child", &Assign{Shard: "s"}, "child"},
		{"assign long reason", &Assign{Shard: "s", Child: "h", Reason: long}, "reason"},
		{"move without from", &Move{Move: interfaces.Move{Shard: "s", To: "h"}}, "move.from"},
		{"move to itself", &Move{Move: interfaces.Move{Shard: "s", From: "h", To: "h"}}, "move.to"},
		{"move inf delta", &BeginMove{Move: interfaces.Move{Shard: "s", From: "a", To: "b", Delta: math.Inf(1)}}, "move.delta"},
		{"complete bad shard", &CompleteMove{Shard: ""}, "shard"},
		{"plan empty", &ApplyPlan{Tier: "region"}, "moves"},
		{"plan bad move", &ApplyPlan{Moves: []interfaces.Move{{Shard: "s"}}}, "moves[0].to"},
		{"drop empty", &DropShards{Reason: "x"}, "ids"},
		{"drop long reason", &DropShards{IDs: []interfaces.ShardID{"s"}, Reason: long}, "reason"},
		{"batch empty", &PlanBatch{Tier: "region"}, "moves"},
		{"batch flags", &PlanBatch{Moves: []interfaces.Move{{Shard: "s", To: "h"}}}, "begin"},
		{"batch begun placement", &PlanBatch{Moves: []interfaces.Move{{Shard: "s", To: "h"}}, Begin: []bool{true}}, "begin[0]"},
		{"batch bad drain", &PlanBatch{Drain: []interfaces.ChildID{"-h"}}, "drain[0]"},
		{"batch drain twice", &PlanBatch{Drain: []interfaces.ChildID{"h", "h"}}, "drain[1]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Encode(tc.cmd)
			if err == nil {
				t.Fatal("Encode accepted an invalid command")
			}
			if !errors.Is(err, interfaces.ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q does not name the field %q", err, tc.field)
			}
		})
	}
}

func TestDecodeRejectsMalformedInput(t *testing.T) {
	good := MustEncode(&Assign{Shard: "s1", Child: "h1", Reason: "r"})
	labels := MustEncode(&PutChild{Child: interfaces.Child{ID: "h", Tier: "t", Capacity: interfaces.Load{CPU: 1},
		Labels: map[string]string{"a": "1", "b": "2"}}})
	// Swap the label keys "a" and "b" in place: the encoding stays well formed but
	// is no longer sorted.
	unsorted := bytes.Replace(bytes.Replace(labels, []byte{1, 'a', 1, '1'}, []byte{1, 'X', 1, '1'}, 1),
		[]byte{1, 'b', 1, '2'}, []byte{1, 'a', 1, '2'}, 1)
	unsorted = bytes.Replace(unsorted, []byte{1, 'X', 1, '1'}, []byte{1, 'b', 1, '1'}, 1)
	if bytes.Equal(unsorted, labels) {
		t.Fatal("test setup: label swap did not change the bytes")
	}
	// A non-minimal varint: the shard-ID length 2 written as 0x82 0x00.
	nonMinimal := append([]byte{byte(CmdAssign), 0x82, 0x00}, good[2:]...)
	plan := MustEncode(&ApplyPlan{Tier: "t", Moves: []interfaces.Move{{Shard: "s", To: "h"}}})
	badBool := append([]byte(nil), plan...)
	badBool[3] = 2 // the Begin flag: tier "t" is bytes 1..2
	nan := MustEncode(&Move{Move: interfaces.Move{Shard: "s", From: "a", To: "b"}})
	copy(nan[len(nan)-8:], []byte{0, 0, 0, 0, 0, 0, 0xf8, 0x7f})

	cases := []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "empty entry"},
		{"type zero", []byte{0}, "unknown type 0"},
		{"unknown type", []byte{200, 1, 2}, "unknown type 200"},
		{"truncated", good[:len(good)-1], "unexpected end"},
		{"trailing byte", append(append([]byte(nil), good...), 0), "trailing"},
		{"non-minimal varint", nonMinimal, "non-minimal"},
		{"unsorted labels", unsorted, "strictly increasing"},
		{"bool out of range", badBool, "boolean"},
		{"NaN delta", nan, "finite"},
		{"huge count", []byte{byte(CmdDeleteShards), 0xff, 0xff, 0xff, 0x07}, "count"},
		{"invalid id", []byte{byte(CmdRemoveChild), 2, '-', 'x'}, "child.id"},
		{"string past end", []byte{byte(CmdRemoveChild), 9, 'a'}, "unexpected end"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Decode(tc.in)
			if err == nil {
				t.Fatalf("Decode accepted %x as %#v", tc.in, c)
			}
			if !errors.Is(err, interfaces.ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}
