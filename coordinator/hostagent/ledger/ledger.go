package ledger

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/strata-sched/strata/interfaces"
)

// ErrBroken is returned by every append after a failed write left a partial
// line that could not be cut off; opening the ledger again repairs it.
var ErrBroken = errors.New("ledger writer broken")

// Event kinds.
const (
	EventStart = "start"
	EventStop  = "stop"
)

// Event is one line of a ledger.
type Event struct {
	Seq       uint64             `json:"seq"`
	Host      string             `json:"host"`
	Shard     interfaces.ShardID `json:"shard"`
	Epoch     interfaces.Epoch   `json:"epoch"`
	Event     string             `json:"event"`
	TS        int64              `json:"ts"`
	Recovered bool               `json:"recovered,omitempty"`
}

// Writer appends events to one host's ledger file. It is safe for concurrent
// use. Lines are written with a single write(2) each and not fsynced: they
// survive a crash of the process (kill -9), not of the machine.
//
// A write that fails part-way (a full disk) is cut off again: the file is
// truncated back to where the line began, so that the next line does not
// continue the fragment. If that truncation fails too, the Writer refuses
// every later append until the ledger is opened again (Open cuts off a final
// line without its newline).
type Writer struct {
	mu   sync.Mutex
	f    *os.File
	path string
	host string
	seq  uint64
	open map[interfaces.ShardID]Event
	// size is the length of the file: where the next line begins.
	size int64
	// broken is set when a failed write could not be cut off.
	broken error
	// torn is the final line Open cut off, if any.
	torn *TornLine
}

// Torn returns the torn final line Open cut off the ledger (nil if none), for
// the caller to log.
func (w *Writer) Torn() *TornLine { return w.torn }

// Open opens (creating if needed) the ledger at path for host. It reads the
// existing lines to continue the sequence and to learn which shards were left
// started without a stop (see Writer.Open and Writer.Recover). A malformed line, a
// line of another host or a sequence that does not grow is an error naming the
// line, except a torn final line (no newline, does not decode: see TornLine),
// which is cut off the file and reported by Writer.Torn.
func Open(path, host string) (*Writer, error) {
	if err := interfaces.ValidateID("ledger.host", host); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	sc, err := readEvents(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	evs := sc.events
	// A torn final line is cut off; a whole final event without its newline
	// gets one, so that the next line does not continue it.
	if sc.torn != nil {
		if err := f.Truncate(sc.torn.Offset); err != nil {
			f.Close()
			return nil, fmt.Errorf("ledger %s: cut off the torn final line %d at offset %d: %w", path, sc.torn.Line, sc.torn.Offset, err)
		}
	} else if sc.unterminated {
		if _, err := f.Write([]byte("\n")); err != nil {
			f.Close()
			return nil, fmt.Errorf("ledger %s: end the final line with a newline: %w", path, err)
		}
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("ledger: %w", err)
	}
	w := &Writer{f: f, path: path, host: host, open: map[interfaces.ShardID]Event{}, size: fi.Size(), torn: sc.torn}
	for _, e := range evs {
		if e.Host != host {
			f.Close()
			return nil, fmt.Errorf("ledger %s line %d: %w: host %q, this agent is %q", path, e.Seq, interfaces.ErrInvalid, e.Host, host)
		}
		w.seq = e.Seq
		if e.Event == EventStart {
			w.open[e.Shard] = e
		} else {
			delete(w.open, e.Shard)
		}
	}
	return w, nil
}

// Open returns the start events that have no stop yet, i.e. the shards this host
// was running when its ledger was last written.
func (w *Writer) Open() []Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Event, 0, len(w.open))
	for _, e := range w.open {
		out = append(out, e)
	}
	sortEvents(out)
	return out
}

// Append writes one event with the next sequence number and returns it.
func (w *Writer) Append(shard interfaces.ShardID, epoch interfaces.Epoch, event string, tsNanos int64) (Event, error) {
	return w.append(Event{Host: w.host, Shard: shard, Epoch: epoch, Event: event, TS: tsNanos})
}

// Recover appends a recovered stop for every open start, at ts (raised to the
// start's own ts if earlier). The agent calls it once after a restart.
func (w *Writer) Recover(ts int64) ([]Event, error) {
	var out []Event
	for _, e := range w.Open() {
		ev, err := w.append(Event{Host: w.host, Shard: e.Shard, Epoch: e.Epoch, Event: EventStop, TS: max(ts, e.TS), Recovered: true})
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
	return out, nil
}

func (w *Writer) append(e Event) (Event, error) {
	if e.Event != EventStart && e.Event != EventStop {
		return Event{}, fmt.Errorf("ledger: %w: event must be start or stop (got %q)", interfaces.ErrInvalid, e.Event)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return Event{}, errors.New("ledger: closed")
	}
	if w.broken != nil {
		return Event{}, w.broken
	}
	e.Seq = w.seq + 1
	b, err := json.Marshal(e)
	if err != nil {
		return Event{}, fmt.Errorf("ledger: %w", err)
	}
	n, err := w.f.Write(append(b, '\n'))
	if err != nil {
		if n == 0 {
			return Event{}, fmt.Errorf("ledger %s: append seq %d: %w", w.path, e.Seq, err)
		}
		if terr := w.f.Truncate(w.size); terr != nil {
			w.broken = fmt.Errorf("ledger %s: %w: an append failed after %d bytes (%v) and the partial line could not be cut off at offset %d (%v): open the ledger again", w.path, ErrBroken, n, err, w.size, terr)
			return Event{}, w.broken
		}
		return Event{}, fmt.Errorf("ledger %s: append seq %d: %w (the %d bytes written were cut off again)", w.path, e.Seq, err, n)
	}
	w.size += int64(n)
	w.seq = e.Seq
	if e.Event == EventStart {
		w.open[e.Shard] = e
	} else {
		delete(w.open, e.Shard)
	}
	return e, nil
}

// Close closes the file.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

// ReadFile reads every event of a ledger file. A torn final line (see
// TornLine) is left out; Check reports it in Result.Torn.
func ReadFile(path string) ([]Event, error) {
	sc, err := readFile(path)
	return sc.events, err
}

func readFile(path string) (scanned, error) {
	f, err := os.Open(path)
	if err != nil {
		return scanned{}, fmt.Errorf("ledger: %w", err)
	}
	defer f.Close()
	return readEvents(f, path)
}

// maxLine bounds the length of a ledger line.
const maxLine = 1 << 20

// TornLine is a final line of a ledger that has no newline and does not
// decode: the part of a line that reached the disk before the machine went
// down (the ledger is not fsynced), or the zeros some filesystems leave in its
// place. Its event was never complete; Open cuts it off, ReadFile leaves it
// out. A line that does not decode anywhere else, or that ends with its
// newline, is an error naming the line.
type TornLine struct {
	File string
	// Line is its line number, Offset where it began (the length of the file
	// without it), Len its length in bytes.
	Line   int
	Offset int64
	Len    int64
	// Reason is why it does not decode.
	Reason string
}

func (t TornLine) String() string {
	return fmt.Sprintf("ledger %s line %d: torn final line (%d bytes at offset %d, no newline: %s)", t.File, t.Line, t.Len, t.Offset, t.Reason)
}

// scanned is what readEvents found.
type scanned struct {
	events []Event
	// torn is the final line cut short, if any.
	torn *TornLine
	// unterminated: the final line is a whole event but lacks its newline.
	unterminated bool
}

func readEvents(r io.Reader, name string) (scanned, error) {
	br := bufio.NewReaderSize(r, 64*1024)
	var out scanned
	var off int64
	line := 0
	var last uint64
	for {
		raw, n, terminated, err := readLine(br)
		if err != nil {
			return scanned{}, fmt.Errorf("ledger %s line %d: %w", name, line+1, err)
		}
		if n == 0 {
			return out, nil
		}
		line++
		start := off
		off += n
		if len(raw) > maxLine {
			if !terminated {
				out.torn = &TornLine{File: name, Line: line, Offset: start, Len: n, Reason: fmt.Sprintf("longer than %d bytes", maxLine)}
				return out, nil
			}
			return scanned{}, fmt.Errorf("ledger %s line %d: %w: longer than %d bytes", name, line, interfaces.ErrInvalid, maxLine)
		}
		b := bytes.TrimSpace(raw)
		if len(b) == 0 {
			continue
		}
		var e Event
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		err = dec.Decode(&e)
		if err == nil && dec.InputOffset() != int64(len(b)) {
			err = fmt.Errorf("%d bytes after the event", int64(len(b))-dec.InputOffset())
		}
		if err != nil {
			if !terminated {
				out.torn = &TornLine{File: name, Line: line, Offset: start, Len: n, Reason: err.Error()}
				return out, nil
			}
			return scanned{}, fmt.Errorf("ledger %s line %d: %w: %v", name, line, interfaces.ErrInvalid, err)
		}
		if e.Event != EventStart && e.Event != EventStop {
			return scanned{}, fmt.Errorf("ledger %s line %d: %w: event must be start or stop (got %q)", name, line, interfaces.ErrInvalid, e.Event)
		}
		if e.Shard == "" || e.Host == "" {
			return scanned{}, fmt.Errorf("ledger %s line %d: %w: host and shard are required", name, line, interfaces.ErrInvalid)
		}
		if e.Seq <= last {
			return scanned{}, fmt.Errorf("ledger %s line %d: %w: seq must grow (got %d after %d)", name, line, interfaces.ErrInvalid, e.Seq, last)
		}
		last = e.Seq
		out.events = append(out.events, e)
		out.unterminated = !terminated
	}
}

// readLine reads up to and including the next newline. It returns the line
// (without the newline; only its first maxLine+1 bytes when longer), its whole
// length n including the newline, and whether it ended with one (false for a
// final line without). n is 0 at the end of the input.
func readLine(br *bufio.Reader) (line []byte, n int64, terminated bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		n += int64(len(chunk))
		if room := maxLine + 1 - len(line); room > 0 {
			line = append(line, chunk[:min(room, len(chunk))]...)
		}
		switch err {
		case nil:
			return bytes.TrimSuffix(line, []byte("\n")), n, true, nil
		case bufio.ErrBufferFull:
			continue
		case io.EOF:
			return line, n, false, nil
		default:
			return nil, n, false, err
		}
	}
}
