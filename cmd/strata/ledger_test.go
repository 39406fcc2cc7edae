package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/hostagent/ledger"
	"github.com/strata-sched/strata/interfaces"
)

// writeLedger writes host's ledger: each event is (shard, epoch, event, seconds
// after t0).
func writeLedger(t *testing.T, dir, host string, t0 time.Time, evs ...any) string {
	t.Helper()
	path := filepath.Join(dir, host+".jsonl")
	w, err := ledger.Open(path, host)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+3 < len(evs)+1; i += 4 {
		at := t0.Add(time.Duration(evs[i+3].(float64) * float64(time.Second)))
		if _, err := w.Append(interfaces.ShardID(evs[i].(string)), interfaces.Epoch(evs[i+1].(int)), evs[i+2].(string), at.UnixNano()); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLedgerCheck(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 12, 1, 22, 0, 0, 0, time.UTC)
	// j/0 moves from h1 to h2 with a 2 s gap (h1 killed at 10 s); j/1 runs
	// on h2 throughout.
	h1 := writeLedger(t, dir, "h1", t0, "j/0", 1, ledger.EventStart, 0.0, "j/0", 1, ledger.EventStop, 10.0)
	h2 := writeLedger(t, dir, "h2", t0, "j/1", 1, ledger.EventStart, 0.0, "j/0", 2, ledger.EventStart, 12.0)
	win := "kill-h1=" + t0.Add(9*time.Second).Format(time.RFC3339Nano) + "," + t0.Add(20*time.Second).Format(time.RFC3339Nano)
	quiet := "quiet=" + t0.Add(13*time.Second).Format(time.RFC3339Nano) + "," + t0.Add(20*time.Second).Format(time.RFC3339Nano)

	code, out, errOut := runCLI("ledger", "check", "--expect", "j/0,j/1", "--window", win, "--window", quiet, h1, h2)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	for _, want := range []string{
		"ledgers: 2 host(s) (h1, h2), 4 events, 3 intervals",
		"running at the end: 2 shard(s) (h1 0, h2 2); expected 2",
		"violations: 0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !regexpMatch(`kill-h1 .* 2 +1 +2s\n`, out) || !regexpMatch(`quiet .* 2 +0 +0s\n`, out) {
		t.Errorf("windows: want kill-h1 2 shards, 1 stopped, 2s; quiet 0 stopped:\n%s", out)
	}

	// A shard expected but running nowhere, and one on two hosts at once.
	h3 := writeLedger(t, dir, "h3", t0, "j/1", 2, ledger.EventStart, 5.0)
	code, out, _ = runCLI("ledger", "check", "--expect", "j/0,j/1,j/2", h1, h2, h3)
	if code != 1 {
		t.Errorf("exit %d, want 1:\n%s", code, out)
	}
	for _, want := range []string{"overlap: shard j/1 on h2,h3", "missing: shard j/2", "violations: 2"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	// Bad input names the flag.
	for args, want := range map[string]string{
		"--window x " + h1:                 "--window: must be NAME=FROM,TO",
		"--window x=1,2 " + h1:             "--window x: FROM: must be an RFC 3339 time",
		"--expect a/../b " + h1:            "--expect: ",
		filepath.Join(dir, "nosuch.jsonl"): "nosuch.jsonl",
	} {
		code, _, errOut := runCLI(append([]string{"ledger", "check"}, strings.Fields(args)...)...)
		if code == 0 || !strings.Contains(errOut, want) {
			t.Errorf("%s: exit %d, stderr %q, want non-zero and %q", args, code, errOut, want)
		}
	}
}

func regexpMatch(pattern, s string) bool { return regexp.MustCompile(pattern).MatchString(s) }
