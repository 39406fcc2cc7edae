package callback

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/strata-sched/strata/coordinator/hostagent/driver"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

// ErrNoWorker is returned by Start when no attached worker can take the shard.
// It wraps interfaces.ErrConflict.
var ErrNoWorker = fmt.Errorf("%w: no stream worker attached with free capacity", interfaces.ErrConflict)

// AttachedHeader is the response-header key set once a worker is registered
// (sdk/worker waits for it; keep the two equal).
const AttachedHeader = "strata-worker-attached"

// errDetached is returned to a command whose worker went away.
var errDetached = errors.New("worker detached")

// Config configures the driver.
type Config struct {
	// AckTimeout bounds how long Start and Stop wait for a worker's ack.
	// Default 5s.
	AckTimeout time.Duration
	// Clock paces the ack timeout.
	Clock interfaces.Clock
}

type placed struct {
	spec   interfaces.Shard
	epoch  interfaces.Epoch
	worker string // "" while pending
	// gone is the worker that held the shard when it detached, goneInc its
	// incarnation ("" if it sent none), and until when it may still be
	// running it: a worker stops its shards only once it notices the broken
	// stream, so the shard is neither placed again nor reported stopped
	// before until (AckTimeout after the detach), unless that same
	// incarnation attaches again (it drops everything first). Another
	// process attaching under the same worker id does not end the wait.
	gone    string
	goneInc string
	until   time.Time
	// adding is closed when placePending's AddShard of the shard is answered
	// (nil when none is in flight): a Stop waits for it, so that its
	// DropShard never overtakes the AddShard.
	adding chan struct{}
	// stopping is set while a Stop of the shard is under way: it is not
	// placed meanwhile.
	stopping bool
}

type worker struct {
	id string
	// incarnation is the hello's nonce of the worker's connection; ""
	// (unknown) for workers that send none.
	incarnation string
	max         int
	send        chan *wire.WorkerCommand
	done        chan struct{} // closed when the stream ends
	pending     map[uint64]chan error
}

// Driver is the callback driver and the Worker gRPC service. Register it on a
// grpc.Server with wire.RegisterWorkerServer.
type Driver struct {
	wire.UnimplementedWorkerServer
	cfg Config

	mu      sync.Mutex
	workers map[string]*worker
	shards  map[interfaces.ShardID]*placed
	loads   map[interfaces.ShardID]interfaces.ShardLoad
	nextID  uint64
	closed  bool
	attach  chan struct{} // closed and replaced on every attach (for waiters)
	done    chan struct{} // closed by Close: ends the goroutines waiting out a detach
	// leased and leaseUntil: the host's lease as the last RenewLease gave it
	// (on Config.Clock); every AddShard and LeaseRenewal carries the time
	// left of it, measured when the command is sent.
	leased     bool
	leaseUntil time.Time
}

var (
	_ driver.Driver      = (*Driver)(nil)
	_ driver.Closer      = (*Driver)(nil)
	_ driver.LeaseHolder = (*Driver)(nil)
	_ wire.WorkerServer  = (*Driver)(nil)
)

// New returns a callback driver.
func New(cfg Config) (*Driver, error) {
	if cfg.Clock == nil {
		return nil, &interfaces.FieldError{Field: "callback.clock", Rule: "is required"}
	}
	if cfg.AckTimeout < 0 || cfg.AckTimeout > MaxAckTimeout {
		return nil, &interfaces.FieldError{Field: "callback.ack_timeout", Rule: "must be in [0, " + MaxAckTimeout.String() + "] (the parent waits three of them before moving a silent host's shards)", Value: cfg.AckTimeout.String()}
	}
	if cfg.AckTimeout == 0 {
		cfg.AckTimeout = 5 * time.Second
	}
	return &Driver{cfg: cfg, workers: map[string]*worker{}, shards: map[interfaces.ShardID]*placed{},
		loads: map[interfaces.ShardID]interfaces.ShardLoad{}, attach: make(chan struct{}), done: make(chan struct{})}, nil
}

// Workers lists the attached workers and the shards each runs, sorted.
func (d *Driver) Workers() map[string][]interfaces.ShardID {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string][]interfaces.ShardID, len(d.workers))
	for id := range d.workers {
		out[id] = nil
	}
	for s, p := range d.shards {
		if p.worker != "" {
			out[p.worker] = append(out[p.worker], s)
		}
	}
	for _, v := range out {
		sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	}
	return out
}

// Pending lists the shards waiting for a worker, sorted.
func (d *Driver) Pending() []interfaces.ShardID {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []interfaces.ShardID
	for s, p := range d.shards {
		if p.worker == "" {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// WaitWorkers blocks until at least n workers are attached or ctx ends.
func (d *Driver) WaitWorkers(ctx context.Context, n int) error {
	for {
		d.mu.Lock()
		got, ch := len(d.workers), d.attach
		d.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// pick returns the attached worker with the fewest shards and room for one
// more (ties by id); nil if none. d.mu must be held.
func (d *Driver) pick() *worker {
	count := map[string]int{}
	for _, p := range d.shards {
		if p.worker != "" {
			count[p.worker]++
		}
	}
	var best *worker
	for _, w := range d.workers {
		if w.max > 0 && count[w.id] >= w.max {
			continue
		}
		if best == nil || count[w.id] < count[best.id] || (count[w.id] == count[best.id] && w.id < best.id) {
			best = w
		}
	}
	return best
}

// Start sends AddShard to a worker and waits for its ack.
func (d *Driver) Start(ctx context.Context, spec interfaces.Shard, epoch interfaces.Epoch) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return errors.New("callback: closed")
	}
	if p, ok := d.shards[spec.ID]; ok {
		d.mu.Unlock()
		if p.epoch == epoch {
			return nil
		}
		return fmt.Errorf("callback: shard %s runs under epoch %d, asked to start under %d: %w", spec.ID, p.epoch, epoch, interfaces.ErrConflict)
	}
	w := d.pick()
	if w == nil {
		d.mu.Unlock()
		return fmt.Errorf("callback: start %s: %w", spec.ID, ErrNoWorker)
	}
	d.shards[spec.ID] = &placed{spec: spec, epoch: epoch, worker: w.id}
	d.mu.Unlock()

	add := &wire.AddShard{Shard: wire.ShardToWire(spec), Epoch: uint64(epoch)}
	if dl, ok := ctx.Deadline(); ok {
		// The lease before any RenewLease (stamp replaces it after one).
		add.LeaseNanos = leaseNanos(time.Until(dl))
	}
	err := d.call(ctx, w, &wire.WorkerCommand{Cmd: &wire.WorkerCommand_Add{Add: add}})
	if err == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var rej *rejected
	if p, ok := d.shards[spec.ID]; ok && p.worker == w.id && p.epoch == epoch && errors.As(err, &rej) {
		delete(d.shards, spec.ID) // the worker said no: it does not run it
	}
	// Otherwise (timeout, worker gone) the shard stays recorded so that the
	// agent's Stop after the failed start sends DropShard or forgets it.
	return fmt.Errorf("callback: start %s@%d on worker %s: %w", spec.ID, epoch, w.id, err)
}

// Stop sends DropShard to the worker holding the shard and waits for its ack.
// A shard whose worker detached (or detaches during the stop) is stopped once
// that worker cannot be running it any more: AckTimeout after the detach, or
// when the same incarnation attaches again. A pending shard is forgotten. A
// stop that fails otherwise keeps the shard, so that a retried Stop sends the
// drop again.
func (d *Driver) Stop(id interfaces.ShardID) error {
	d.mu.Lock()
	p, ok := d.shards[id]
	if !ok {
		d.mu.Unlock()
		return fmt.Errorf("callback: shard %s: %w: not running", id, interfaces.ErrNotFound)
	}
	p.stopping = true
	adding := p.adding
	d.mu.Unlock()
	if adding != nil {
		<-adding // its AddShard first, then the drop
	}
	d.mu.Lock()
	w := d.workers[p.worker]
	d.mu.Unlock()
	if w != nil {
		err := d.call(context.Background(), w, &wire.WorkerCommand{Cmd: &wire.WorkerCommand_Drop{Drop: &wire.DropShard{Shard: string(id), Epoch: uint64(p.epoch)}}})
		if err == nil {
			d.forget(id, p)
			return nil
		}
		if !errors.Is(err, errDetached) {
			d.mu.Lock()
			p.stopping = false
			d.mu.Unlock()
			return fmt.Errorf("callback: stop %s@%d on worker %s: %w", id, p.epoch, w.id, err)
		}
	}
	d.waitGone(p)
	d.forget(id, p)
	return nil
}

// waitGone waits until the worker p was on when it detached cannot be running
// it any more (p.until), if it detached.
func (d *Driver) waitGone(p *placed) {
	d.mu.Lock()
	gone, until := p.gone, p.until
	d.mu.Unlock()
	if gone == "" {
		return
	}
	if wait := until.Sub(d.cfg.Clock.Now()); wait > 0 {
		<-d.cfg.Clock.After(wait)
	}
}

// forget drops p, the record of shard id, unless another took its place.
func (d *Driver) forget(id interfaces.ShardID, p *placed) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.shards[id] == p {
		delete(d.shards, id)
		delete(d.loads, id)
	}
}

// StopBudget is the longest Stop takes (driver.StopBudgeter): up to
// AckTimeout for a re-placement's AddShard to be answered, AckTimeout for the
// DropShard's ack, and AckTimeout more if the worker detaches meanwhile.
func (d *Driver) StopBudget() time.Duration { return 3 * d.cfg.AckTimeout }

// MaxAckTimeout bounds AckTimeout: three of them make the stop budget, which
// stays within driver.MaxStopTimeout.
const MaxAckTimeout = driver.MaxStopTimeout / 3

// Measure returns the latest reported load of every placed shard that has
// reported.
func (d *Driver) Measure() map[interfaces.ShardID]interfaces.ShardLoad {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[interfaces.ShardID]interfaces.ShardLoad, len(d.loads))
	for id, l := range d.loads {
		if p, ok := d.shards[id]; ok && p.worker != "" {
			out[id] = l
		}
	}
	return out
}

// Close refuses new starts; attached streams end when the gRPC server stops.
func (d *Driver) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.closed {
		d.closed = true
		close(d.done)
	}
	return nil
}

type rejected struct{ msg string }

func (r *rejected) Error() string { return "worker refused: " + r.msg }

// call sends cmd to w and waits for the ack.
func (d *Driver) call(ctx context.Context, w *worker, cmd *wire.WorkerCommand) error {
	ack := make(chan error, 1)
	d.mu.Lock()
	d.nextID++
	cmd.Id = d.nextID
	w.pending[cmd.Id] = ack
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(w.pending, cmd.Id)
		d.mu.Unlock()
	}()
	timeout := d.cfg.Clock.After(d.cfg.AckTimeout)
	select {
	case w.send <- cmd:
	case <-w.done:
		return errDetached
	case <-ctx.Done():
		return ctx.Err()
	case <-timeout:
		return fmt.Errorf("%w: worker %s did not take command %d within %s", context.DeadlineExceeded, w.id, cmd.Id, d.cfg.AckTimeout)
	}
	select {
	case err := <-ack:
		return err
	case <-w.done:
		return errDetached
	case <-ctx.Done():
		return ctx.Err()
	case <-timeout:
		return fmt.Errorf("%w: worker %s did not ack command %d within %s", context.DeadlineExceeded, w.id, cmd.Id, d.cfg.AckTimeout)
	}
}

// Connect serves one worker's stream (the wire.WorkerServer method).
func (d *Driver) Connect(stream wire.Worker_ConnectServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	hello := first.GetHello()
	if hello == nil {
		return status.Error(codes.InvalidArgument, "worker: the first message must be a WorkerHello")
	}
	if err := interfaces.ValidateID("hello.worker_id", hello.WorkerId); err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	if err := validIncarnation(hello.Incarnation); err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	w := &worker{id: hello.WorkerId, incarnation: hello.Incarnation, max: int(hello.MaxShards), send: make(chan *wire.WorkerCommand, 16),
		done: make(chan struct{}), pending: map[uint64]chan error{}}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return status.Error(codes.Unavailable, "worker: agent is shutting down")
	}
	if _, dup := d.workers[w.id]; dup {
		d.mu.Unlock()
		return status.Errorf(codes.AlreadyExists, "worker: a worker with id %q is already attached", w.id)
	}
	d.workers[w.id] = w
	if w.incarnation != "" {
		for _, p := range d.shards {
			if p.gone == w.id && p.goneInc == w.incarnation {
				p.gone, p.goneInc = "", "" // it dropped everything before attaching again
			}
		}
	}
	close(d.attach)
	d.attach = make(chan struct{})
	d.mu.Unlock()
	defer d.detach(w)
	if err := stream.SendHeader(metadata.Pairs(AttachedHeader, w.id)); err != nil {
		return err
	}
	go d.placePending()

	sendErr := make(chan error, 1)
	go func() {
		for {
			select {
			case cmd := <-w.send:
				d.stamp(cmd)
				if err := stream.Send(cmd); err != nil {
					sendErr <- err
					return
				}
			case <-w.done:
				return
			case <-stream.Context().Done():
				return
			}
		}
	}()
	for {
		m, err := stream.Recv()
		if err != nil {
			return err
		}
		select {
		case err := <-sendErr:
			return err
		default:
		}
		switch x := m.Msg.(type) {
		case *wire.WorkerMessage_Ack:
			d.mu.Lock()
			ch, ok := w.pending[x.Ack.CommandId]
			d.mu.Unlock()
			if ok {
				var res error
				if !x.Ack.Ok {
					res = &rejected{msg: x.Ack.Error}
				}
				select {
				case ch <- res:
				default: // a duplicate ack
				}
			}
		case *wire.WorkerMessage_Load:
			if err := d.takeLoad(w, x.Load); err != nil {
				return status.Error(codes.InvalidArgument, err.Error())
			}
		default:
			return status.Errorf(codes.InvalidArgument, "worker %s: unexpected message %T after hello", w.id, m.Msg)
		}
	}
}

// RenewLease records that the host's lease now ends left from now
// (driver.LeaseHolder) and sends every attached worker a LeaseRenewal; a
// worker whose queue of commands is full misses it (the commands queued
// carry the lease when they are sent).
func (d *Driver) RenewLease(left time.Duration) {
	d.mu.Lock()
	d.leased, d.leaseUntil = true, d.cfg.Clock.Now().Add(left)
	ws := make([]*worker, 0, len(d.workers))
	for _, w := range d.workers {
		ws = append(ws, w)
	}
	d.mu.Unlock()
	for _, w := range ws {
		select {
		case w.send <- &wire.WorkerCommand{Cmd: &wire.WorkerCommand_Lease{Lease: &wire.LeaseRenewal{}}}:
		default:
		}
	}
}

// stamp sets the lease left in an AddShard or a LeaseRenewal about to be
// sent, once RenewLease has given one: measured now, so that a command that
// waited in the queue does not carry more than is left.
func (d *Driver) stamp(cmd *wire.WorkerCommand) {
	d.mu.Lock()
	leased, left := d.leased, d.leaseUntil.Sub(d.cfg.Clock.Now())
	d.mu.Unlock()
	if !leased {
		return
	}
	switch x := cmd.Cmd.(type) {
	case *wire.WorkerCommand_Add:
		x.Add.LeaseNanos = leaseNanos(left)
	case *wire.WorkerCommand_Lease:
		x.Lease.LeaseNanos = leaseNanos(left)
	}
}

// leaseNanos is left on the wire: 0 means "no lease", so an ended lease is
// sent as -1.
func leaseNanos(left time.Duration) int64 {
	if left <= 0 {
		return -1
	}
	return int64(left)
}

// ServerOptions are the options of the gRPC server the driver is served on:
// keepalive, so that the agent notices a frozen or vanished worker, and a
// policy that admits the SDK's pings (sdk/worker pings every 10s).
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 10 * time.Second, Timeout: 5 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
	}
}

// MaxIncarnation bounds the length of WorkerHello.incarnation.
const MaxIncarnation = 64

// validIncarnation checks a hello's incarnation: empty (unknown), or an ID
// of at most MaxIncarnation characters.
func validIncarnation(inc string) error {
	if inc == "" {
		return nil
	}
	if len(inc) > MaxIncarnation {
		return &interfaces.FieldError{Field: "hello.incarnation", Rule: fmt.Sprintf("must be at most %d characters", MaxIncarnation), Value: fmt.Sprintf("%d characters", len(inc))}
	}
	return interfaces.ValidateID("hello.incarnation", inc)
}

func (d *Driver) takeLoad(w *worker, m *wire.WorkerLoad) error {
	loads := make([]interfaces.ShardLoad, 0, len(m.Shards))
	for i, s := range m.Shards {
		l, err := wire.ShardLoadFromWire(s)
		if err != nil {
			return fmt.Errorf("worker %s: load.shards[%d]: %w", w.id, i, err)
		}
		loads = append(loads, l)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, l := range loads {
		if p, ok := d.shards[l.Shard]; ok && p.worker == w.id {
			d.loads[l.Shard] = l
		}
	}
	return nil
}

// detach forgets w: its in-flight commands fail, its shards become pending and
// are re-placed on the remaining workers.
//
// The worker may run them until it notices the broken stream, so they wait
// AckTimeout (or for the same incarnation of that worker to attach again)
// before they are placed elsewhere, and a Stop of one waits as long (see
// placed.gone).
func (d *Driver) detach(w *worker) {
	d.mu.Lock()
	close(w.done)
	delete(d.workers, w.id)
	until := d.cfg.Clock.Now().Add(d.cfg.AckTimeout)
	for id, p := range d.shards {
		if p.worker == w.id {
			p.worker, p.gone, p.goneInc, p.until = "", w.id, w.incarnation, until
			delete(d.loads, id)
		}
	}
	d.mu.Unlock()
	go func() {
		select {
		case <-d.cfg.Clock.After(d.cfg.AckTimeout):
			d.placePending()
		case <-d.done:
		}
	}()
}

// placePending sends every pending shard to a worker with room, one at a time.
func (d *Driver) placePending() {
	for {
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			return
		}
		var id interfaces.ShardID
		var p *placed
		now := d.cfg.Clock.Now()
		for sid, sp := range d.shards {
			if sp.worker != "" || sp.stopping || (sp.gone != "" && now.Before(sp.until)) {
				continue // placed, being stopped, or maybe still running on a detached worker
			}
			if p == nil || sid < id {
				id, p = sid, sp
			}
		}
		if p == nil {
			d.mu.Unlock()
			return
		}
		w := d.pick()
		if w == nil {
			d.mu.Unlock()
			return
		}
		p.worker, p.gone, p.goneInc = w.id, "", ""
		added := make(chan struct{})
		p.adding = added
		spec, epoch := p.spec, p.epoch
		d.mu.Unlock()
		err := d.call(context.Background(), w, &wire.WorkerCommand{Cmd: &wire.WorkerCommand_Add{Add: &wire.AddShard{Shard: wire.ShardToWire(spec), Epoch: uint64(epoch)}}})
		d.mu.Lock()
		p.adding = nil
		d.mu.Unlock()
		close(added)
		var rej *rejected
		switch {
		case err == nil, errors.Is(err, errDetached):
			// placed, or the worker went away and detach made it pending again
		case errors.As(err, &rej):
			d.mu.Lock()
			if q, ok := d.shards[id]; ok && q == p && q.worker == w.id {
				q.worker = ""
			}
			d.mu.Unlock()
			return // retry on the next attach or detach
		default:
			// Timed out: the worker may run it, so it stays assigned there
			// (a later Stop sends DropShard to it).
			return
		}
	}
}
