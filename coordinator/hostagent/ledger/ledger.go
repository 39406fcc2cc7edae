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
}

// Open opens (creating if needed) the ledger at path for host. It reads the
// existing lines to continue the sequence and to learn which shards were left
// started without a stop (see Writer.Open and Writer.Recover). A malformed line, a
// line of another host or a sequence that does not grow is an error naming the
// line.
func Open(path, host string) (*Writer, error) {
	if err := interfaces.ValidateID("ledger.host", host); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	evs, err := readEvents(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("ledger: %w", err)
	}
	w := &Writer{f: f, path: path, host: host, open: map[interfaces.ShardID]Event{}, size: fi.Size()}
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

// ReadFile reads every event of a ledger file.
func ReadFile(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	defer f.Close()
	return readEvents(f, path)
}

func readEvents(r io.Reader, name string) ([]Event, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	var out []Event
	line := 0
	var last uint64
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var e Event
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("ledger %s line %d: %w: %v", name, line, interfaces.ErrInvalid, err)
		}
		if e.Event != EventStart && e.Event != EventStop {
			return nil, fmt.Errorf("ledger %s line %d: %w: event must be start or stop (got %q)", name, line, interfaces.ErrInvalid, e.Event)
		}
		if e.Shard == "" || e.Host == "" {
			return nil, fmt.Errorf("ledger %s line %d: %w: host and shard are required", name, line, interfaces.ErrInvalid)
		}
		if e.Seq <= last {
			return nil, fmt.Errorf("ledger %s line %d: %w: seq must grow (got %d after %d)", name, line, interfaces.ErrInvalid, e.Seq, last)
		}
		last = e.Seq
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: %w", name, err)
	}
	return out, nil
}
