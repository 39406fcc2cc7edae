package ledger

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestShortWriteIsCutOff: an append that the disk takes only part of (here a
// file-size limit, RLIMIT_FSIZE, plays the full disk) leaves nothing behind,
// so the next append, once there is room, makes a readable line. A review's
// probe: the fragment used to stay, the next line was glued onto it and the
// ledger could no longer be read or opened.
func TestShortWriteIsCutOff(t *testing.T) {
	p := filepath.Join(t.TempDir(), "h1.jsonl")
	w, err := Open(p, "h1")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Append("s1", 1, EventStart, 1); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Skip(err)
	}
	// Go ignores SIGXFSZ, so a write past the limit returns EFBIG.
	lim := syscall.Rlimit{Cur: uint64(fi.Size()) + 30, Max: old.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Skip(err)
	}
	_, errFull := w.Append("s1", 1, EventStop, 2)
	after, _ := os.Stat(p)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	if errFull == nil {
		t.Fatal("an append past the file-size limit succeeded")
	}
	if after.Size() != fi.Size() {
		t.Errorf("after the failed append the file is %d bytes, want %d (the fragment cut off)", after.Size(), fi.Size())
	}
	e, err := w.Append("s1", 1, EventStop, 3)
	if err != nil {
		t.Fatalf("append once there is room again: %v", err)
	}
	if e.Seq != 2 {
		t.Errorf("seq %d after the failed append, want 2", e.Seq)
	}
	w.Close()
	evs, err := ReadFile(p)
	if err != nil {
		t.Fatalf("ledger unreadable after a short write: %v", err)
	}
	if len(evs) != 2 || evs[1].Event != EventStop || evs[1].TS != 3 {
		t.Fatalf("events %+v, want the start and the stop at 3", evs)
	}
	if w2, err := Open(p, "h1"); err != nil {
		t.Fatalf("reopen: %v", err)
	} else {
		w2.Close()
	}
}
