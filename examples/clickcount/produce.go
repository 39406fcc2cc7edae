package clickcount

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/sdk/stream"
)

// Producer publishes a clickstream at a fixed rate: keys "k<n>" drawn from
// a Zipf distribution over Keys keys (exponent Skew > 1: a few keys get most
// clicks), each on the partition its key hashes to, event time the publish
// time.
type Producer struct {
	JS         jetstream.JetStream
	Names      stream.Names
	Partitions int
	Rate       float64 // records per second
	Keys       int
	Skew       float64
	Seed       uint64
}

func (p Producer) check() error {
	switch {
	case p.JS == nil:
		return &interfaces.FieldError{Field: "js", Rule: "is required"}
	case p.Partitions < 1:
		return &interfaces.FieldError{Field: "partitions", Rule: "must be ≥ 1", Value: fmt.Sprint(p.Partitions)}
	case !(p.Rate > 0):
		return &interfaces.FieldError{Field: "rate", Rule: "must be > 0", Value: fmt.Sprint(p.Rate)}
	case p.Keys < 1:
		return &interfaces.FieldError{Field: "keys", Rule: "must be ≥ 1", Value: fmt.Sprint(p.Keys)}
	case !(p.Skew > 1):
		return &interfaces.FieldError{Field: "skew", Rule: "must be > 1 (the Zipf exponent)", Value: fmt.Sprint(p.Skew)}
	}
	return stream.CheckJob("job", p.Names.Job)
}

// Run publishes until ctx ends or n records are out (n = 0: no limit), then
// closes every partition's windows with an End record one hour of event
// time later. It returns how many clicks it published. Publishing is paced
// on the wall clock in ticks of 10ms; acks are awaited in batches.
func (p Producer) Run(ctx context.Context, n int) (int, error) {
	if err := p.check(); err != nil {
		return 0, err
	}
	if _, err := stream.OpenInput(ctx, p.JS, p.Names); err != nil {
		return 0, err
	}
	rng := rand.New(rand.NewPCG(p.Seed, 0x636c69636b))
	zipf := rand.NewZipf(rng, p.Skew, 1, uint64(p.Keys-1))
	start := time.Now()
	sent := 0
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var last time.Time
	for n == 0 || sent < n {
		select {
		case <-ctx.Done():
			n = sent
			continue
		case <-tick.C:
		}
		due := int(p.Rate * time.Since(start).Seconds())
		if n > 0 {
			due = min(due, n)
		}
		var futs []jetstream.PubAckFuture
		for ; sent < due; sent++ {
			key := fmt.Sprintf("k%d", zipf.Uint64())
			now := time.Now()
			if !now.After(last) {
				now = last.Add(time.Nanosecond) // event times grow per producer
			}
			last = now
			f, err := p.JS.PublishMsgAsync(p.Names.InputMsg(stream.PartitionFor(key, p.Partitions), now, []byte(key)))
			if err != nil {
				return sent, err
			}
			futs = append(futs, f)
		}
		if err := waitAcks(context.Background(), futs); err != nil {
			return sent, err
		}
	}
	end := last.Add(time.Hour)
	for q := 0; q < p.Partitions; q++ {
		if _, err := p.JS.PublishMsg(context.Background(), p.Names.InputMsg(q, end, []byte(End))); err != nil {
			return sent, err
		}
	}
	return sent, nil
}

func waitAcks(ctx context.Context, futs []jetstream.PubAckFuture) error {
	for _, f := range futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Second):
			return fmt.Errorf("publish: no ack in 10s")
		}
	}
	return nil
}
