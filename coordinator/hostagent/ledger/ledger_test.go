package ledger

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-sched/strata/interfaces"
)

// write builds a ledger file for host from (shard, epoch, event, ts) steps via the
// real Writer.
type step struct {
	shard interfaces.ShardID
	epoch interfaces.Epoch
	event string
	ts    int64
}

func writeLedger(t *testing.T, dir, host string, steps ...step) string {
	t.Helper()
	p := filepath.Join(dir, host+".jsonl")
	w, err := Open(p, host)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, s := range steps {
		if _, err := w.Append(s.shard, s.epoch, s.event, s.ts); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func kinds(r *Result) map[string]int {
	m := map[string]int{}
	for _, v := range r.Violations {
		m[v.Kind]++
	}
	return m
}

func TestCheckCleanHandover(t *testing.T) {
	dir := t.TempDir()
	// s1 moves h1 → h2 (stop at 100, start at 150 with epoch+1); s2 stays on h2;
	// s3 moves back and forth with growing epochs.
	a := writeLedger(t, dir, "h1",
		step{"s1", 1, EventStart, 10}, step{"s3", 1, EventStart, 20},
		step{"s1", 1, EventStop, 100}, step{"s3", 1, EventStop, 200},
		step{"s3", 3, EventStart, 400})
	b := writeLedger(t, dir, "h2",
		step{"s2", 1, EventStart, 5}, step{"s1", 2, EventStart, 150},
		step{"s3", 2, EventStart, 200}, step{"s3", 2, EventStop, 390})
	r, err := Check(a, b)
	if err != nil {
		t.Fatal(err)
	}
	r.ExpectRunning([]interfaces.ShardID{"s1", "s2", "s3"})
	if !r.OK() {
		t.Fatalf("clean history reported violations: %v", r.Err())
	}
	if r.Events != 9 || len(r.Intervals) != 6 {
		t.Fatalf("events=%d intervals=%d, want 9 and 6", r.Events, len(r.Intervals))
	}
	want := map[interfaces.ShardID]string{"s1": "h2", "s2": "h2", "s3": "h1"}
	for s, h := range want {
		if got := r.Running[s]; len(got) != 1 || got[0] != h {
			t.Errorf("running[%s] = %v, want [%s]", s, got, h)
		}
	}
}

func TestCheckCatchesOverlap(t *testing.T) {
	dir := t.TempDir()
	// h2 starts s1 at 90 while h1 runs it until 100.
	a := writeLedger(t, dir, "h1", step{"s1", 1, EventStart, 10}, step{"s1", 1, EventStop, 100})
	b := writeLedger(t, dir, "h2", step{"s1", 2, EventStart, 90})
	r, err := Check(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if r.OK() || kinds(r)[KindOverlap] != 1 || len(r.Violations) != 1 {
		t.Fatalf("want exactly one overlap, got %v", r.Violations)
	}
	v := r.Violations[0]
	if v.Shard != "s1" || len(v.Hosts) != 2 || !strings.Contains(r.Err().Error(), "at once") {
		t.Fatalf("violation does not name shard and both hosts: %+v", v)
	}
}

func TestCheckCatchesOpenOverlapAndDoubleStart(t *testing.T) {
	dir := t.TempDir()
	// h1 never stops s1; h2 starts it later: overlap with an open interval. h2
	// also starts s2 twice without a stop.
	a := writeLedger(t, dir, "h1", step{"s1", 1, EventStart, 10})
	b := writeLedger(t, dir, "h2", step{"s1", 2, EventStart, 1000},
		step{"s2", 1, EventStart, 1}, step{"s2", 1, EventStart, 2})
	r, err := Check(a, b)
	if err != nil {
		t.Fatal(err)
	}
	k := kinds(r)
	if k[KindOverlap] != 2 {
		t.Fatalf("want 2 overlaps (cross-host open interval, same-host double start), got %v", r.Violations)
	}
	if got := r.Running["s1"]; len(got) != 2 {
		t.Fatalf("s1 should be running on both hosts at the end, got %v", got)
	}
}

func TestCheckCatchesEpochRegression(t *testing.T) {
	dir := t.TempDir()
	// No overlap in time, but h2 starts s1 with epoch 2 after h1 started it with 3;
	// h3 starts s2 with the same epoch h1 used.
	a := writeLedger(t, dir, "h1", step{"s1", 3, EventStart, 10}, step{"s1", 3, EventStop, 20},
		step{"s2", 5, EventStart, 10}, step{"s2", 5, EventStop, 20})
	b := writeLedger(t, dir, "h2", step{"s1", 2, EventStart, 30})
	c := writeLedger(t, dir, "h3", step{"s2", 5, EventStart, 30})
	r, err := Check(a, b, c)
	if err != nil {
		t.Fatal(err)
	}
	if k := kinds(r); k[KindEpoch] != 2 || len(r.Violations) != 2 {
		t.Fatalf("want 2 epoch violations, got %v", r.Violations)
	}
	// Same epoch restarted on the same host (resume after a fence) is fine.
	d := writeLedger(t, dir, "h4", step{"s9", 4, EventStart, 10}, step{"s9", 4, EventStop, 20}, step{"s9", 4, EventStart, 30})
	r, err = Check(d)
	if err != nil || !r.OK() {
		t.Fatalf("resume under the same epoch on one host flagged: %v %v", err, r.Err())
	}
}

func TestCheckMissingAndOrder(t *testing.T) {
	dir := t.TempDir()
	a := writeLedger(t, dir, "h1", step{"s1", 1, EventStart, 10}, step{"s1", 1, EventStop, 20},
		step{"s2", 1, EventStop, 30})
	r, err := Check(a)
	if err != nil {
		t.Fatal(err)
	}
	r.ExpectRunning([]interfaces.ShardID{"s1"})
	k := kinds(r)
	if k[KindMissing] != 1 || k[KindOrder] != 1 || len(r.Violations) != 2 {
		t.Fatalf("want one missing (s1) and one order (stop without start), got %v", r.Violations)
	}
	// A sequence gap (lines lost) is reported.
	evs := []Event{{Seq: 1, Host: "h", Shard: "s", Epoch: 1, Event: EventStart, TS: 1}, {Seq: 3, Host: "h", Shard: "s", Epoch: 1, Event: EventStop, TS: 2}}
	if r := CheckEvents(evs); kinds(r)[KindOrder] != 1 {
		t.Fatalf("seq gap not reported: %v", r.Violations)
	}
}

func TestWriterContinuesAndRecovers(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "h1.jsonl")
	w, err := Open(p, "h1")
	if err != nil {
		t.Fatal(err)
	}
	mustAppend := func(w *Writer, s interfaces.ShardID, ev string, ts int64) Event {
		e, err := w.Append(s, 1, ev, ts)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	mustAppend(w, "a", EventStart, 10)
	mustAppend(w, "b", EventStart, 20)
	mustAppend(w, "a", EventStop, 30)
	w.Close()

	w, err = Open(p, "h1")
	if err != nil {
		t.Fatal(err)
	}
	open := w.Open()
	if len(open) != 1 || open[0].Shard != "b" {
		t.Fatalf("open after reopen = %v, want [b]", open)
	}
	rec, err := w.Recover(15) // earlier than b's start: raised to 20
	if err != nil || len(rec) != 1 || rec[0].Seq != 4 || rec[0].TS != 20 || !rec[0].Recovered {
		t.Fatalf("recover = %+v, %v", rec, err)
	}
	if e := mustAppend(w, "c", EventStart, 40); e.Seq != 5 {
		t.Fatalf("seq after recover = %d, want 5", e.Seq)
	}
	w.Close()
	r, err := Check(p)
	if err != nil || !r.OK() {
		t.Fatalf("check: %v %v", err, r.Err())
	}
	if _, err := Open(p, "h2"); !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), `host "h1"`) {
		t.Fatalf("opening h1's ledger as h2: %v", err)
	}
}

func TestReadRejectsMalformed(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]string{
		"garbage":       "not json\n",
		"unknown field": `{"seq":1,"host":"h","shard":"s","epoch":1,"event":"start","ts":1,"x":2}` + "\n",
		"bad event":     `{"seq":1,"host":"h","shard":"s","epoch":1,"event":"pause","ts":1}` + "\n",
		"seq not grow":  `{"seq":2,"host":"h","shard":"s","epoch":1,"event":"start","ts":1}` + "\n" + `{"seq":2,"host":"h","shard":"s","epoch":1,"event":"stop","ts":1}` + "\n",
	}
	for name, body := range cases {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Check(p)
		if !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), "line") {
			t.Errorf("%s: want ErrInvalid naming the line, got %v", name, err)
		}
	}
	if _, err := Check(); err == nil {
		t.Error("Check with no files must fail")
	}
}
