package ledger

// The ledger is not fsynced: after a power loss its final line can be cut
// short, or be zeros. Open cuts such a line off (it used to refuse the file,
// and the agent could not start); a malformed line anywhere else is still an
// error naming it.

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/strata-sched/strata/interfaces"
)

// threeEvents writes a ledger of three events and returns its path and size.
func threeEvents(t *testing.T) (string, int64) {
	t.Helper()
	p := writeLedger(t, t.TempDir(), "h1",
		step{"s1", 1, EventStart, 10}, step{"s2", 1, EventStart, 20}, step{"s1", 1, EventStop, 30})
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return p, fi.Size()
}

func appendBytes(t *testing.T, p, s string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

func TestOpenCutsOffATornFinalLine(t *testing.T) {
	for name, tail := range map[string]string{
		"partial json":       `{"seq":4,"host":"h1","shard":"s2","ep`,
		"zeros":              strings.Repeat("\x00", 4096),
		"partial then zeros": `{"seq":4,"host":"h1"` + strings.Repeat("\x00", 100),
	} {
		t.Run(name, func(t *testing.T) {
			p, size := threeEvents(t)
			appendBytes(t, p, tail)
			// The checker reads it as it is, leaving the torn line out.
			r, err := Check(p)
			if err != nil {
				t.Fatalf("check: %v", err)
			}
			if r.Events != 3 || len(r.Torn) != 1 || r.Torn[0].Line != 4 || r.Torn[0].Offset != size {
				t.Fatalf("check: %d events, torn %+v; want 3 and line 4 at offset %d", r.Events, r.Torn, size)
			}
			w, err := Open(p, "h1")
			if err != nil {
				t.Fatalf("open with a torn final line: %v", err)
			}
			defer w.Close()
			tl := w.Torn()
			if tl == nil || tl.Line != 4 || tl.Offset != size || tl.Len != int64(len(tail)) || !strings.Contains(tl.String(), p) {
				t.Fatalf("torn line %+v, want line 4 at offset %d, %d bytes", tl, size, len(tail))
			}
			if fi, _ := os.Stat(p); fi.Size() != size {
				t.Fatalf("file is %d bytes after open, want %d (the torn line cut off)", fi.Size(), size)
			}
			if open := w.Open(); len(open) != 1 || open[0].Shard != "s2" {
				t.Fatalf("open starts %v, want [s2]", open)
			}
			if e, err := w.Append("s2", 1, EventStop, 40); err != nil || e.Seq != 4 {
				t.Fatalf("append after the repair: %+v %v", e, err)
			}
			w.Close()
			r, err = Check(p)
			if err != nil || !r.OK() || r.Events != 4 || len(r.Torn) != 0 {
				t.Fatalf("check after the repair: %+v %v", r, err)
			}
		})
	}
}

// A whole final event without its newline is kept, and the next line does not
// continue it (it used to be glued onto it, and the ledger became unreadable).
func TestOpenEndsAWholeFinalLine(t *testing.T) {
	p, size := threeEvents(t)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, size-1); err != nil { // drop the last newline
		t.Fatal(err)
	}
	w, err := Open(p, "h1")
	if err != nil {
		t.Fatal(err)
	}
	if w.Torn() != nil {
		t.Fatalf("a whole event reported torn: %v", w.Torn())
	}
	if e, err := w.Append("s2", 1, EventStop, 40); err != nil || e.Seq != 4 {
		t.Fatalf("append: %+v %v", e, err)
	}
	w.Close()
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(got), string(b)) {
		t.Fatalf("the first three lines changed:\n%s", got)
	}
	if evs, err := ReadFile(p); err != nil || len(evs) != 4 {
		t.Fatalf("read: %d events, %v; want 4", len(evs), err)
	}
}

func TestOpenRefusesAMalformedLineNotAtTheEnd(t *testing.T) {
	for name, tail := range map[string]string{
		"torn line in the middle":  `{"seq":4,"host":"h1","sh` + "\n" + `{"seq":5,"host":"h1","shard":"s2","epoch":1,"event":"stop","ts":40}` + "\n",
		"zeros in the middle":      strings.Repeat("\x00", 64) + "\n" + `{"seq":5,"host":"h1","shard":"s2","epoch":1,"event":"stop","ts":40}` + "\n",
		"malformed with a newline": `{"seq":4,"host":"h1","sh` + "\n",
		"two events on one line":   `{"seq":4,"host":"h1","shard":"s2","epoch":1,"event":"stop","ts":40}{"seq":5,"host":"h1","shard":"s2","epoch":1,"event":"start","ts":50}` + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			p, size := threeEvents(t)
			appendBytes(t, p, tail)
			_, err := Open(p, "h1")
			if !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), p+" line 4") {
				t.Fatalf("want ErrInvalid naming %s line 4, got %v", p, err)
			}
			if _, err := ReadFile(p); !errors.Is(err, interfaces.ErrInvalid) {
				t.Fatalf("ReadFile: want ErrInvalid, got %v", err)
			}
			if fi, _ := os.Stat(p); fi.Size() != size+int64(len(tail)) {
				t.Fatalf("a refused ledger was changed: %d bytes, want %d", fi.Size(), size+int64(len(tail)))
			}
		})
	}
}

// A final line that decodes but breaks a rule is not torn: it is refused.
func TestOpenRefusesABadFinalEvent(t *testing.T) {
	p, _ := threeEvents(t)
	appendBytes(t, p, `{"seq":2,"host":"h1","shard":"s2","epoch":1,"event":"stop","ts":40}`)
	if _, err := Open(p, "h1"); !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), "line 4: invalid argument: seq must grow") {
		t.Fatalf("want ErrInvalid naming line 4 and the rule, got %v", err)
	}
}
