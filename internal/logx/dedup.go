package logx

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"time"
)

// Dedup returns a writer that passes each line of w through, except that a
// line repeating one passed less than every ago (the same text once numbers
// are ignored: timestamps, backoffs and ports differ between repeats) is
// dropped; the next one passed after that says how many were dropped. now is
// the clock (time.Now in daemons). Writes must be whole lines, as log and
// hclog write them; a partial line is passed as it is.
func Dedup(w io.Writer, every time.Duration, now func() time.Time) io.Writer {
	return &dedup{w: w, every: every, now: now, seen: map[string]*seenLine{}}
}

type dedup struct {
	w     io.Writer
	every time.Duration
	now   func() time.Time

	mu   sync.Mutex
	seen map[string]*seenLine
}

type seenLine struct {
	passed  time.Time
	dropped int
}

// maxKeys bounds the memory of lines seen; past it the memory starts afresh.
const maxKeys = 4096

func (d *dedup) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	var out bytes.Buffer
	for _, line := range bytes.SplitAfter(p, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		k := key(line)
		s := d.seen[k]
		if s != nil && now.Sub(s.passed) < d.every {
			s.dropped++
			continue
		}
		if s != nil && s.dropped > 0 && bytes.HasSuffix(line, []byte("\n")) {
			line = append(line[:len(line)-1:len(line)-1], fmt.Sprintf(" (and %d more like it in %v, not shown)\n", s.dropped, now.Sub(s.passed).Round(time.Second))...)
		}
		if len(d.seen) >= maxKeys {
			d.seen = map[string]*seenLine{}
		}
		d.seen[k] = &seenLine{passed: now}
		out.Write(line)
	}
	if out.Len() > 0 {
		if _, err := d.w.Write(out.Bytes()); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// key is a line with each run starting with a digit (a number, a time, a
// duration with its unit, an address) replaced by "#".
func key(line []byte) string {
	b := make([]byte, 0, len(line))
	for i := 0; i < len(line); i++ {
		c := line[i]
		if c < '0' || c > '9' {
			b = append(b, c)
			continue
		}
		for i+1 < len(line) && isRun(line[i+1]) {
			i++
		}
		b = append(b, '#')
	}
	return string(b)
}

func isRun(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '.' || c == ':' || c >= 0x80
}
