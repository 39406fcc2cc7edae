package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strata-sched/strata/interfaces/wire"
)

// Handler receives what the parent sends. Methods are called one at a time, in
// stream order. OnAssign and OnRevoke return the Ack to send back (nil sends none).
type Handler interface {
	// OnLease is called for every LeaseGrant; receivedAt is when it arrived.
	OnLease(g *wire.LeaseGrant, receivedAt time.Time)
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
	// DialOptions are extra gRPC dial options.
	DialOptions []grpc.DialOption
	// Logf logs connection events; nil discards.
	Logf func(format string, args ...any)
}

// Client is the child side of one session.
type Client struct {
	cfg     Config
	handler Handler
	hints   chan *wire.Hint
	acks    chan *wire.Ack
	restate chan struct{} // Restate asked for a Hello on the live session

	mu        sync.Mutex
	connected string // the parent address of the live session, "" when none
	interval  time.Duration
}

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
	return &Client{cfg: cfg, handler: h, hints: make(chan *wire.Hint, 64), acks: make(chan *wire.Ack, 1024), restate: make(chan struct{}, 1), interval: cfg.ReportInterval}, nil
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

// Restate asks the client to send a Hello again on the live session, built
// anew by Config.Hello when it leaves: the child restates what it holds, and
// the parent reconciles it as it did the first (anti-entropy). It is dropped
// when no session is live when it is taken, or when one is already asked for.
func (c *Client) Restate() bool {
	select {
	case c.restate <- struct{}{}:
		return true
	default:
		return false
	}
}

// maxRedirects is how many redirects in a row Run follows at once before it
// waits its backoff.
const maxRedirects = 3

// Run keeps a session open until ctx ends, reconnecting with backoff. It returns
// ctx's error.
func (c *Client) Run(ctx context.Context) error {
	rng := rand.New(rand.NewPCG(c.cfg.Seed, 0x5e55))
	backoff := c.cfg.BackoffMin
	next := 0
	redirect := ""
	redirects := 0 // redirects followed in a row, without a session
	for ctx.Err() == nil {
		addr := redirect
		if addr == "" {
			addr = c.cfg.Parents[next%len(c.cfg.Parents)]
			next++
		}
		redirect = ""
		leader, live, err := c.session(ctx, addr)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case leader != "":
			c.cfg.Logf("session: %s redirects to leader %s", addr, leader)
			redirect = leader
			if live {
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
		case live:
			redirects = 0
			backoff = c.cfg.BackoffMin // the session worked; start over quickly
		}
		if err != nil {
			c.cfg.Logf("session: %s: %v", addr, err)
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

// session runs one stream to addr. It returns the leader's address when addr
// redirected, and whether a session was established (a LeaseGrant received).
func (c *Client) session(ctx context.Context, addr string) (leader string, live bool, err error) {
	creds := c.cfg.Credentials
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(creds)}, c.cfg.DialOptions...)
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return "", false, err
	}
	defer conn.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := wire.NewSessionClient(conn).Connect(sctx)
	if err != nil {
		return "", false, err
	}
	if err := stream.Send(&wire.ChildMessage{Msg: &wire.ChildMessage_Hello{Hello: c.cfg.Hello()}}); err != nil {
		return "", false, err
	}
	// The first answer is a LeaseGrant or a Redirect.
	first, err := stream.Recv()
	if err != nil {
		return "", false, wire.FromStatus(err)
	}
	if r := first.GetRedirect(); r != nil {
		if r.GetLeaderAddress() == "" || r.GetLeaderAddress() == addr {
			return "", false, fmt.Errorf("%s is not the leader and knows none yet", addr)
		}
		return r.GetLeaderAddress(), false, nil
	}
	g := first.GetLeaseGrant()
	if g == nil {
		return "", false, fmt.Errorf("%s answered Hello with %T, want a LeaseGrant", addr, first.GetMsg())
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
		cancel()
		sendErr <- err
	}()

	select {
	case <-c.restate: // asked before this session: its Hello just went
	default:
	}
	c.onLease(g)
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
	for {
		m, err := stream.Recv()
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
		cancel()
		<-handled
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("parent %s closed the session", addr)
		}
		err = wire.FromStatus(err)
		c.handler.OnDisconnect(err)
		<-sendErr
		if leader != "" {
			return leader, true, nil
		}
		return "", true, err
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
	if n := g.GetReportIntervalNanos(); n > 0 {
		c.mu.Lock()
		c.interval = time.Duration(n)
		c.mu.Unlock()
	}
	c.handler.OnLease(g, time.Now())
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
		case <-c.restate:
			if err := send(&wire.ChildMessage{Msg: &wire.ChildMessage_Hello{Hello: c.cfg.Hello()}}); err != nil {
				return err
			}
		case <-timer.C:
			if c.cfg.Report != nil {
				if r := c.cfg.Report(); r != nil {
					if err := send(&wire.ChildMessage{Msg: &wire.ChildMessage_Report{Report: r}}); err != nil {
						return err
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
