package logx

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestDedupDropsRepeatsAndCountsThem(t *testing.T) {
	var out bytes.Buffer
	now := time.Unix(0, 0)
	w := Dedup(&out, 10*time.Second, func() time.Time { return now })
	hb := func(ms int) {
		line := now.Format(time.RFC3339Nano) + " [ERROR] raft: failed to heartbeat to: peer=127.0.0.1:7301 backoff time=" + time.Duration(ms*int(time.Millisecond)).String() + "\n"
		if _, err := w.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 40; i++ { // 10 s of errors every 250 ms
		hb(10 * i)
		now = now.Add(250 * time.Millisecond)
	}
	_, _ = w.Write([]byte("something else\n"))
	hb(500)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d lines:\n%s", len(lines), out.String())
	}
	if !strings.Contains(lines[2], "(and 39 more like it in 10s, not shown)") || lines[1] != "something else" {
		t.Errorf("lines:\n%s", out.String())
	}
}
