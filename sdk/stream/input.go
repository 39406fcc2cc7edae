package stream

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// OpenInput creates (or opens) the job's input stream: every partition's
// subject, file storage, kept until removed (limits retention), so a new
// owner can replay from its checkpoint's offset.
func OpenInput(ctx context.Context, js jetstream.JetStream, n Names) (jetstream.Stream, error) {
	if err := CheckJob("job", n.Job); err != nil {
		return nil, err
	}
	st, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: n.InputStream(), Subjects: []string{n.inputSubjects()},
		Storage: jetstream.FileStorage, AllowDirect: true})
	if err != nil {
		return nil, fmt.Errorf("input stream %s: %w", n.InputStream(), err)
	}
	return st, nil
}

// Record is one input record as a worker sees it.
type Record struct {
	// Offset is the record's sequence in the input stream.
	Offset    uint64
	EventTime time.Time
	Data      []byte
}

// InputMsg builds the message of a record of partition p with its event time.
func (n Names) InputMsg(p int, eventTime time.Time, data []byte) *nats.Msg {
	m := nats.NewMsg(n.Subject(p))
	m.Header.Set(HeaderEventTime, strconv.FormatInt(eventTime.UnixNano(), 10))
	m.Data = data
	return m
}

func recordOf(offset uint64, h nats.Header, data []byte) (Record, error) {
	r := Record{Offset: offset, Data: data}
	if v := h.Get(HeaderEventTime); v != "" {
		ns, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return Record{}, fmt.Errorf("record %d: header %s: %w", offset, HeaderEventTime, err)
		}
		r.EventTime = time.Unix(0, ns)
	}
	return r, nil
}
