package clickcount

import (
	"bytes"
	"encoding/gob"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/sdk/stream"
)

// Windows counts clicks per key in tumbling event-time windows of Size. It
// is a stream.Operator.
type Windows struct {
	Size time.Duration
	st   windowState
}

// windowState is what a checkpoint holds.
type windowState struct {
	// Open maps a window's index (event time / Size) to its key counts.
	Open map[int64]map[string]uint64
	// Closed is the index of the last window emitted (-1: none).
	Closed int64
	// Late counts records for windows already closed (dropped).
	Late uint64
	// Ballast stands for a larger operator's state: carried, never read.
	Ballast []byte
}

// Result is one window's output: what the sink holds per window.
type Result struct {
	Window int64             `json:"window"`
	Counts map[string]uint64 `json:"counts"`
}

// NewFactory returns the factory of Windows operators of the given size;
// a shard without a checkpoint starts with ballast bytes of state.
func NewFactory(size time.Duration, ballast int) (stream.Factory, error) {
	if size <= 0 {
		return nil, &interfaces.FieldError{Field: "window", Rule: "must be > 0", Value: size.String()}
	}
	if ballast < 0 {
		return nil, &interfaces.FieldError{Field: "state_bytes", Rule: "must be ≥ 0", Value: fmt.Sprint(ballast)}
	}
	return func(_ interfaces.ShardID, state []byte) (stream.Operator, error) {
		w := &Windows{Size: size, st: windowState{Open: map[int64]map[string]uint64{}, Closed: -1}}
		if state == nil {
			w.st.Ballast = make([]byte, ballast)
			return w, nil
		}
		var st windowState // gob leaves zero fields out: decode into zeros
		if err := gob.NewDecoder(bytes.NewReader(state)).Decode(&st); err != nil {
			return nil, fmt.Errorf("clickcount state: %w", err)
		}
		w.st = st
		if w.st.Open == nil {
			w.st.Open = map[int64]map[string]uint64{}
		}
		return w, nil
	}, nil
}

// End is the key of a record that closes every window before its event
// time and is not counted: a producer sends one per partition at the end.
const End = ""

// Process counts r (its data is the key) and emits every window that r's
// event time closes, in order.
func (w *Windows) Process(r stream.Record, emit func(seq uint64, data []byte)) error {
	if r.EventTime.IsZero() {
		return fmt.Errorf("record %d: no event time", r.Offset)
	}
	idx := r.EventTime.UnixNano() / int64(w.Size)
	// Close the open windows before idx.
	var ready []int64
	for k := range w.st.Open {
		if k < idx {
			ready = append(ready, k)
		}
	}
	sort.Slice(ready, func(i, j int) bool { return ready[i] < ready[j] })
	for _, k := range ready {
		b, err := json.Marshal(Result{Window: k, Counts: w.st.Open[k]})
		if err != nil {
			return err
		}
		emit(uint64(k)+1, b) // window indices are ≥ 0; sequences ≥ 1
		delete(w.st.Open, k)
		w.st.Closed = k
	}
	key := string(r.Data)
	if key == End {
		return nil
	}
	if idx <= w.st.Closed {
		w.st.Late++
		return nil
	}
	m := w.st.Open[idx]
	if m == nil {
		m = map[string]uint64{}
		w.st.Open[idx] = m
	}
	m[key]++
	return nil
}

// Snapshot encodes the state (gob).
func (w *Windows) Snapshot() ([]byte, error) {
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(&w.st); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
