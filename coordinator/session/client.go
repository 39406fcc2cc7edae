package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/strata-sched/strata/interfaces/wire"
)

// Handler receives what the parent sends. Methods are called one at a time, in
// stream order. OnAssign and OnRevoke return the Ack to send back (nil sends none).
type Handler interface {
	// OnLease is called for every LeaseGrant whose report_seq names a message
	// of this session the client sent: from is when the client sent it (the
	// Hello for report_seq 0, else the Report numbered report_seq), on
	// Config.Now's clock. The lease runs from there, never from the grant's
	// receipt, so a grant delivered late (a paused process, a retransmission)
	// cannot outlive what the parent counts. A grant echoing a sequence the
	// client never sent, or one it no longer remembers, is not passed on: it
	// renews nothing.
	OnLease(g *wire.LeaseGrant, from time.Time)
	OnAssign(a *wire.Assign) *wire.Ack
	OnRevoke(r *wire.Revoke) *wire.Ack
	OnConstraints(c *wire.Constraints)
	// OnDisconnect is called when a live session ends (the lease keeps running
	// down on its own; the handler decides what to do when it expires).
	OnDisconnect(err error)
}

// Config configures a Client.
type Config struct {
	// Parents are the gRPC addresses of the parent's replicas. Required.
	Parents []string
	// Hello builds the Hello sent at the start of every session; it is called
	// anew each time so it carries the shards held at that moment. Required.
	Hello func() *wire.Hello
	// Report builds a Report; nil sends none.
	Report func() *wire.Report
	// ReportInterval is how often a Report is sent (default 1s); a LeaseGrant may
	// change it.
	ReportInterval time.Duration
	// BackoffMin and BackoffMax bound the reconnect backoff (defaults 100ms, 5s).
	BackoffMin, BackoffMax time.Duration
	// Seed seeds the backoff jitter.
	Seed uint64
	// Credentials secure the connection to the parent (tlsutil: mutual TLS
	// that checks the parent's identity); nil runs plaintext.
	Credentials credentials.TransportCredentials
	// RestateEvery, when > 0, makes the sender follow every RestateEvery-th
	// report with a Hello on the live session, built anew by Hello: the child
	// restates everything it holds with its epochs, and the parent reconciles
	// it as it did the first (anti-entropy between sessions; a report lists
	// only some shards). 0 never restates.
	RestateEvery int
	// DialOptions are extra gRPC dial options. They come after the client's
	// own (credentials, keepalive), so they may replace them.
	DialOptions []grpc.DialOption
	// ConnectTimeout bounds a session's start up to the stream opened:
	// dialling, the HTTP/2 handshake (the server's preface) and the stream
	// (default 1s). A replica that does not get that far in time (a paused
	// process, whose kernel still completes the TCP handshake; a black-holed
	// address) is left for the next one.
	ConnectTimeout time.Duration
	// AnswerTimeout bounds sending the Hello and the wait for the parent's
	// answer (default 10s): a tier's Hello names every shard it holds, and the
	// parent may first commit the child's record.
	AnswerTimeout time.Duration
	// SilenceTimeout is how long a live stream may stay silent (no message
	// from the parent while the client waits for one) before the client gives
	// it up and connects to another replica. 0 derives it from each grant:
	// 1.5 report intervals (a grant answers every report, so a healthy parent
	// is never silent that long) but at least minSilence, so that a busy
	// parent's late grant does not cost a reconnect; at most half the lease.
	SilenceTimeout time.Duration
	// Keepalive sets the gRPC keepalive pings (default: every 10s, 5s to
	// answer, with or without a stream); the parent's server must permit them
	// (tierd does).
	Keepalive keepalive.ClientParameters
	// Now is the clock the send times of Hellos and Reports are read from,
	// and so the clock of the times OnLease gets (default time.Now, which
	// carries the monotonic reading). Injected by tests and by a child whose
	// lease logic runs on its own clock (hostd).
	Now func() time.Time
	// Logf logs connection events; nil discards.
	Logf func(format string, args ...any)
}

// Client is the child side of one session.
type Client struct {
	cfg     Config
	handler Handler
	hints   chan *wire.Hint
	acks    chan *wire.Ack

	mu        sync.Mutex
	connected string // the parent address of the live session, "" when none
	interval  time.Duration
	// seq numbers the reports (Report.epoch), across sessions; sent maps the
	// last few of them to their send times (a ring), and helloAt is the
	// current session's Hello's, all under mu.
	seq     uint64
	sent    [sentRing]sentReport
	helloAt time.Time
	// silence is the live stream's silence limit (SilenceTimeout or derived
	// from the last grant), in nanoseconds.
	silence atomic.Int64
	// lease is the last grant's TTL, in nanoseconds (Run's fast-retry window).
	lease atomic.Int64
}

// sentRing is how many reports' send times the client remembers: a grant
// answers a report within a round trip, so a grant that echoes a report
// older than the last sentRing ones renews nothing.
const sentRing = 64

type sentReport struct {
	seq uint64
	at  time.Time
}

// testHookSilent, when set, is called when the watchdog gives up a silent
// stream (tests).
var testHookSilent atomic.Pointer[func(addr string)]

// NewClient checks cfg and returns a client; call Run to start it.
func NewClient(cfg Config, h Handler) (*Client, error) {
	if len(cfg.Parents) == 0 {
		return nil, errors.New("session: at least one parent address is required")
	}
	if cfg.Hello == nil || h == nil {
		return nil, errors.New("session: Hello and a handler are required")
	}
	if cfg.ReportInterval <= 0 {
		cfg.ReportInterval = time.Second
	}
	if cfg.BackoffMin <= 0 {
		cfg.BackoffMin = 100 * time.Millisecond
	}
	if cfg.BackoffMax < cfg.BackoffMin {
		cfg.BackoffMax = 5 * time.Second
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = time.Second
	}
	if cfg.AnswerTimeout <= 0 {
		cfg.AnswerTimeout = 10 * time.Second
	}
	if cfg.Keepalive.Time <= 0 {
		cfg.Keepalive = keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Client{cfg: cfg, handler: h, hints: make(chan *wire.Hint, 64), acks: make(chan *wire.Ack, 1024), interval: cfg.ReportInterval}, nil
}

// Connected returns the address of the parent replica of the live session, or ""
// when there is none.
func (c *Client) Connected() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.connected
}

// SendHint queues a hint for the parent; it is dropped (and false returned) when
// the queue is full.
func (c *Client) SendHint(h *wire.Hint) bool {
	select {
	case c.hints <- h:
		return true
	default:
		return false
	}
}

// minSilence is the shortest silence limit derived from grants: with short
// report intervals (a host's 500 ms), 1.5 intervals is a few hundred
// milliseconds of slack, which a loaded parent overruns; giving it up costs a
// reconnect and avoiding it for a while. A parent cut off from its children
// hands its leadership over only after several silent intervals
// (tierd, control.step_down_after), so the children lose nothing by waiting.
const minSilence = time.Second

// maxRedirects is how many redirects in a row Run follows at once before it
// waits its backoff.
const maxRedirects = 3

// fastRetryWindow is how long after a live session ended Run retries at the
// shortest backoff instead of a growing one, at least: an election takes well
// under a second, and the children must find the new leader quickly. The
// window is the last grant's lease when that is longer: while the child may
// still hold its lease, a parent that comes back (a partition healed) must be
// found at once, not after a backoff that outlasts the lease. A parent tier
// that stays unreachable longer gets the exponential backoff.
const fastRetryWindow = 5 * time.Second

var (
	errSilent         = errors.New("the stream went silent")
	errConnectTimeout = errors.New("no session in time")
)

// outcome is how one session attempt ended.
type outcome struct {
	leader string // where the replica redirected to ("" when it did not)
	live   bool   // a session was established (a LeaseGrant received)
	err    error
}

// unresponsive reports whether the replica stopped answering: it went silent
// or missed a deadline. Such a replica is avoided for a while; one that
// answered (a redirect, a refusal, a session it closed itself) is not, nor one
// whose connection broke at once (a dead process refuses the next dial as
// quickly).
func (o outcome) unresponsive() bool {
	return errors.Is(o.err, errSilent) || errors.Is(o.err, errConnectTimeout)
}

// Run keeps a session open until ctx ends, reconnecting with backoff. It returns
// ctx's error.
//
// A replica that stopped answering (a live session with it went silent, or it
// missed the connect or answer deadline) is avoided for a while:
// the next attempts go to the other replicas of Config.Parents, and a redirect
// to it (a follower that has not yet noticed its leader is gone) is not
// followed, so that a paused or cut-off leader does not cost a connect timeout
// per attempt.
func (c *Client) Run(ctx context.Context) error {
	rng := rand.New(rand.NewPCG(c.cfg.Seed, 0x5e55))
	backoff := c.cfg.BackoffMin
	next := 0
	redirect := ""
	redirects := 0 // redirects followed in a row, without a session
	// avoid holds the replicas recently given up, each until when.
	avoid := map[string]time.Time{}
	avoided := func(a string) bool { return time.Now().Before(avoid[a]) }
	var liveEnded time.Time
	for ctx.Err() == nil {
		addr := redirect
		if addr == "" {
			addr = c.pick(&next, avoided)
		}
		redirect = ""
		o := c.session(ctx, addr)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if o.live {
			liveEnded = time.Now()
		}
		if len(c.cfg.Parents) > 1 && o.unresponsive() {
			avoid[addr] = time.Now().Add(2 * c.cfg.ConnectTimeout)
		}
		leader := o.leader
		if leader != "" && avoided(leader) {
			// A follower still names a replica we just gave up.
			o.err = fmt.Errorf("redirects to %s, which was just given up", leader)
			leader = ""
		}
		switch {
		case leader != "":
			c.cfg.Logf("session: %s redirects to leader %s", addr, leader)
			redirect = leader
			if o.live {
				// A session that worked ended with a Redirect: follow it at once.
				redirects, backoff = 0, c.cfg.BackoffMin
				continue
			}
			// Follow a redirect at once, but not forever: replicas that
			// point at each other (an election in progress) get the backoff.
			if redirects++; redirects < maxRedirects {
				continue
			}
			redirects = 0
		case o.live:
			redirects = 0
			backoff = c.cfg.BackoffMin // the session worked; start over quickly
		}
		if o.err != nil {
			c.cfg.Logf("session: %s: %v", addr, o.err)
		}
		if !liveEnded.IsZero() && time.Since(liveEnded) < max(fastRetryWindow, time.Duration(c.lease.Load())) {
			backoff = c.cfg.BackoffMin // a leader change: find the new one quickly
		}
		// Full jitter: sleep uniformly in [backoff/2, backoff).
		d := backoff/2 + time.Duration(rng.Int64N(int64(backoff/2)+1))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
		if backoff *= 2; backoff > c.cfg.BackoffMax {
			backoff = c.cfg.BackoffMax
		}
	}
	return ctx.Err()
}

// pick returns the next parent replica in turn, skipping avoided ones
// (unless all are).
func (c *Client) pick(next *int, avoided func(string) bool) string {
	n := len(c.cfg.Parents)
	for range n {
		a := c.cfg.Parents[*next%n]
		*next++
		if !avoided(a) {
			return a
		}
	}
	a := c.cfg.Parents[*next%n]
	*next++
	return a
}

// session runs one stream to addr until it breaks, the parent redirects, or
// the parent goes silent (the watchdog).
func (c *Client) session(ctx context.Context, addr string) (o outcome) {
	hello := c.cfg.Hello() // may take a while for a tier holding many shards: not on the clock
	creds := c.cfg.Credentials
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(creds), grpc.WithKeepaliveParams(c.cfg.Keepalive)}, c.cfg.DialOptions...)
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return outcome{err: err}
	}
	defer conn.Close()
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The connect deadline: dial, stream, Hello sent; then the answer's.
	connectTimer := time.AfterFunc(c.cfg.ConnectTimeout, func() { cancel(errConnectTimeout) })
	defer connectTimer.Stop()
	cause := func(err error) error {
		if e := context.Cause(sctx); e == errConnectTimeout {
			return fmt.Errorf("%w (connect %v, answer %v)", e, c.cfg.ConnectTimeout, c.cfg.AnswerTimeout)
		} else if e == errSilent {
			return fmt.Errorf("%w (nothing from %s for %v)", e, addr, time.Duration(c.silence.Load()))
		}
		return err
	}
	// Opening the stream waits for the connection to be ready, which takes the
	// server's HTTP/2 preface: a frozen replica never gets past this.
	stream, err := wire.NewSessionClient(conn).Connect(sctx)
	if err != nil {
		return outcome{err: cause(err)}
	}
	if !connectTimer.Stop() {
		return outcome{err: cause(context.Cause(sctx))}
	}
	// The Hello (a tier's names every shard it holds: it may be large) and
	// the parent's answer get the answer timeout.
	connectTimer = time.AfterFunc(c.cfg.AnswerTimeout, func() { cancel(errConnectTimeout) })
	c.mu.Lock()
	c.helloAt = c.cfg.Now() // before the send: the lease may only start earlier
	c.mu.Unlock()
	if err := stream.Send(&wire.ChildMessage{Msg: &wire.ChildMessage_Hello{Hello: hello}}); err != nil {
		return outcome{err: cause(err)}
	}
	// The first answer is a LeaseGrant or a Redirect.
	first, err := stream.Recv()
	if !connectTimer.Stop() {
		return outcome{err: cause(context.Cause(sctx))}
	}
	if err != nil {
		return outcome{err: cause(wire.FromStatus(err))}
	}
	if r := first.GetRedirect(); r != nil {
		if r.GetLeaderAddress() == "" || r.GetLeaderAddress() == addr {
			return outcome{err: fmt.Errorf("%s is not the leader and knows none yet", addr)}
		}
		return outcome{leader: r.GetLeaderAddress()}
	}
	g := first.GetLeaseGrant()
	if g == nil {
		return outcome{err: fmt.Errorf("%s answered Hello with %T, want a LeaseGrant", addr, first.GetMsg())}
	}
	c.mu.Lock()
	c.connected = addr
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.connected = ""
		c.mu.Unlock()
	}()
	c.cfg.Logf("session: connected to %s (leader %s)", addr, g.GetLeaderId())

	out := make(chan *wire.ChildMessage, 256)
	sendErr := make(chan error, 1)
	go func() {
		err := c.sender(sctx, stream, out)
		// A sender that failed ends the session: the stream's Recv below
		// returns once sctx is cancelled, and the child reconnects (a
		// handler waiting to queue an ack would otherwise wait for good).
		cancel(nil)
		sendErr <- err
	}()

	c.onLease(g)
	// The watchdog: a stream on which nothing arrives for the silence limit
	// while the receive loop waits is given up (a paused or cut-off parent
	// never breaks the stream itself). Only time spent waiting in Recv counts,
	// so a child whose own handler is slow never blames its parent.
	var waiting atomic.Int64 // monotonic ns since base + 1 when Recv began waiting; 0 while not waiting
	base := time.Now()
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		c.watch(sctx, base, &waiting, func() {
			if h := testHookSilent.Load(); h != nil {
				(*h)(addr)
			}
			cancel(errSilent)
		})
	}()
	// Leases are handled here, at once; everything else goes, in order, to a
	// handler goroutine, so a slow handler never delays a lease renewal.
	work := make(chan *wire.ParentMessage, 8192)
	handled := make(chan struct{})
	go func() {
		defer close(handled)
		for m := range work {
			if a := m.GetAssign(); a != nil {
				if bh, ok := c.handler.(BatchHandler); ok {
					c.handleAssigns(sctx, bh, a, work, out)
					continue
				}
			}
			c.handle(sctx, m, out)
		}
	}()
	leader := ""
	for {
		waiting.Store(int64(time.Since(base)) + 1)
		m, err := stream.Recv()
		waiting.Store(0)
		if err == nil {
			if lg := m.GetLeaseGrant(); lg != nil {
				c.onLease(lg)
				continue
			}
			if r := m.GetRedirect(); r != nil {
				// Leadership moved: the old leader tells us where to go.
				err = fmt.Errorf("parent %s is no longer the leader", addr)
				leader = r.GetLeaderAddress()
			}
		}
		if err == nil {
			select {
			case work <- m:
				continue
			case <-sctx.Done():
				err = sctx.Err()
			}
		}
		close(work)
		cancel(nil)
		<-handled
		<-watchDone
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("parent %s closed the session", addr)
		}
		err = cause(wire.FromStatus(err))
		c.handler.OnDisconnect(err)
		<-sendErr
		if leader != "" {
			return outcome{leader: leader, live: true}
		}
		return outcome{live: true, err: err}
	}
}

// watch calls silent once when the receive loop has been waiting (waiting,
// see session) for longer than the silence limit, and returns; it returns
// at once when ctx ends.
func (c *Client) watch(ctx context.Context, base time.Time, waiting *atomic.Int64, silent func()) {
	t := time.NewTimer(time.Duration(c.silence.Load()) / 16)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		limit := time.Duration(c.silence.Load())
		if w := waiting.Load(); w != 0 && time.Since(base)-time.Duration(w-1) > limit {
			silent()
			return
		}
		t.Reset(max(limit/16, time.Millisecond))
	}
}

// BatchHandler is an optional extension of Handler: a handler that can take a
// run of Assigns at once (a tier commits them in one Raft entry) gets every
// Assign already queued behind the first, up to maxBatch.
type BatchHandler interface {
	OnAssigns(as []*wire.Assign) []*wire.Ack
}

const maxBatch = 1024

// handleAssigns collects first and the Assigns queued right behind it, hands
// them over at once and queues the acks. A message other than an Assign ends the
// run and is handled after it, in order.
func (c *Client) handleAssigns(ctx context.Context, bh BatchHandler, first *wire.Assign, work <-chan *wire.ParentMessage, out chan<- *wire.ChildMessage) {
	batch := []*wire.Assign{first}
	var next *wire.ParentMessage
collect:
	for len(batch) < maxBatch {
		select {
		case m, ok := <-work:
			if !ok {
				break collect
			}
			if a := m.GetAssign(); a != nil {
				batch = append(batch, a)
				continue
			}
			next = m
			break collect
		default:
			break collect
		}
	}
	for _, ack := range bh.OnAssigns(batch) {
		if ack == nil {
			continue
		}
		select {
		case out <- &wire.ChildMessage{Msg: &wire.ChildMessage_Ack{Ack: ack}}:
		case <-ctx.Done():
			return
		}
	}
	if next != nil {
		c.handle(ctx, next, out)
	}
}

// handle passes one message to the handler and queues the ack it returns.
func (c *Client) handle(ctx context.Context, m *wire.ParentMessage, out chan<- *wire.ChildMessage) {
	var ack *wire.Ack
	switch msg := m.GetMsg().(type) {
	case *wire.ParentMessage_Assign:
		ack = c.handler.OnAssign(msg.Assign)
	case *wire.ParentMessage_Revoke:
		ack = c.handler.OnRevoke(msg.Revoke)
	case *wire.ParentMessage_Constraints:
		c.handler.OnConstraints(msg.Constraints)
	}
	if ack != nil {
		select {
		case out <- &wire.ChildMessage{Msg: &wire.ChildMessage_Ack{Ack: ack}}:
		case <-ctx.Done():
		}
	}
}

func (c *Client) onLease(g *wire.LeaseGrant) {
	c.mu.Lock()
	if n := g.GetReportIntervalNanos(); n > 0 {
		c.interval = time.Duration(n)
	}
	silence := c.cfg.SilenceTimeout
	if silence <= 0 {
		silence = max(c.interval*3/2, minSilence)
		if half := time.Duration(g.GetTtlNanos()) / 2; half > 0 && half < silence {
			silence = half
		}
	}
	c.silence.Store(int64(silence))
	c.lease.Store(g.GetTtlNanos())
	from, known := c.sentAtLocked(g.GetReportSeq())
	c.mu.Unlock()
	if !known {
		c.cfg.Logf("session: a grant answers report %d, which this client did not send or no longer remembers: it renews nothing", g.GetReportSeq())
		return
	}
	c.handler.OnLease(g, from)
}

// sentAtLocked is when the message a grant echoing seq answers was sent: the
// session's Hello for 0, else the report numbered seq if it is among the last
// sentRing. Called with c.mu held.
func (c *Client) sentAtLocked(seq uint64) (time.Time, bool) {
	if seq == 0 {
		return c.helloAt, !c.helloAt.IsZero()
	}
	if e := c.sent[seq%sentRing]; e.seq == seq {
		return e.at, true
	}
	return time.Time{}, false
}

// numberReport stamps r with the next report sequence number (Report.epoch:
// the client owns it) and records its send time, read just before the send.
func (c *Client) numberReport(r *wire.Report) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	r.Epoch = c.seq
	c.sent[c.seq%sentRing] = sentReport{seq: c.seq, at: c.cfg.Now()}
	return c.seq
}

func (c *Client) reportInterval() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.interval
}

// sender owns the stream's send side: acks, hints and periodic reports.
func (c *Client) sender(ctx context.Context, stream grpc.BidiStreamingClient[wire.ChildMessage, wire.ParentMessage], out <-chan *wire.ChildMessage) error {
	send := func(m *wire.ChildMessage) error { return stream.Send(m) }
	timer := time.NewTimer(0) // first report at once
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case m := <-out:
			if err := send(m); err != nil {
				return err
			}
		case a := <-c.acks:
			if err := send(&wire.ChildMessage{Msg: &wire.ChildMessage_Ack{Ack: a}}); err != nil {
				return err
			}
		case h := <-c.hints:
			if err := send(&wire.ChildMessage{Msg: &wire.ChildMessage_Hint{Hint: h}}); err != nil {
				return err
			}
		case <-timer.C:
			if c.cfg.Report != nil {
				if r := c.cfg.Report(); r != nil {
					seq := c.numberReport(r)
					if err := send(&wire.ChildMessage{Msg: &wire.ChildMessage_Report{Report: r}}); err != nil {
						return err
					}
					if n := uint64(c.cfg.RestateEvery); n > 0 && seq%n == 0 {
						if err := send(&wire.ChildMessage{Msg: &wire.ChildMessage_Hello{Hello: c.cfg.Hello()}}); err != nil {
							return err
						}
					}
				}
			}
			timer.Reset(c.reportInterval())
		}
	}
}

// SendAck queues an ack that is sent later than the message it answers (e.g. a
// revoke that waited for a child of ours). It is dropped when no session is live
// or the queue is full; the parent re-sends what it still waits for.
func (c *Client) SendAck(a *wire.Ack) bool {
	select {
	case c.acks <- a:
		return true
	default:
		return false
	}
}
