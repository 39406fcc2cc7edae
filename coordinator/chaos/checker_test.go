package chaos

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/hostagent/ledger"
	"github.com/strata-sched/strata/interfaces"
)

// These tests run in plain `go test` (no root): they check the checker on
// planted histories, so that a clean chaos report means something.

var t0 = time.Unix(1_800_000_000, 0)

func at(s float64) int64 { return t0.Add(time.Duration(s * float64(time.Second))).UnixNano() }

func ev(host, shard string, epoch uint64, event string, s float64) ledger.Event {
	return ledger.Event{Host: host, Shard: ledgerShard(shard), Epoch: ledgerEpoch(epoch), Event: event, TS: at(s)}
}

func history(evs ...ledger.Event) *ledger.Result {
	seq := map[string]uint64{}
	for i := range evs {
		seq[evs[i].Host]++
		evs[i].Seq = seq[evs[i].Host]
	}
	return ledger.CheckEvents(evs)
}

func causes(stops []Stop) map[string]string {
	out := map[string]string{}
	for _, s := range stops {
		out[string(s.Interval.Shard)+"@"+s.Interval.Host] = s.Cause
	}
	return out
}

func TestClassifyStops(t *testing.T) {
	res := history(
		// deleted: job d deleted at 10, its shard stops at 11.
		ev("h1", "d/0", 1, "start", 0), ev("h1", "d/0", 1, "stop", 11),
		// drained: h2 drained at 20, m/0 stops at 21 and starts on h3.
		ev("h2", "m/0", 1, "start", 0), ev("h2", "m/0", 1, "stop", 21), ev("h3", "m/0", 2, "start", 22),
		// host fault: h4 paused at 30..35, its shard stops at 36.
		ev("h4", "p/0", 1, "start", 0), ev("h4", "p/0", 1, "stop", 36), ev("h3", "p/0", 2, "start", 37),
		// fenced and resumed: h5 stops f/0 at 41 and restarts it at the same epoch.
		ev("h5", "f/0", 3, "start", 0), ev("h5", "f/0", 3, "stop", 41), ev("h5", "f/0", 3, "start", 43),
		// fenced with the host's other shards: h6 stops g/0 and g/1 together, both move.
		ev("h6", "g/0", 1, "start", 0), ev("h6", "g/1", 1, "start", 0),
		ev("h6", "g/0", 1, "stop", 50), ev("h6", "g/1", 1, "stop", 50.2),
		ev("h3", "g/0", 2, "start", 53), ev("h3", "g/1", 2, "start", 53),
		// moved together: a round moves both of h9's shards; each starts
		// elsewhere at once (not a fence, though the host stopped all it ran).
		ev("h9", "q/0", 1, "start", 0), ev("h9", "q/1", 1, "start", 0),
		ev("h9", "q/0", 1, "stop", 55), ev("h9", "q/1", 1, "stop", 55.1),
		ev("h3", "q/0", 2, "start", 55.05), ev("h2", "q/1", 2, "start", 55.3),
		// moved: h7 gives up one of its two shards, which starts elsewhere.
		ev("h7", "k/0", 1, "start", 0), ev("h7", "k/1", 1, "start", 0), ev("h7", "k/0", 1, "stop", 60), ev("h3", "k/0", 2, "start", 60.1),
		// never restarted.
		ev("h8", "n/0", 1, "start", 0), ev("h8", "n/0", 1, "stop", 70),
		// moved, then its job deleted before it started elsewhere.
		ev("h8", "x/0", 1, "start", 0), ev("h8", "x/0", 1, "stop", 80),
	)
	ops := []Op{
		{Kind: OpDelete, Target: "d", Start: time.Unix(0, at(10))},
		{Kind: OpDrain, Target: "h2", Start: time.Unix(0, at(20))},
		{Kind: OpDelete, Target: "x", Start: time.Unix(0, at(80.5))},
	}
	faults := []Fault{
		{Kind: PauseHost, Hosts: []string{"h4"}, Start: time.Unix(0, at(30)), End: time.Unix(0, at(35))},
		{Kind: PauseGlobalLeader, Target: "g1", Start: time.Unix(0, at(40)), End: time.Unix(0, at(45))},
	}
	got := causes(Classify(res, ops, faults, time.Unix(0, at(100)), Slack{Host: 3 * time.Second, ControlPlane: 10 * time.Second}))
	want := map[string]string{
		"d/0@h1": CauseDeleted, "m/0@h2": CauseDrained, "p/0@h4": CauseHost, "f/0@h5": CauseResumed,
		"g/0@h6": CauseFenced, "g/1@h6": CauseFenced, "k/0@h7": CauseMoved, "n/0@h8": CauseNoReturn,
		"q/0@h9": CauseMoved, "q/1@h9": CauseMoved, "x/0@h8": CauseMoved,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("causes:\n got %v\nwant %v", got, want)
	}
	// The host fault's stop after its slack is no longer the host's fault.
	got = causes(Classify(res, ops, faults, time.Unix(0, at(100)), Slack{Host: 0, ControlPlane: 10 * time.Second}))
	if got["p/0@h4"] != CauseMoved {
		t.Errorf("a stop after the host fault's slack: got %q, want %q", got["p/0@h4"], CauseMoved)
	}
}

func TestLongestGap(t *testing.T) {
	ivs := []ledger.Interval{{Start: at(0), End: at(10)}, {Start: at(12), End: at(20)}, {Start: at(25), End: math.MaxInt64}}
	for _, c := range []struct {
		from, to float64
		want     time.Duration
	}{{0, 30, 5 * time.Second}, {0, 11, time.Second}, {13, 19, 0}, {21, 30, 4 * time.Second}} {
		if got := ledger.LongestGap(ivs, at(c.from), at(c.to)); got != c.want {
			t.Errorf("gap in [%v, %v]: got %v, want %v", c.from, c.to, got, c.want)
		}
	}
	if got := ledger.LongestGap(ivs[:1], at(5), at(15)); got != 5*time.Second {
		t.Errorf("stopped for good: got %v, want 5s", got)
	}
}

func TestStopsPerFault(t *testing.T) {
	res := history(
		ev("h1", "a/0", 1, "start", 0), ev("h1", "a/0", 1, "stop", 11), ev("h2", "a/0", 2, "start", 14),
		ev("h1", "b/0", 1, "start", 0),
	)
	f := Fault{Kind: KillRegionLeader, Start: time.Unix(0, at(10)), End: time.Unix(0, at(12))}
	got := StopsPerFault(res, nil, []Fault{f}, 5*time.Second)
	if len(got) != 1 || got[0].Shards != 2 || got[0].Stopped != 1 || got[0].Longest != 3*time.Second {
		t.Fatalf("got %+v, want 2 shards, 1 stopped, longest 3s", got)
	}
}

func TestWorkerOverlapFromHeartbeats(t *testing.T) {
	dir := t.TempDir()
	tp := &Topology{BeatDir: dir}
	c := NewChecker(tp, t0, t.Logf)
	lines := map[string]string{
		// s/0 moves cleanly from h1 to h2; s/1 beats on both at once (planted).
		"h1": "1000000000 s/0 1 10\n2000000000 s/0 1 10\n1000000000 s/1 1 11\n5000000000 s/1 1 11\n",
		"h2": "2500000000 s/0 2 20\n3000000000 s/0 2 20\n3000000000 s/1 2 21\n4000000000 s/1 2 21\n",
	}
	for h, l := range lines {
		// Written in two parts: the reader keeps a partial line for later.
		cut := strings.Index(l, "\n") + 3
		if err := os.WriteFile(filepath.Join(dir, h+".beats"), []byte(l[:cut]), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := c.readBeats(h); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(filepath.Join(dir, h+".beats"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(l[cut:])
		f.Close()
		if err := c.readBeats(h); err != nil {
			t.Fatal(err)
		}
	}
	got := c.workerOverlaps()
	if len(got) != 1 || !strings.Contains(got[0].text, "shard s/1") || !strings.Contains(got[0].text, "for 1s") {
		t.Fatalf("worker overlaps: got %q, want one for s/1 of 1s", got)
	}
	if len(c.runs) != 4 {
		t.Errorf("runs: got %d, want 4", len(c.runs))
	}
}

func TestScheduleIsSeeded(t *testing.T) {
	a := Schedule(42, 30, time.Second, 5*time.Second, time.Second)
	b := Schedule(42, 30, time.Second, 5*time.Second, time.Second)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different schedules")
	}
	seen := map[Kind]bool{}
	for _, s := range a[:len(Kinds)] {
		seen[s.Kind] = true
		if s.Hold < time.Second || s.Hold > 5*time.Second {
			t.Errorf("%s held %v, outside [1s, 5s]", s.Kind, s.Hold)
		}
	}
	if len(seen) != len(Kinds) {
		t.Errorf("the first round has %d kinds, want every one of %d", len(seen), len(Kinds))
	}
}

func ledgerShard(s string) interfaces.ShardID { return interfaces.ShardID(s) }
func ledgerEpoch(e uint64) interfaces.Epoch   { return interfaces.Epoch(e) }

func TestOverlapsPerFault(t *testing.T) {
	res := history(
		ev("h1", "a/0", 1, "start", 0), ev("h1", "a/0", 1, "stop", 15), ev("h2", "a/0", 2, "start", 12),
		ev("h1", "b/0", 1, "start", 0), ev("h1", "b/0", 1, "stop", 40), ev("h2", "b/0", 2, "start", 39),
	)
	f := Fault{Kind: PauseHost, Hosts: []string{"h1"}, Start: time.Unix(0, at(10)), End: time.Unix(0, at(14))}
	got := OverlapsPerFault(res, []Fault{f}, 5*time.Second)
	if want := map[string]int{string(PauseHost): 1, "": 1}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestLogTimeAndFirstLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.txt")
	log := "host/h1 2026/12/01 20:21:38.809930 session: connected to 10.99.0.5:7001 (leader region-1-1)\n" +
		"host/h1 2026/12/01 20:22:01.000000 session ended: EOF\n" +
		"host/h1 2026/12/01 20:22:02.748113 session: connected to 10.99.0.5:7001 (leader region-1-2)\n"
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 12, 1, 20, 22, 0, 0, time.Local)
	at, ok := firstLogLine(path, "session: connected to", from, from.Add(time.Minute))
	if want := time.Date(2026, 12, 1, 20, 22, 2, 748113000, time.Local); !ok || !at.Equal(want) {
		t.Fatalf("got %v %v, want %v", at, ok, want)
	}
	if _, ok := firstLogLine(path, "session: connected to", from, from.Add(time.Second)); ok {
		t.Error("a line after until was taken")
	}
}

func TestPausedHostWorkers(t *testing.T) {
	c := NewChecker(&Topology{}, t0, t.Logf)
	c.runs[runKey{"h1", "a/0", 1, 10}] = &workerRun{Host: "h1", Shard: "a/0", First: at(0), Last: at(14)}
	c.runs[runKey{"h1", "b/0", 1, 11}] = &workerRun{Host: "h1", Shard: "b/0", First: at(0), Last: at(11)}
	c.runs[runKey{"h2", "c/0", 1, 12}] = &workerRun{Host: "h2", Shard: "c/0", First: at(0), Last: at(30)}
	f := Fault{Kind: PauseHost, Target: "h1", Start: time.Unix(0, at(10)), End: time.Unix(0, at(13))}
	got := c.PausedHostWorkers([]Fault{f})
	if len(got) != 1 || got[0].Workers != 2 || got[0].RanFor != 3*time.Second {
		t.Fatalf("got %+v, want 2 workers, 3s (capped at the SIGCONT)", got)
	}
}
