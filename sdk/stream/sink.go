package stream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-sched/strata/interfaces"
)

// ErrDuplicate is returned by Sink.Write for an output the sink already holds
// (its sequence is not above the shard's last): a replay after a restore
// re-emits what the previous owner wrote after its last checkpoint, and the
// sink keeps one copy.
var ErrDuplicate = errors.New("duplicate: the sink already holds this output")

// Sink is an epoch-fenced output stream: shard p's outputs are appended to
// its own subject, each with the writer's epoch and an output sequence that
// grows per shard. An append is refused when the subject's last entry has a
// newer epoch (ErrFenced: a stale owner cannot write after its successor
// fenced the shard) and skipped when its sequence is not above the last one
// (ErrDuplicate). The check and the append are one step: the append names
// the subject's last stream sequence it read (JetStream's expected last
// subject sequence), and a concurrent append makes it read again.
type Sink struct {
	js     jetstream.JetStream
	stream jetstream.Stream
	n      Names
}

// OpenSink creates (or opens) the job's sink stream.
func OpenSink(ctx context.Context, js jetstream.JetStream, n Names) (*Sink, error) {
	if err := CheckJob("job", n.Job); err != nil {
		return nil, err
	}
	st, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: n.SinkStream(), Subjects: []string{n.sinkSubjects()},
		Storage: jetstream.FileStorage, AllowDirect: true})
	if err != nil {
		return nil, fmt.Errorf("sink stream %s: %w", n.SinkStream(), err)
	}
	return &Sink{js: js, stream: st, n: n}, nil
}

// SinkEntry is one entry of the sink.
type SinkEntry struct {
	Partition int
	Epoch     interfaces.Epoch
	// Seq is the output's sequence; a fence marker (Fence) repeats the
	// previous entry's.
	Seq   uint64
	Fence bool
	Data  []byte
	// StreamSeq is the entry's sequence in the sink stream; Time when the
	// broker stored it.
	StreamSeq uint64
	Time      time.Time
}

func headerUint(h nats.Header, k string) (uint64, error) {
	v := h.Get(k)
	if v == "" {
		return 0, fmt.Errorf("header %s: missing", k)
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("header %s: %w", k, err)
	}
	return n, nil
}

// last reads partition p's last entry (zero when it has none).
func (s *Sink) last(ctx context.Context, p int) (SinkEntry, error) {
	m, err := s.stream.GetLastMsgForSubject(ctx, s.n.SinkSubject(p))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return SinkEntry{Partition: p}, nil
	}
	if err != nil {
		return SinkEntry{}, fmt.Errorf("sink %s: %w", s.n.SinkSubject(p), err)
	}
	return entryOf(p, m.Sequence, m.Time, m.Header, m.Data)
}

func entryOf(p int, seq uint64, t time.Time, h nats.Header, data []byte) (SinkEntry, error) {
	e := SinkEntry{Partition: p, StreamSeq: seq, Time: t, Data: data}
	ep, err := headerUint(h, HeaderEpoch)
	if err != nil {
		return SinkEntry{}, fmt.Errorf("sink entry %d: %w", seq, err)
	}
	if e.Seq, err = headerUint(h, HeaderSeq); err != nil {
		return SinkEntry{}, fmt.Errorf("sink entry %d: %w", seq, err)
	}
	e.Epoch = interfaces.Epoch(ep)
	e.Fence = h.Get(HeaderFence) == "1"
	return e, nil
}

// Last returns partition p's last output sequence and the epoch that wrote
// the last entry.
func (s *Sink) Last(ctx context.Context, p int) (seq uint64, epoch interfaces.Epoch, err error) {
	e, err := s.last(ctx, p)
	return e.Seq, e.Epoch, err
}

// Fence appends a marker under epoch: from now on an owner with an older
// epoch is refused, even before this owner's first output.
func (s *Sink) Fence(ctx context.Context, p int, epoch interfaces.Epoch) error {
	_, err := s.Writer(p, epoch).fence(ctx)
	return err
}

// Write appends output seq of partition p under epoch (see Sink).
func (s *Sink) Write(ctx context.Context, p int, epoch interfaces.Epoch, seq uint64, data []byte) error {
	return s.Writer(p, epoch).Write(ctx, seq, data)
}

// Writer returns a writer of partition p's outputs under epoch. It keeps
// the partition's last entry as it last saw it, so an output at or below
// the last sequence is skipped without asking the broker (the sink only
// grows) and an append costs one round trip; when another writer appended
// meanwhile, the append fails on the expected sequence and the writer reads
// the last entry again. A Writer is not safe for concurrent use.
func (s *Sink) Writer(p int, epoch interfaces.Epoch) *Writer {
	return &Writer{s: s, p: p, epoch: epoch}
}

// Writer appends one partition's outputs under one epoch (Sink.Writer).
type Writer struct {
	s     *Sink
	p     int
	epoch interfaces.Epoch
	last  SinkEntry
	known bool
}

func (w *Writer) refresh(ctx context.Context) error {
	last, err := w.s.last(ctx, w.p)
	if err != nil {
		return err
	}
	w.last, w.known = last, true
	if last.Epoch > w.epoch {
		return fmt.Errorf("sink %d@%d: %w (%d)", w.p, w.epoch, ErrFenced, last.Epoch)
	}
	return nil
}

// fence appends a marker under the writer's epoch unless the last entry
// already has it; it returns the last output sequence.
func (w *Writer) fence(ctx context.Context) (uint64, error) {
	if err := w.refresh(ctx); err != nil {
		return 0, err
	}
	for w.last.Epoch != w.epoch || w.last.StreamSeq == 0 {
		if err := w.append(ctx, 0, nil); !isConflict(err) {
			return w.last.Seq, err
		}
		if err := w.refresh(ctx); err != nil {
			return 0, err
		}
	}
	return w.last.Seq, nil
}

// Write appends output seq (≥ 1): ErrDuplicate when the sink holds it,
// ErrFenced when a newer epoch has written.
func (w *Writer) Write(ctx context.Context, seq uint64, data []byte) error {
	if seq == 0 {
		return &interfaces.FieldError{Field: "seq", Rule: "must be ≥ 1 (0 marks a fence)"}
	}
	if !w.known {
		if err := w.refresh(ctx); err != nil {
			return err
		}
	}
	for {
		if seq <= w.last.Seq {
			return fmt.Errorf("sink %d seq %d (last %d): %w", w.p, seq, w.last.Seq, ErrDuplicate)
		}
		err := w.append(ctx, seq, data)
		if !isConflict(err) {
			return err
		}
		if err := w.refresh(ctx); err != nil {
			return err
		}
	}
}

// append publishes an entry after w.last (seq 0: a fence marker).
func (w *Writer) append(ctx context.Context, seq uint64, data []byte) error {
	m := nats.NewMsg(w.s.n.SinkSubject(w.p))
	m.Header.Set(HeaderEpoch, strconv.FormatUint(uint64(w.epoch), 10))
	e := SinkEntry{Partition: w.p, Epoch: w.epoch, Seq: seq, Data: data}
	if seq == 0 {
		m.Header.Set(HeaderFence, "1")
		e.Seq, e.Fence = w.last.Seq, true
	} else {
		m.Data = data
	}
	m.Header.Set(HeaderSeq, strconv.FormatUint(e.Seq, 10))
	ack, err := w.s.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(w.last.StreamSeq))
	if isConflict(err) {
		return err
	}
	if err != nil {
		return fmt.Errorf("sink %d: %w", w.p, err)
	}
	e.StreamSeq = ack.Sequence
	w.last = e
	return nil
}

// ReadAll returns every entry of partitions 0..n-1 in stream order, fence
// markers included: what a checker compares with the input.
func (s *Sink) ReadAll(ctx context.Context, partitions int) (map[int][]SinkEntry, error) {
	out := map[int][]SinkEntry{}
	info, err := s.stream.Info(ctx)
	if err != nil {
		return nil, err
	}
	if info.State.Msgs == 0 {
		return out, nil
	}
	c, err := s.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, err
	}
	part := map[string]int{}
	for p := 0; p < partitions; p++ {
		part[s.n.SinkSubject(p)] = p
	}
	for got := uint64(0); got < info.State.LastSeq; {
		batch, err := c.Fetch(512, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				return nil, err
			}
			got = md.Sequence.Stream
			p, ok := part[m.Subject()]
			if !ok {
				continue
			}
			e, err := entryOf(p, md.Sequence.Stream, md.Timestamp, m.Headers(), m.Data())
			if err != nil {
				return nil, err
			}
			out[p] = append(out[p], e)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return nil, err
		}
		if n == 0 {
			return nil, fmt.Errorf("sink %s: read stopped at %d of %d", s.n.SinkStream(), got, info.State.LastSeq)
		}
	}
	return out, nil
}
