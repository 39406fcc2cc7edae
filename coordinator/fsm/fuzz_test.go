package fsm

import (
	"bytes"
	"errors"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/strata-sched/strata/interfaces"
)

// FuzzDecode feeds arbitrary bytes to the command decoder. Malformed input must be
// rejected with an error wrapping ErrInvalid, never a panic; accepted input must
// re-encode to exactly the same bytes (the encoding is canonical) and must apply to
// a populated FSM without panicking.
//
//	go test -fuzz=FuzzDecode -fuzztime=60s ./coordinator/fsm
func FuzzDecode(f *testing.F) {
	for _, c := range sampleCommands() {
		b := MustEncode(c)
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	for _, c := range sampleWorkload() {
		f.Add(MustEncode(c))
	}
	f.Add([]byte{})
	f.Add([]byte{0})
	f.Add([]byte{byte(cmdEnd)})
	f.Add([]byte{byte(CmdDeleteShards), 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := Decode(in)
		if err != nil {
			if c != nil {
				t.Fatalf("Decode returned both a command and an error: %v", err)
			}
			if !errors.Is(err, interfaces.ErrInvalid) {
				t.Fatalf("Decode error %v does not wrap ErrInvalid", err)
			}
			return
		}
		out, err := Encode(c)
		if err != nil {
			t.Fatalf("a decoded command does not re-encode: %v", err)
		}
		if !bytes.Equal(in, out) {
			t.Fatalf("decode → encode is not the identity:\n in %x\nout %x", in, out)
		}
		fsm := fixture(t)
		r, ok := fsm.Apply(&raft.Log{Index: fixtureNext, Type: raft.LogCommand, Data: in}).(*Result)
		if !ok || r.Type != c.Type() {
			t.Fatalf("Apply returned %#v", r)
		}
		for _, op := range r.Ops {
			if op.Err != nil && ErrorCode(op.Err) == "internal" {
				t.Fatalf("domain rejection %v wraps no sentinel", op.Err)
			}
		}
		checkInvariants(t, fsm)
	})
}
