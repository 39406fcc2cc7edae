package raftnode

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/interfaces"
)

func restoreBytes(l *lockedFSM, b []byte) (panicked any, err error) {
	defer func() { panicked = recover() }()
	return nil, l.Restore(io.NopCloser(bytes.NewReader(b)))
}

// A failed lean restore leaves the FSM empty: returned as an error while raft
// starts (it then tries an older snapshot), fatal once raft runs. A failed
// default restore keeps the old state and is only an error.
func TestFailedLeanRestoreIsFatalOnceRunning(t *testing.T) {
	src := fsm.New()
	if _, err := src.ApplyCommand(1, &fsm.PutChild{Child: interfaces.Child{ID: "c", Tier: "host", Capacity: interfaces.Load{CPU: 1}}}); err != nil {
		t.Fatal(err)
	}
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	good := sink.buf.Bytes()
	bad := good[:len(good)-3]

	lean := newLockedFSM(fsm.NewWithOptions(fsm.Options{LeanRestore: true}))
	if p, err := restoreBytes(lean, good); err != nil || p != nil {
		t.Fatalf("good snapshot: %v %v", err, p)
	}
	p, err := restoreBytes(lean, bad)
	if p != nil || !errors.Is(err, fsm.ErrRestoreEmptied) {
		t.Fatalf("failed lean restore at startup: err %v, panic %v; want ErrRestoreEmptied returned", err, p)
	}
	lean.running.Store(true)
	p, _ = restoreBytes(lean, bad)
	if s, _ := p.(string); !strings.Contains(s, "restart it") {
		t.Fatalf("failed lean restore while running: panic %v, want a panic that says to restart", p)
	}

	def := newLockedFSM(fsm.New())
	def.running.Store(true)
	if p, err := restoreBytes(def, good); err != nil || p != nil {
		t.Fatalf("good snapshot: %v %v", err, p)
	}
	p, err = restoreBytes(def, bad)
	if p != nil || err == nil || errors.Is(err, fsm.ErrRestoreEmptied) {
		t.Fatalf("failed default restore: err %v, panic %v; want a plain error", err, p)
	}
	if _, ok := def.inner.(*fsm.FSM).Child("c"); !ok {
		t.Fatal("failed default restore lost the old state")
	}
}
