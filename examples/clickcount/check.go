package clickcount

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-sched/strata/sdk/stream"
)

// Counts is per partition, per window, per key: the clicks counted.
type Counts map[int]map[int64]map[string]uint64

func (c Counts) add(p int, w int64, key string, n uint64) {
	if c[p] == nil {
		c[p] = map[int64]map[string]uint64{}
	}
	if c[p][w] == nil {
		c[p][w] = map[string]uint64{}
	}
	c[p][w][key] += n
}

// Expected reads the whole input stream and counts it directly — the
// reference the sink is compared with: every click of a partition lands in
// the window of its event time (the producer's event times grow, so none is
// late). It returns the counts and the number of clicks.
func Expected(ctx context.Context, js jetstream.JetStream, n stream.Names, size time.Duration) (Counts, int, error) {
	st, err := js.Stream(ctx, n.InputStream())
	if err != nil {
		return nil, 0, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, 0, err
	}
	out, clicks := Counts{}, 0
	if info.State.Msgs == 0 {
		return out, 0, nil
	}
	c, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, 0, err
	}
	for got := uint64(0); got < info.State.LastSeq; {
		batch, err := c.Fetch(1024, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, 0, err
		}
		k := 0
		for m := range batch.Messages() {
			k++
			md, err := m.Metadata()
			if err != nil {
				return nil, 0, err
			}
			got = md.Sequence.Stream
			p, err := n.PartitionOfSubject(m.Subject())
			if err != nil {
				return nil, 0, err
			}
			ns, err := strconv.ParseInt(m.Headers().Get(stream.HeaderEventTime), 10, 64)
			if err != nil {
				return nil, 0, fmt.Errorf("input %d: event time: %w", got, err)
			}
			if key := string(m.Data()); key != End {
				out.add(p, ns/int64(size), key, 1)
				clicks++
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return nil, 0, err
		}
		if k == 0 {
			return nil, 0, fmt.Errorf("input %s: read stopped at %d of %d", n.InputStream(), got, info.State.LastSeq)
		}
	}
	return out, clicks, nil
}

// Verdict is what Compare found.
type Verdict struct {
	Clicks int // in the input
	// Windows is the windows the sink holds (outputs, fence markers left out).
	Windows int
	// LostClicks counts clicks in the input that no sink window counts;
	// DuplicateClicks those counted more than once (a window written twice,
	// or a count above the input's); DuplicateWindows the windows written
	// more than once; WrongClicks the clicks of windows whose counts differ
	// from the input's in any other way.
	LostClicks, DuplicateClicks, DuplicateWindows int
	// Fences is the fence markers (one per new owner); Epochs the owners
	// that wrote outputs.
	Fences, Epochs int
	Problems       []string
}

// OK reports whether the sink holds exactly the input's counts.
func (v Verdict) OK() bool {
	return v.LostClicks == 0 && v.DuplicateClicks == 0 && v.DuplicateWindows == 0 && len(v.Problems) == 0
}

func (v Verdict) String() string {
	return fmt.Sprintf("%d clicks in, %d windows out, %d lost, %d duplicated (%d windows twice), %d fences, %d owners wrote, %d problems",
		v.Clicks, v.Windows, v.LostClicks, v.DuplicateClicks, v.DuplicateWindows, v.Fences, v.Epochs, len(v.Problems))
}

// Compare reads the sink's entries of partitions 0..n-1 and compares them
// with want.
func Compare(ctx context.Context, sink *stream.Sink, partitions int, want Counts, clicks int) (Verdict, error) {
	entries, err := sink.ReadAll(ctx, partitions)
	if err != nil {
		return Verdict{}, err
	}
	v := Verdict{Clicks: clicks}
	got := Counts{}
	epochs := map[string]bool{}
	for p := 0; p < partitions; p++ {
		seen := map[int64]bool{}
		var lastSeq uint64
		for _, e := range entries[p] {
			if e.Fence {
				v.Fences++
				continue
			}
			epochs[fmt.Sprintf("%d@%d", p, e.Epoch)] = true
			if e.Seq <= lastSeq {
				v.Problems = append(v.Problems, fmt.Sprintf("partition %d: output %d after %d", p, e.Seq, lastSeq))
			}
			lastSeq = e.Seq
			var r Result
			if err := json.Unmarshal(e.Data, &r); err != nil {
				v.Problems = append(v.Problems, fmt.Sprintf("partition %d entry %d: %v", p, e.StreamSeq, err))
				continue
			}
			if seen[r.Window] {
				v.DuplicateWindows++
			}
			seen[r.Window] = true
			v.Windows++
			for k, c := range r.Counts {
				got.add(p, r.Window, k, c)
			}
		}
	}
	v.Epochs = len(epochs)
	for p, ws := range want {
		for w, keys := range ws {
			for k, n := range keys {
				g := got[p][w][k]
				switch {
				case g < n:
					v.LostClicks += int(n - g)
				case g > n:
					v.DuplicateClicks += int(g - n)
				}
			}
		}
	}
	var extra []string
	for p, ws := range got {
		for w, keys := range ws {
			for k, g := range keys {
				if want[p][w][k] == 0 {
					v.DuplicateClicks += int(g)
					extra = append(extra, fmt.Sprintf("%d/%d/%s", p, w, k))
				}
			}
		}
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		v.Problems = append(v.Problems, fmt.Sprintf("counts for keys the input lacks: %v", extra[:min(len(extra), 10)]))
	}
	return v, nil
}
