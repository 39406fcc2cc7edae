package stream

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/sdk/worker"
)

// Operator is a shard's processing logic and state.
type Operator interface {
	// Process applies one record. It emits outputs through emit, each with
	// a sequence strictly above the shard's previous one, computed from the
	// records alone, so that a replay from a checkpoint emits the same
	// outputs under the same sequences (the sink keeps one copy).
	Process(r Record, emit func(seq uint64, data []byte)) error
	// Snapshot returns the state to checkpoint.
	Snapshot() ([]byte, error)
}

// Factory makes a shard's operator from its checkpointed state (nil: none).
type Factory func(shard interfaces.ShardID, state []byte) (Operator, error)

// Event is something a shard's task did, for measurements (Config.OnEvent).
type Event struct {
	Shard interfaces.ShardID
	Epoch interfaces.Epoch
	// Kind: "restored" (the checkpoint is loaded and the operator made:
	// Offset, StateBytes, Took), "first" (the first record processed under
	// this epoch: At, Offset), "stopped" (the task ended at a drop, with its
	// final checkpoint unless the state is above FinalCheckpointMax or a
	// record was cut short: At is the last record's processing time, or the
	// stop's when it processed none; Offset), "fenced" (a newer owner wrote: the task stopped without a
	// checkpoint).
	Kind       string
	At         time.Time
	Offset     uint64
	StateBytes int
	Took       time.Duration
	// Prepared: the restore used a Prepare (Took excludes its load).
	Prepared bool
	Err      error
}

// Config configures a Runner.
type Config struct {
	JS    jetstream.JetStream
	Names Names
	New   Factory
	// CheckpointEvery is how often a task checkpoints (default 500ms); it
	// also checkpoints when it stops.
	CheckpointEvery time.Duration
	// Batch is how many records a task fetches at once (default 256).
	Batch int
	// LatencyWindow is how many recent event-time latencies a shard's p99
	// is taken over (default 1024).
	LatencyWindow int
	Logf          func(format string, args ...any)
	OnEvent       func(Event)
	// FinalCheckpointMax, when > 0, skips the checkpoint at a drop for a
	// state larger than this many bytes: the next owner restores from the
	// last periodic checkpoint (or from what it prepared) and replays the
	// records since, instead of waiting for the upload. Exactly once holds
	// either way (the sink skips what a replay re-emits).
	FinalCheckpointMax int
}

// Runner runs a job's shards on JetStream; it is the worker.Handler a
// stream worker gives worker.Connect, and Load its Options.Load.
type Runner struct {
	cfg   Config
	ckpts *Checkpoints
	sink  *Sink

	mu    sync.Mutex
	tasks map[interfaces.ShardID]*task
	// warm holds the shards prepared for an add (Prepare).
	warm map[interfaces.ShardID]*warmShard
}

// warmShard is a shard restored ahead of its add.
type warmShard struct {
	op     Operator
	ck     Checkpoint
	rev    uint64
	object string
	took   time.Duration
}

var _ worker.Handler = (*Runner)(nil)

// NewRunner opens the job's input stream, checkpoint store and sink.
func NewRunner(ctx context.Context, cfg Config) (*Runner, error) {
	if cfg.JS == nil {
		return nil, &interfaces.FieldError{Field: "js", Rule: "is required"}
	}
	if cfg.New == nil {
		return nil, &interfaces.FieldError{Field: "new", Rule: "is required (the operator factory)"}
	}
	if cfg.CheckpointEvery < 0 || cfg.Batch < 0 || cfg.LatencyWindow < 0 {
		return nil, &interfaces.FieldError{Field: "checkpoint_every, batch, latency_window", Rule: "must be ≥ 0"}
	}
	if cfg.CheckpointEvery == 0 {
		cfg.CheckpointEvery = 500 * time.Millisecond
	}
	if cfg.Batch == 0 {
		cfg.Batch = 256
	}
	if cfg.LatencyWindow == 0 {
		cfg.LatencyWindow = 1024
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.OnEvent == nil {
		cfg.OnEvent = func(Event) {}
	}
	if _, err := OpenInput(ctx, cfg.JS, cfg.Names); err != nil {
		return nil, err
	}
	ck, err := OpenCheckpoints(ctx, cfg.JS, cfg.Names)
	if err != nil {
		return nil, err
	}
	sink, err := OpenSink(ctx, cfg.JS, cfg.Names)
	if err != nil {
		return nil, err
	}
	return &Runner{cfg: cfg, ckpts: ck, sink: sink, tasks: map[interfaces.ShardID]*task{}, warm: map[interfaces.ShardID]*warmShard{}}, nil
}

// Sink returns the runner's fenced sink.
func (r *Runner) Sink() *Sink { return r.sink }

// Checkpoints returns the runner's checkpoint store.
func (r *Runner) Checkpoints() *Checkpoints { return r.ckpts }

// task is one running shard.
type task struct {
	r     *Runner
	id    interfaces.ShardID
	p     int
	epoch interfaces.Epoch
	op    Operator
	cons  jetstream.Consumer
	w     *Writer
	// rev is the checkpoint entry's revision as this task last wrote or
	// read it; object its state's object ("" inline).
	rev    uint64
	object string
	saved  uint64 // the offset of the last checkpoint written
	cancel context.CancelFunc
	done   chan struct{}

	// offset is the last processed record's (the loop's goroutine; read
	// by stop after done).
	offset uint64
	fenced bool
	// dirty: the operator took a record whose outputs did not all reach
	// the sink (stopped meanwhile); its state must not be checkpointed.
	dirty  bool
	caught bool
	last   time.Time

	mu        sync.Mutex
	st        stats
	stateSize int
}

// OnAdd restores shard from its checkpoint and starts consuming its
// partition from the checkpoint's offset. It first fences the sink under
// epoch, so an older owner that runs on can write nothing more, and refuses
// a checkpoint written under a newer epoch.
func (r *Runner) OnAdd(ctx context.Context, spec interfaces.Shard, epoch interfaces.Epoch) error {
	p, err := r.cfg.Names.Partition(spec.ID)
	if err != nil {
		return err
	}
	start := time.Now()
	w := r.sink.Writer(p, epoch)
	if _, err := w.fence(ctx); err != nil {
		return fmt.Errorf("add %s@%d: %w", spec.ID, epoch, err)
	}
	r.mu.Lock()
	warm := r.warm[spec.ID]
	delete(r.warm, spec.ID)
	r.mu.Unlock()
	var (
		ck     Checkpoint
		rev    uint64
		object string
		op     Operator
	)
	if warm != nil {
		// Prepared: restore from that checkpoint and replay what came
		// after it; a newer one the old owner wrote since is not needed.
		ck, rev, object, op = warm.ck, warm.rev, warm.object, warm.op
	} else {
		if ck, rev, err = r.ckpts.load(ctx, p); err != nil {
			return fmt.Errorf("add %s@%d: %w", spec.ID, epoch, err)
		}
		if len(ck.State) > InlineMax {
			object = objectName(p, ck)
		}
		if op, err = r.cfg.New(spec.ID, ck.State); err != nil {
			return fmt.Errorf("add %s@%d: restore: %w", spec.ID, epoch, err)
		}
	}
	if ck.Epoch > epoch {
		return fmt.Errorf("add %s: %w: checkpoint of epoch %d, got %d", spec.ID, interfaces.ErrStaleEpoch, ck.Epoch, epoch)
	}
	st, err := r.cfg.JS.Stream(ctx, r.cfg.Names.InputStream())
	if err != nil {
		return fmt.Errorf("add %s@%d: %w", spec.ID, epoch, err)
	}
	cons, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Name:              fmt.Sprintf("%s-p%d-e%d", r.cfg.Names.Job, p, epoch),
		FilterSubject:     r.cfg.Names.Subject(p),
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       ck.Offset + 1,
		AckPolicy:         jetstream.AckExplicitPolicy,
		MaxAckPending:     4 * r.cfg.Batch,
		InactiveThreshold: 30 * time.Second,
	})
	if err != nil {
		return fmt.Errorf("add %s@%d: consumer: %w", spec.ID, epoch, err)
	}
	tctx, cancel := context.WithCancel(context.Background())
	t := &task{r: r, id: spec.ID, p: p, epoch: epoch, op: op, cons: cons, w: w, rev: rev, object: object, cancel: cancel, done: make(chan struct{}), offset: ck.Offset, saved: ck.Offset, stateSize: len(ck.State)}
	t.st.init(r.cfg.LatencyWindow, time.Now())
	r.cfg.OnEvent(Event{Shard: spec.ID, Epoch: epoch, Kind: "restored", At: time.Now(), Offset: ck.Offset, StateBytes: len(ck.State), Took: time.Since(start), Prepared: warm != nil})
	r.mu.Lock()
	if old := r.tasks[spec.ID]; old != nil {
		r.mu.Unlock()
		old.stop(ctx)
		r.mu.Lock()
	}
	r.tasks[spec.ID] = t
	r.mu.Unlock()
	go t.run(tctx)
	return nil
}

// Prepare restores shard from its latest checkpoint ahead of an add, while
// its current owner keeps running: the warm-up phase of a move. The OnAdd
// that follows (any epoch) starts from the prepared state and replays the
// records after it, so the state's transfer is off the move's critical
// path. A shard already running here is not prepared again.
func (r *Runner) Prepare(ctx context.Context, shard interfaces.ShardID) error {
	p, err := r.cfg.Names.Partition(shard)
	if err != nil {
		return err
	}
	r.mu.Lock()
	_, running := r.tasks[shard]
	r.mu.Unlock()
	if running {
		return nil
	}
	start := time.Now()
	ck, rev, err := r.ckpts.load(ctx, p)
	if err != nil {
		return fmt.Errorf("prepare %s: %w", shard, err)
	}
	op, err := r.cfg.New(shard, ck.State)
	if err != nil {
		return fmt.Errorf("prepare %s: restore: %w", shard, err)
	}
	w := &warmShard{op: op, ck: ck, rev: rev, took: time.Since(start)}
	if len(ck.State) > InlineMax {
		w.object = objectName(p, ck)
	}
	r.mu.Lock()
	r.warm[shard] = w
	r.mu.Unlock()
	return nil
}

// OnDrop stops the shard's task at the record it is on and writes its final
// checkpoint: the next owner resumes exactly after it.
func (r *Runner) OnDrop(ctx context.Context, id interfaces.ShardID, epoch interfaces.Epoch) error {
	r.mu.Lock()
	t := r.tasks[id]
	delete(r.tasks, id)
	r.mu.Unlock()
	if t == nil {
		return nil
	}
	return t.stop(ctx)
}

// Close stops every task (with its final checkpoint).
func (r *Runner) Close() error {
	r.mu.Lock()
	ts := r.tasks
	r.tasks = map[interfaces.ShardID]*task{}
	r.mu.Unlock()
	var errs []error
	for _, t := range ts {
		errs = append(errs, t.stop(context.Background()))
	}
	return errors.Join(errs...)
}

func (t *task) stop(ctx context.Context) error {
	t.cancel()
	<-t.done
	defer func() {
		_ = t.r.cfg.JS.DeleteConsumer(context.Background(), t.r.cfg.Names.InputStream(), t.cons.CachedInfo().Name)
	}()
	if t.fenced {
		return nil
	}
	at := t.last
	if at.IsZero() {
		at = time.Now() // processed nothing
	}
	t.mu.Lock()
	big := t.r.cfg.FinalCheckpointMax > 0 && t.stateSize > t.r.cfg.FinalCheckpointMax
	t.mu.Unlock()
	if !big && !t.dirty {
		if err := t.checkpoint(ctx); err != nil {
			return fmt.Errorf("drop %s@%d: final checkpoint: %w", t.id, t.epoch, err)
		}
	}
	t.r.cfg.OnEvent(Event{Shard: t.id, Epoch: t.epoch, Kind: "stopped", At: at, Offset: t.offset})
	return nil
}

// checkpoint writes the task's checkpoint now (nothing when no record was
// processed since the last one).
func (t *task) checkpoint(ctx context.Context) error {
	job, ok, err := t.snapshot()
	if !ok || err != nil {
		return err
	}
	return t.applySave(job.save(ctx))
}

// ckptJob is a checkpoint being written: the state taken at offset, the
// entry's revision and object it replaces.
type ckptJob struct {
	t      *task
	ck     Checkpoint
	rev    uint64
	object string
	// result
	newRev uint64
	err    error
}

// snapshot takes the operator's state at the current offset (the task's
// goroutine); ok is false when nothing was processed since the last
// checkpoint.
func (t *task) snapshot() (*ckptJob, bool, error) {
	if t.rev != 0 && t.offset == t.saved {
		return nil, false, nil
	}
	state, err := t.op.Snapshot()
	if err != nil {
		return nil, false, err
	}
	t.mu.Lock()
	t.stateSize = len(state)
	t.mu.Unlock()
	return &ckptJob{t: t, ck: Checkpoint{Epoch: t.epoch, Offset: t.offset, State: state}, rev: t.rev, object: t.object}, true, nil
}

// save writes the job's checkpoint (any goroutine).
func (j *ckptJob) save(ctx context.Context) *ckptJob {
	j.newRev, j.err = j.t.r.ckpts.save(ctx, j.t.p, j.ck, j.rev, j.object)
	return j
}

// applySave records a written checkpoint (the task's goroutine).
func (t *task) applySave(j *ckptJob) error {
	if j.err != nil {
		return j.err
	}
	t.rev, t.object, t.saved = j.newRev, "", j.ck.Offset
	if len(j.ck.State) > InlineMax {
		t.object = objectName(t.p, j.ck)
	}
	return nil
}

type output struct {
	seq  uint64
	data []byte
}

// run consumes the partition until ctx ends or the sink fences the task.
// Outputs reach the sink before the record is acknowledged and before any
// checkpoint covers it: a checkpoint at offset X never runs ahead of the
// sink, so a replay from it re-emits only outputs the sink already holds or
// has not seen.
//
// Periodic checkpoints are written in the background: the state is taken
// between records, and the task processes on while it uploads (one at a
// time), so a large state does not pause its own shard.
func (t *task) run(ctx context.Context) {
	defer close(t.done)
	cfg := t.r.cfg
	lastCkpt := time.Now()
	var inflight chan *ckptJob
	defer func() {
		if inflight == nil {
			return
		}
		t.mu.Lock()
		big := cfg.FinalCheckpointMax > 0 && t.stateSize > cfg.FinalCheckpointMax
		t.mu.Unlock()
		if big {
			// Not waited for: the next owner does not need it. It lands
			// (consistent: it never runs ahead of the sink) or meets the
			// next owner's newer epoch and is refused.
			t.dirty = true
			return
		}
		t.finish(<-inflight)
	}()
	var outs []output
	emit := func(seq uint64, data []byte) { outs = append(outs, output{seq, data}) }
	first := true
	// A continuous pull (the client keeps up to Batch records requested,
	// with heartbeats) rather than one Fetch after another: an expired
	// fetch whose end the server does not report holds the client for its
	// wait + 1s.
	it, err := t.cons.Messages(jetstream.PullMaxMessages(cfg.Batch))
	if err != nil {
		cfg.Logf("stream: %s@%d: consume: %v", t.id, t.epoch, err)
		t.dirty = true
		return
	}
	defer it.Stop()
	for ctx.Err() == nil {
		m, err := it.Next(jetstream.NextMaxWait(100 * time.Millisecond))
		switch {
		case err == nil:
			if !t.process(ctx, m, &outs, emit) {
				return
			}
			if first {
				first = false
				cfg.OnEvent(Event{Shard: t.id, Epoch: t.epoch, Kind: "first", At: t.last, Offset: t.offset})
			}
		case errors.Is(err, nats.ErrTimeout):
		case errors.Is(err, jetstream.ErrMsgIteratorClosed):
			return
		default:
			if ctx.Err() == nil {
				cfg.Logf("stream: %s@%d: next: %v", t.id, t.epoch, err)
				time.Sleep(50 * time.Millisecond)
			}
		}
		if inflight != nil {
			select {
			case j := <-inflight:
				inflight = nil
				if !t.finish(j) {
					return
				}
			default:
			}
		}
		if inflight == nil && time.Since(lastCkpt) >= cfg.CheckpointEvery && ctx.Err() == nil {
			lastCkpt = time.Now()
			j, ok, err := t.snapshot()
			if err != nil {
				cfg.Logf("stream: %s@%d: snapshot: %v", t.id, t.epoch, err)
			} else if ok {
				inflight = make(chan *ckptJob, 1)
				go func(ch chan<- *ckptJob) { ch <- j.save(context.Background()) }(inflight)
			}
		}
	}
}

// finish records a background checkpoint's result; false: fenced, stop.
func (t *task) finish(j *ckptJob) bool {
	err := t.applySave(j)
	if errors.Is(err, ErrFenced) {
		t.fence(err)
		return false
	}
	if err != nil {
		t.r.cfg.Logf("stream: %s@%d: checkpoint: %v", t.id, t.epoch, err)
	}
	return true
}

// process handles one message; false stops the task (fenced).
func (t *task) process(ctx context.Context, m jetstream.Msg, outs *[]output, emit func(uint64, []byte)) bool {
	md, err := m.Metadata()
	if err != nil {
		t.r.cfg.Logf("stream: %s@%d: metadata: %v", t.id, t.epoch, err)
		return true
	}
	rec, err := recordOf(md.Sequence.Stream, m.Headers(), m.Data())
	t0 := time.Now()
	*outs = (*outs)[:0]
	if err == nil {
		err = t.op.Process(rec, emit)
	}
	if err != nil {
		// A record the operator cannot take is skipped and counted; it must
		// not stop the partition.
		t.r.cfg.Logf("stream: %s@%d: record %d: %v", t.id, t.epoch, md.Sequence.Stream, err)
	}
	for _, o := range *outs {
		werr := t.w.Write(ctx, o.seq, o.data)
		if errors.Is(werr, ErrFenced) {
			t.fence(werr)
			return false
		}
		for werr != nil && !errors.Is(werr, ErrDuplicate) {
			if ctx.Err() != nil {
				t.dirty = true // stopped mid-record: the next owner replays it
				return false
			}
			t.r.cfg.Logf("stream: %s@%d: sink: %v (retrying)", t.id, t.epoch, werr)
			time.Sleep(50 * time.Millisecond)
			werr = t.w.Write(ctx, o.seq, o.data)
			if errors.Is(werr, ErrFenced) {
				t.fence(werr)
				return false
			}
		}
	}
	now := time.Now()
	t.offset, t.last = rec.Offset, now
	_ = m.Ack()
	t.mu.Lock()
	t.st.record(now.Sub(t0), now.Sub(rec.EventTime), md.NumPending, !rec.EventTime.IsZero())
	t.mu.Unlock()
	if md.NumPending < uint64(t.r.cfg.Batch) && !t.caught {
		t.caught = true
		t.r.cfg.OnEvent(Event{Shard: t.id, Epoch: t.epoch, Kind: "caughtup", At: now, Offset: t.offset})
	}
	return true
}

func (t *task) fence(err error) {
	t.fenced = true
	t.r.cfg.Logf("stream: %s@%d: %v; stopping", t.id, t.epoch, err)
	t.r.cfg.OnEvent(Event{Shard: t.id, Epoch: t.epoch, Kind: "fenced", At: time.Now(), Offset: t.offset, Err: err})
}

// Load returns every running shard's measured load since the previous call
// (the worker.Options.Load of a stream worker): cpu is busy time over wall
// time, Rate the true processing rate (records per busy second, DS2's),
// InputRate the arrival rate (processed + growth of the backlog, per wall
// second), LatencyP99 the p99 event-time latency of the recent records, and
// mem the size of the last checkpointed state, Lag the broker's pending
// count.
func (r *Runner) Load() []interfaces.ShardLoad {
	r.mu.Lock()
	ts := make([]*task, 0, len(r.tasks))
	for _, t := range r.tasks {
		ts = append(ts, t)
	}
	r.mu.Unlock()
	now := time.Now()
	out := make([]interfaces.ShardLoad, 0, len(ts))
	for _, t := range ts {
		t.mu.Lock()
		s := t.st.take(now)
		mem := t.stateSize
		t.mu.Unlock()
		out = append(out, interfaces.ShardLoad{Shard: t.id, Load: interfaces.Load{CPU: s.CPU, Mem: float64(mem), Tasks: 1},
			Rate: s.TrueRate, InputRate: s.InputRate, LatencyP99: s.LatencyP99, Lag: float64(s.Lag)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Shard < out[j].Shard })
	return out
}

// Stats returns every running shard's counters (not reset).
func (r *Runner) Stats() map[interfaces.ShardID]Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[interfaces.ShardID]Stats, len(r.tasks))
	for id, t := range r.tasks {
		t.mu.Lock()
		out[id] = t.st.peek()
		t.mu.Unlock()
	}
	return out
}
