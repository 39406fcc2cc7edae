package worker

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/tlsutil"
)

// AttachedHeader is the response-header key the agent sets once it has
// registered a worker.
const AttachedHeader = "strata-worker-attached"

// Handler runs shards. An error from OnAdd refuses the shard (the agent hears
// why); an error from OnDrop is reported to the agent, and the SDK forgets the
// shard anyway.
type Handler interface {
	OnAdd(ctx context.Context, shard interfaces.Shard, epoch interfaces.Epoch) error
	OnDrop(ctx context.Context, shard interfaces.ShardID, epoch interfaces.Epoch) error
}

// Funcs adapts two functions to a Handler.
type Funcs struct {
	Add  func(ctx context.Context, shard interfaces.Shard, epoch interfaces.Epoch) error
	Drop func(ctx context.Context, shard interfaces.ShardID, epoch interfaces.Epoch) error
}

// OnAdd calls f.Add.
func (f Funcs) OnAdd(ctx context.Context, s interfaces.Shard, e interfaces.Epoch) error {
	if f.Add == nil {
		return nil
	}
	return f.Add(ctx, s, e)
}

// OnDrop calls f.Drop.
func (f Funcs) OnDrop(ctx context.Context, s interfaces.ShardID, e interfaces.Epoch) error {
	if f.Drop == nil {
		return nil
	}
	return f.Drop(ctx, s, e)
}

// Options tune a connection. The zero value works.
type Options struct {
	// WorkerID names the worker on its host; default "<hostname>-<pid>".
	WorkerID string
	// MaxShards is how many shards the worker takes; 0 means no limit.
	MaxShards int
	// MinBackoff and MaxBackoff bound the reconnect delay. Defaults 100ms, 5s.
	MinBackoff, MaxBackoff time.Duration
	// Load, when set, is called every LoadInterval (default 1s) and its result
	// is sent to the agent.
	Load         func() []interfaces.ShardLoad
	LoadInterval time.Duration
	// Logf receives connection events; nil discards them.
	Logf func(format string, args ...any)
	// TLS, when set, attaches over mutual TLS: what a host with a tls
	// section requires (docs/security.md). nil speaks plaintext, which only
	// a host with "tls: disabled" (callback service on loopback) accepts.
	TLS *TLS
}

// TLS names the worker's certificate files ('strata tls cert --role worker'),
// reloaded when they change, and the host whose callback service it attaches
// to: the service's certificate must name that host (strata://host/HOST).
type TLS struct {
	CA, Cert, Key string
	// Host is the host agent's ID; "" accepts any host of the CA.
	Host string
}

// credentials builds the transport credentials of t (insecure when nil).
func (t *TLS) credentials() (credentials.TransportCredentials, error) {
	if t == nil {
		return insecure.NewCredentials(), nil
	}
	st, err := tlsutil.Open(tlsutil.Files{CA: t.CA, Cert: t.Cert, Key: t.Key}, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	check := tlsutil.IsRole(tlsutil.RoleHost)
	if t.Host != "" {
		check = tlsutil.IsChild(tlsutil.RoleHost, t.Host)
	}
	return st.ClientCredentials(check), nil
}

// Conn is a worker's connection to its agent, kept alive until Close or the
// context given to Connect ends.
type Conn struct {
	addr  string
	creds credentials.TransportCredentials
	h     Handler
	opts  Options
	// incarnation is sent in every hello of this Conn (see Incarnation).
	incarnation string

	cancel context.CancelFunc
	done   chan struct{}

	// opMu makes the handler's calls one at a time: the stream's commands
	// and the lease's expiry.
	opMu sync.Mutex

	mu      sync.Mutex
	running map[interfaces.ShardID]interfaces.Epoch
	// leaseEnd is when the host's lease ends, by this process's clock (zero:
	// the agent has not said); leaseTimer fires expire then.
	leaseEnd   time.Time
	leaseTimer *time.Timer
	attached   bool
	attaches   int
	err        error
}

// Connect starts attaching to the agent at addr (host:port) in the background
// and returns at once. Bad options are reported here.
func Connect(ctx context.Context, addr string, h Handler, opts Options) (*Conn, error) {
	if addr == "" {
		return nil, &interfaces.FieldError{Field: "addr", Rule: "is required"}
	}
	if h == nil {
		return nil, &interfaces.FieldError{Field: "handler", Rule: "is required"}
	}
	if opts.WorkerID == "" {
		host, _ := os.Hostname()
		if host == "" {
			host = "worker"
		}
		opts.WorkerID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if err := interfaces.ValidateID("worker_id", opts.WorkerID); err != nil {
		return nil, err
	}
	if opts.MaxShards < 0 {
		return nil, &interfaces.FieldError{Field: "max_shards", Rule: "must be ≥ 0", Value: fmt.Sprint(opts.MaxShards)}
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 100 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Second
	}
	if opts.MaxBackoff < opts.MinBackoff {
		return nil, &interfaces.FieldError{Field: "max_backoff", Rule: "must be ≥ min_backoff", Value: opts.MaxBackoff.String()}
	}
	if opts.LoadInterval <= 0 {
		opts.LoadInterval = time.Second
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	creds, err := opts.TLS.credentials()
	if err != nil {
		return nil, err
	}
	var nonce [16]byte
	if _, err := crand.Read(nonce[:]); err != nil {
		return nil, fmt.Errorf("worker: draw an incarnation: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	c := &Conn{addr: addr, h: h, opts: opts, creds: creds, incarnation: hex.EncodeToString(nonce[:]), cancel: cancel, done: make(chan struct{}),
		running: map[interfaces.ShardID]interfaces.Epoch{}}
	go c.loop(ctx)
	return c, nil
}

// Close detaches (dropping every shard) and waits for the connection goroutine.
func (c *Conn) Close() error {
	c.cancel()
	<-c.done
	return nil
}

// Incarnation is the random nonce this Conn sends in every WorkerHello. The
// agent gives the shards of a broken stream back at once only to a hello with
// the same incarnation (this Conn dropped them before reconnecting); another
// process attaching under the same worker id waits until the old one must
// have stopped them.
func (c *Conn) Incarnation() string { return c.incarnation }

// Done is closed when the connection has ended for good.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Running returns the shards the worker runs and their epochs.
func (c *Conn) Running() map[interfaces.ShardID]interfaces.Epoch {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[interfaces.ShardID]interfaces.Epoch, len(c.running))
	for k, v := range c.running {
		out[k] = v
	}
	return out
}

// Attached reports whether the worker is attached now, and how many times it
// attached so far.
func (c *Conn) Attached() (bool, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.attached, c.attaches
}

// LastError returns the error that ended the latest stream.
func (c *Conn) LastError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *Conn) loop(ctx context.Context) {
	defer close(c.done)
	backoff := c.opts.MinBackoff
	for {
		attached, err := c.session(ctx)
		c.dropAll()
		c.mu.Lock()
		c.attached, c.err = false, err
		c.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		if attached {
			backoff = c.opts.MinBackoff
		}
		d := time.Duration(float64(backoff) * (0.8 + 0.4*rand.Float64()))
		c.opts.Logf("worker %s: stream to %s ended (%v); reconnecting in %s", c.opts.WorkerID, c.addr, err, d)
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
		backoff = min(2*backoff, c.opts.MaxBackoff)
	}
}

// dropAll calls OnDrop for every running shard: the stream is gone, so the
// agent may place them elsewhere. It also forgets the stream's lease.
func (c *Conn) dropAll() {
	c.opMu.Lock()
	defer c.opMu.Unlock()
	c.mu.Lock()
	if c.leaseTimer != nil {
		c.leaseTimer.Stop()
	}
	c.leaseEnd = time.Time{}
	c.mu.Unlock()
	c.dropRunning("after disconnect")
}

// dropRunning calls OnDrop for every running shard (c.opMu held).
func (c *Conn) dropRunning(why string) {
	c.mu.Lock()
	ids := make([]interfaces.ShardID, 0, len(c.running))
	for id := range c.running {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	eps := c.running
	c.running = map[interfaces.ShardID]interfaces.Epoch{}
	c.mu.Unlock()
	for _, id := range ids {
		if err := c.h.OnDrop(context.Background(), id, eps[id]); err != nil {
			c.opts.Logf("worker %s: drop %s %s: %v", c.opts.WorkerID, id, why, err)
		}
	}
}

// setLease records that the host's lease ends nanos from now (the wire's
// lease_nanos: 0 says nothing, ≤ 0 otherwise ends it now).
func (c *Conn) setLease(nanos int64) {
	if nanos == 0 {
		return
	}
	left := max(time.Duration(nanos), 0)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leaseEnd = time.Now().Add(left)
	if c.leaseTimer == nil {
		c.leaseTimer = time.AfterFunc(left, c.expire)
	} else {
		c.leaseTimer.Reset(left)
	}
}

// expire drops every shard when the host's lease has ended unrenewed: the
// agent is frozen or gone, and its parent may give the shards to another
// host. The stream stays; the agent's later commands start afresh.
func (c *Conn) expire() {
	c.opMu.Lock()
	defer c.opMu.Unlock()
	c.mu.Lock()
	end, n := c.leaseEnd, len(c.running)
	c.mu.Unlock()
	if end.IsZero() || time.Now().Before(end) {
		return // renewed meanwhile, or the stream ended
	}
	if n > 0 {
		c.opts.Logf("worker %s: the host's lease ended at %s unrenewed; dropping %d shards", c.opts.WorkerID, end.Format(time.RFC3339Nano), n)
	}
	c.dropRunning("at the lease's end")
}

// LeaseEnd returns when the host's lease ends by this process's clock, and
// whether the agent said (agents that do not send leases never do).
func (c *Conn) LeaseEnd() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leaseEnd, !c.leaseEnd.IsZero()
}

// Keepalive of the stream to the agent: a ping after this long without
// traffic, and the stream ends when the answer takes longer than
// keepaliveTimeout (a frozen or vanished agent). The agent's server admits
// pings this often (callback.ServerOptions).
const (
	keepaliveTime    = 10 * time.Second
	keepaliveTimeout = 5 * time.Second
)

// session runs one stream; it reports whether the worker got attached.
func (c *Conn) session(ctx context.Context) (bool, error) {
	cc, err := grpc.NewClient(c.addr, grpc.WithTransportCredentials(c.creds),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: keepaliveTime, Timeout: keepaliveTimeout, PermitWithoutStream: true}))
	if err != nil {
		return false, err
	}
	defer cc.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := wire.NewWorkerClient(cc).Connect(sctx)
	if err != nil {
		return false, err
	}
	var sendMu sync.Mutex
	send := func(m *wire.WorkerMessage) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(m)
	}
	if err := send(&wire.WorkerMessage{Msg: &wire.WorkerMessage_Hello{Hello: &wire.WorkerHello{WorkerId: c.opts.WorkerID, MaxShards: uint32(c.opts.MaxShards), Incarnation: c.incarnation}}}); err != nil {
		return false, err
	}
	// The agent sends the header once it has registered the worker; a refused
	// hello ends the stream without it.
	md, err := stream.Header()
	if err != nil {
		return false, err
	}
	if len(md.Get(AttachedHeader)) == 0 {
		_, err := stream.Recv()
		if err == nil {
			err = errors.New("agent did not confirm the attach")
		}
		return false, err
	}
	c.mu.Lock()
	c.attached = true
	c.attaches++
	c.mu.Unlock()
	if c.opts.Load != nil {
		go func() {
			t := time.NewTicker(c.opts.LoadInterval)
			defer t.Stop()
			for {
				select {
				case <-sctx.Done():
					return
				case <-t.C:
				}
				loads := c.opts.Load()
				m := &wire.WorkerLoad{}
				for _, l := range loads {
					m.Shards = append(m.Shards, wire.ShardLoadToWire(l))
				}
				if err := send(&wire.WorkerMessage{Msg: &wire.WorkerMessage_Load{Load: m}}); err != nil {
					return
				}
			}
		}()
	}
	for {
		cmd, err := stream.Recv()
		if err != nil {
			return true, err
		}
		if l := cmd.GetLease(); l != nil {
			c.setLease(l.LeaseNanos) // not answered
			continue
		}
		c.opMu.Lock()
		ack := c.handle(ctx, cmd)
		c.opMu.Unlock()
		if err := send(&wire.WorkerMessage{Msg: &wire.WorkerMessage_Ack{Ack: ack}}); err != nil {
			return true, err
		}
	}
}

func (c *Conn) handle(ctx context.Context, cmd *wire.WorkerCommand) *wire.WorkerAck {
	ack := &wire.WorkerAck{CommandId: cmd.Id, Ok: true}
	fail := func(err error) *wire.WorkerAck {
		ack.Ok, ack.Error = false, err.Error()
		return ack
	}
	switch x := cmd.Cmd.(type) {
	case *wire.WorkerCommand_Add:
		spec, err := wire.ShardFromWire(x.Add.Shard)
		if err != nil {
			return fail(fmt.Errorf("add: %w", err))
		}
		epoch := interfaces.Epoch(x.Add.Epoch)
		if x.Add.LeaseNanos < 0 {
			return fail(fmt.Errorf("add %s@%d: the host's lease has ended", spec.ID, epoch))
		}
		c.setLease(x.Add.LeaseNanos)
		c.mu.Lock()
		held, ok := c.running[spec.ID]
		c.mu.Unlock()
		if ok && held == epoch {
			return ack // repeated add
		}
		if ok && held > epoch {
			return fail(fmt.Errorf("add %s: %w: held epoch %d, got %d", spec.ID, interfaces.ErrStaleEpoch, held, epoch))
		}
		if ok {
			if err := c.h.OnDrop(ctx, spec.ID, held); err != nil {
				return fail(fmt.Errorf("add %s: drop of epoch %d failed: %w", spec.ID, held, err))
			}
		}
		if err := c.h.OnAdd(ctx, spec, epoch); err != nil {
			c.mu.Lock()
			delete(c.running, spec.ID)
			c.mu.Unlock()
			return fail(err)
		}
		c.mu.Lock()
		c.running[spec.ID] = epoch
		c.mu.Unlock()
	case *wire.WorkerCommand_Drop:
		id := interfaces.ShardID(x.Drop.Shard)
		c.mu.Lock()
		held, ok := c.running[id]
		if ok && interfaces.Epoch(x.Drop.Epoch) < held {
			c.mu.Unlock()
			return fail(fmt.Errorf("drop %s: %w: held epoch %d, got %d", id, interfaces.ErrStaleEpoch, held, x.Drop.Epoch))
		}
		delete(c.running, id)
		c.mu.Unlock()
		if !ok {
			return ack // not running: the desired state holds
		}
		if err := c.h.OnDrop(ctx, id, held); err != nil {
			return fail(err)
		}
	default:
		return fail(errors.New("unknown command"))
	}
	return ack
}
