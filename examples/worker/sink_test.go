package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-sched/strata/interfaces"
)

func shardID(s string) interfaces.ShardID { return interfaces.ShardID(s) }
func epochOf(e uint64) interfaces.Epoch   { return interfaces.Epoch(e) }

// The sink accepts a shard's writes under its current epoch and newer ones,
// and refuses an older epoch once it has seen a newer one: an old owner that
// runs on cannot write over the new owner's output. Shards are fenced apart.
func TestEpochSinkRefusesAnOlderEpoch(t *testing.T) {
	dir := t.TempDir()
	s := epochSink{dir: dir}
	for _, w := range []struct {
		shard string
		epoch uint64
		ok    bool
	}{
		{"job/0", 5, true},
		{"job/0", 5, true},
		{"job/0", 6, true}, // a new owner
		{"job/0", 5, false},
		{"job/1", 1, true}, // another shard: its own epochs
		{"job/0", 6, true},
	} {
		err := s.Write(shardID(w.shard), epochOf(w.epoch), "r")
		if w.ok != (err == nil) || (!w.ok && !errors.Is(err, ErrFenced)) {
			t.Fatalf("write %s@%d: %v", w.shard, w.epoch, err)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "job%2F0.out"))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); got != "5 r\n5 r\n6 r\n6 r\n" {
		t.Fatalf("job/0's output:\n%s", got)
	}
}
