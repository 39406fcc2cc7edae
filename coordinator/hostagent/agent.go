package hostagent

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/strata-sched/strata/coordinator/hostagent/driver"
	"github.com/strata-sched/strata/coordinator/hostagent/ledger"
	"github.com/strata-sched/strata/interfaces"
)

// Config configures an Agent.
type Config struct {
	// Host is this agent's child id in its parent tier.
	Host interfaces.ChildID
	// StorePath is the bbolt file; LedgerPath the ownership ledger (JSON lines).
	StorePath  string
	LedgerPath string
	// Driver runs the shards.
	Driver driver.Driver
	// Clock stamps ledger events (read at the moment of each start and stop) and
	// paces Run. The decision inputs take their time as a parameter instead.
	Clock interfaces.Clock
	// Capacity is the host's capacity, reported to the parent.
	Capacity interfaces.Load
	// Lease sets the safety margin (see LeaseConfig).
	Lease LeaseConfig
	// TickInterval is how often Run calls Tick. It bounds how late a fence can
	// be, so keep it well below the lease margin. Default 50ms.
	TickInterval time.Duration
}

// Hello is what the agent announces when it opens a session with its parent.
type Hello struct {
	Host     interfaces.ChildID
	Capacity interfaces.Load
	// Held lists every shard the agent holds with its epoch, fenced or not. The
	// parent answers with a LeaseGrant whose Confirm re-confirms the shards it
	// still assigns here (same epoch) and revokes the others.
	Held []Held
	// StopBudget is the longest the driver takes to stop a shard
	// (driver.StopBudget): the parent waits that much longer before it places
	// a silent host's shards elsewhere.
	StopBudget time.Duration
}

// Agent is a host agent: the Core state machine plus the executor that carries
// out its effects against the bbolt store, the driver and the ledger. All methods
// are safe for concurrent use; decision inputs are serialised.
type Agent struct {
	cfg    Config
	mu     sync.Mutex // guards core, closed and the executor
	core   *Core
	store  *Store
	ledger *ledger.Writer
	closed bool

	repMu  sync.Mutex
	repSeq uint64

	// A lease grant that arrives while an input holds mu (a slow driver stop
	// or start) is parked here, with the time its lease runs from, and
	// applied by that input before it returns (or by the next one, first):
	// renewals never wait for the driver.
	leaseMu      sync.Mutex
	pendingLease *parkedLease
	// running is the running shards as of the last input, for Report, which
	// must not wait for the driver either.
	running []interfaces.ShardID
	// leaseUntil is the core's lease deadline as of the last input (zero
	// when it holds none): a parked grant renews the driver's lease
	// (driver.LeaseHolder) at once only when the core's lease still holds.
	leaseUntil time.Time

	// renewMu serialises the driver's RenewLease calls.
	renewMu sync.Mutex
}

type parkedLease struct {
	now time.Time
	ttl time.Duration
}

// Open opens the store and the ledger and loads the persisted state. Every
// loaded shard starts fenced (not running): the lease is unknown after a
// restart, so shards resume only when the parent grants a lease and re-confirms
// them. Ledger starts left without a stop by a previous run are closed with a
// recovered stop at min(now, persisted lease deadline).
func Open(cfg Config) (*Agent, error) {
	if err := interfaces.ValidateName("host", string(cfg.Host)); err != nil {
		return nil, err
	}
	if cfg.Driver == nil {
		return nil, &interfaces.FieldError{Field: "driver", Rule: "is required"}
	}
	if cfg.Clock == nil {
		return nil, &interfaces.FieldError{Field: "clock", Rule: "is required"}
	}
	if cfg.StorePath == "" {
		return nil, &interfaces.FieldError{Field: "store_path", Rule: "is required"}
	}
	if cfg.LedgerPath == "" {
		return nil, &interfaces.FieldError{Field: "ledger_path", Rule: "is required"}
	}
	if err := interfaces.ValidateCapacity("capacity", cfg.Capacity); err != nil {
		return nil, err
	}
	if cfg.TickInterval < 0 {
		return nil, &interfaces.FieldError{Field: "tick_interval", Rule: "must be ≥ 0", Value: cfg.TickInterval.String()}
	}
	if cfg.TickInterval == 0 {
		cfg.TickInterval = 50 * time.Millisecond
	}
	st, err := OpenStore(cfg.StorePath, string(cfg.Host))
	if err != nil {
		return nil, err
	}
	state, err := st.Load()
	if err != nil {
		st.Close()
		return nil, err
	}
	lw, err := ledger.Open(cfg.LedgerPath, string(cfg.Host))
	if err != nil {
		st.Close()
		return nil, err
	}
	now := cfg.Clock.Now()
	stopAt := now
	if !state.LeaseDeadline.IsZero() && state.LeaseDeadline.Before(stopAt) {
		stopAt = state.LeaseDeadline
	}
	if _, err := lw.Recover(stopAt.UnixNano()); err != nil {
		st.Close()
		lw.Close()
		return nil, err
	}
	return &Agent{
		cfg:    cfg,
		core:   NewCore(cfg.Lease, state.Records, state.Tombstones),
		store:  st,
		ledger: lw,
	}, nil
}

// Hello returns what the agent announces to its parent on (re)connect.
func (a *Agent) Hello() Hello {
	a.mu.Lock()
	defer a.mu.Unlock()
	return Hello{Host: a.cfg.Host, Capacity: a.cfg.Capacity, Held: a.core.Held(), StopBudget: driver.StopBudget(a.cfg.Driver)}
}

// Held lists the shards held, as in Hello.
func (a *Agent) Held() []Held {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.core.Held()
}

// Running lists the shards that run now.
func (a *Agent) Running() []interfaces.ShardID {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.core.Running()
}

// LeaseDeadline returns the local time at which the agent self-fences, and
// whether it holds a lease at now.
func (a *Agent) LeaseDeadline(now time.Time) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	d, _ := a.core.Deadline()
	return d, a.core.LeaseValid(now)
}

// Assign handles Assign(shard, epoch, spec) received at now. The returned error
// is the ack's error: nil (running, or already running under that epoch),
// interfaces.ErrStaleEpoch, ErrNoLease, interfaces.ErrInvalid or a driver error.
func (a *Agent) Assign(ctx context.Context, now time.Time, spec interfaces.Shard, epoch interfaces.Epoch) error {
	return a.step(ctx, func(c *Core) ([]Effect, error) { return c.Assign(now, spec, epoch) })
}

// Revoke handles Revoke(shard, epoch) received at now: once it returns nil the
// shard no longer runs here, and the ack may be sent.
func (a *Agent) Revoke(ctx context.Context, now time.Time, shard interfaces.ShardID, epoch interfaces.Epoch) error {
	return a.step(ctx, func(c *Core) ([]Effect, error) { return c.Revoke(now, shard, epoch) })
}

// LeaseGrant handles a LeaseGrant of ttl whose lease runs from local time now
// (the send of the report it answers), with the shards the parent re-confirms
// (see Core.LeaseGrant).
//
// A grant without confirmations that arrives while another input is being
// carried out is parked and applied when that input is done (with now), so that a slow driver call never holds up a renewal; the error of
// applying it then is logged by no one, as the session's renewals are not
// answered anyway.
func (a *Agent) LeaseGrant(ctx context.Context, now time.Time, ttl time.Duration, confirm []interfaces.Assignment) error {
	f := func(c *Core) ([]Effect, error) { return c.LeaseGrant(now, ttl, confirm) }
	if len(confirm) > 0 {
		return a.step(ctx, f)
	}
	if !a.mu.TryLock() {
		a.leaseMu.Lock()
		a.pendingLease = &parkedLease{now: now, ttl: ttl}
		until := a.leaseUntil
		a.leaseMu.Unlock()
		// The shards' own lease holders must not expire while the grant is
		// parked: renew them now with the deadline the core will take when
		// it applies the grant (Core.LeaseGrant), if its lease still holds.
		if margin := a.cfg.Lease.Margin(ttl); ttl > margin && now.Before(until) {
			a.renewDriver(now.Add(ttl - margin))
		}
		return nil
	}
	defer a.mu.Unlock()
	return a.stepLocked(ctx, f)
}

// Tick advances the agent to now; when the lease has expired it self-fences.
func (a *Agent) Tick(ctx context.Context, now time.Time) error {
	err := a.step(ctx, func(c *Core) ([]Effect, error) { return c.Tick(now), nil })
	return errors.Join(err, a.reapExited(ctx))
}

func (a *Agent) step(ctx context.Context, f func(*Core) ([]Effect, error)) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stepLocked(ctx, f)
}

// stepLocked is step with a.mu held.
func (a *Agent) stepLocked(ctx context.Context, f func(*Core) ([]Effect, error)) error {
	if a.closed {
		return errClosed
	}
	a.applyParkedLease(ctx)
	effs, err := f(a.core)
	xerr := a.execute(ctx, effs)
	a.applyParkedLease(ctx) // one that arrived meanwhile
	running := a.core.Running()
	until, leased := a.core.Deadline()
	if !leased {
		until = time.Time{}
	}
	a.leaseMu.Lock()
	a.running = running
	a.leaseUntil = until
	a.leaseMu.Unlock()
	if xerr != nil {
		return errors.Join(err, xerr)
	}
	return err
}

// applyParkedLease applies a grant parked by LeaseGrant (a.mu held).
func (a *Agent) applyParkedLease(ctx context.Context) {
	a.leaseMu.Lock()
	p := a.pendingLease
	a.pendingLease = nil
	a.leaseMu.Unlock()
	if p == nil {
		return
	}
	effs, _ := a.core.LeaseGrant(p.now, p.ttl, nil) // a ttl below the margin changes nothing but the expiry
	_ = a.execute(ctx, effs)
}

// execute carries out effects in order. Persistence rules: a start is only ever
// preceded by a successful persist of its record (a failed persist cancels the
// start and drops the shard); a stop is carried out before the removal or the
// fenced flag is persisted. Ledger: start is appended before the driver starts,
// stop after the driver stopped, so recorded intervals cover real ones.
func (a *Agent) execute(ctx context.Context, effs []Effect) error {
	var errs []error
	skip := map[interfaces.ShardID]bool{}
	// kept: shards whose stop failed; the core put them back as they were, so
	// nothing more of this call is carried out for them.
	kept := map[interfaces.ShardID]bool{}
	stopped := a.stopAll(effs)
	for i := 0; i < len(effs); i++ {
		e := effs[i]
		if kept[e.Shard] && e.Kind != EffLease {
			continue
		}
		switch e.Kind {
		case EffPersist:
			if err := a.store.Put(e.Record); err != nil {
				errs = append(errs, fmt.Errorf("persist %s@%d: %w", e.Shard, e.Epoch, err))
				switch {
				case !e.Record.Fenced && startFollows(effs[i+1:], e.Shard, e.Epoch):
					// The start that follows must not run without a durable
					// record: cancel it and drop the shard.
					skip[e.Shard] = true
					effs = append(effs, a.core.StartFailed(e.Shard, e.Epoch)...)
				case !e.Record.Fenced:
					a.core.PersistFailed(e.Shard, e.Epoch) // the parent's next Assign persists it
				}
				// Without a start (a changed spec of a running shard) the shard
				// runs on: the durable record, of the same epoch, still stands,
				// and the failed ack makes the parent send the spec again. A
				// fenced flag that failed to persist is harmless: every record
				// loads fenced after a restart.
			}
		case EffStart:
			if skip[e.Shard] {
				continue
			}
			if _, err := a.ledger.Append(e.Shard, e.Epoch, ledger.EventStart, a.cfg.Clock.Now().UnixNano()); err != nil {
				errs = append(errs, err)
				effs = append(effs, a.core.StartFailed(e.Shard, e.Epoch)...)
				continue
			}
			// A start must not outlast the lease: the driver gets the
			// deadline, so a slow worker cannot hold the agent past its fence.
			sctx, cancel := ctx, context.CancelFunc(func() {})
			if dl, ok := a.core.Deadline(); ok {
				// Measured on the injected clock, applied as a real timeout.
				sctx, cancel = context.WithTimeout(ctx, dl.Sub(a.cfg.Clock.Now()))
			}
			err := a.cfg.Driver.Start(sctx, e.Record.Spec, e.Epoch)
			cancel()
			if err != nil {
				errs = append(errs, fmt.Errorf("start %s@%d: %w: %w", e.Shard, e.Epoch, ErrShardFailed, err))
				// The driver may have half-started it: make sure it is stopped
				// before the ledger says so, and before the shard is dropped.
				if serr := driver.IgnoreNotFound(a.cfg.Driver.Stop(e.Shard)); serr != nil {
					// It may run: keep holding it (running, as the core has it),
					// so that the fence at the lease's end, or a revoke, stops
					// it. Dropped now, nothing here would ever stop it while the
					// parent placed it elsewhere.
					errs = append(errs, fmt.Errorf("stop after failed start %s: %w", e.Shard, serr))
					continue
				}
				if _, lerr := a.ledger.Append(e.Shard, e.Epoch, ledger.EventStop, a.stopTime(e.Shard)); lerr != nil {
					errs = append(errs, lerr)
				}
				effs = append(effs, a.core.StartFailed(e.Shard, e.Epoch)...)
			}
		case EffStop:
			err, done := stopped[i]
			if !done {
				err = a.cfg.Driver.Stop(e.Shard)
			}
			if err := driver.IgnoreNotFound(err); err != nil {
				// The shard may still run: do not record a stop, keep holding
				// it (the core undoes the change that asked for the stop), and
				// carry out nothing more of that change.
				errs = append(errs, fmt.Errorf("stop %s@%d: %w", e.Shard, e.Epoch, err))
				if a.core.StopFailed(e.Shard, e.Epoch) {
					kept[e.Shard] = true
				}
				continue
			}
			a.core.StopDone(e.Shard, e.Epoch)
			if _, err := a.ledger.Append(e.Shard, e.Epoch, ledger.EventStop, a.stopTime(e.Shard)); err != nil {
				errs = append(errs, err)
			}
		case EffDelete:
			if err := a.store.Delete(e.Shard, e.Epoch); err != nil {
				errs = append(errs, fmt.Errorf("delete %s: %w", e.Shard, err))
			}
		case EffLease:
			a.renewDriver(e.Deadline)
			if err := a.store.PutLease(e.Deadline); err != nil {
				errs = append(errs, fmt.Errorf("persist lease: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}

// renewDriver tells a driver that holds the lease next to its shards
// (driver.LeaseHolder) that the host's lease now ends at deadline (on the
// agent's clock): it gets the time left, measured just before the call.
func (a *Agent) renewDriver(deadline time.Time) {
	h, ok := a.cfg.Driver.(driver.LeaseHolder)
	if !ok {
		return
	}
	a.renewMu.Lock()
	defer a.renewMu.Unlock()
	h.RenewLease(deadline.Sub(a.cfg.Clock.Now()))
}

// LedgerRepair returns the torn final line Open cut off the ownership ledger
// (nil if none), for the daemon to log: a crash or power loss tore it, and the
// interval it began is missing from the record.
func (a *Agent) LedgerRepair() *ledger.TornLine { return a.ledger.Torn() }

// startFollows reports whether effs start shard under epoch.
func startFollows(effs []Effect, shard interfaces.ShardID, epoch interfaces.Epoch) bool {
	for _, e := range effs {
		if e.Kind == EffStart && e.Shard == shard && e.Epoch == epoch {
			return true
		}
	}
	return false
}

// stopAll runs, side by side, the driver stops among the effects that come
// before any start (a fence stops every running shard; the parent allows one
// stop budget for all of them, not one per shard), and returns each one's
// result by its index in effs. A single stop is left to execute.
func (a *Agent) stopAll(effs []Effect) map[int]error {
	var idx []int
	for i, e := range effs {
		if e.Kind == EffStart {
			break
		}
		if e.Kind == EffStop {
			idx = append(idx, i)
		}
	}
	if len(idx) < 2 {
		return nil
	}
	out := make(map[int]error, len(idx))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, i := range idx {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			err := a.cfg.Driver.Stop(effs[i].Shard)
			mu.Lock()
			out[i] = err
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	return out
}

// ErrShardFailed marks an error of a shard's process on this host (its start
// failed), as opposed to a refused message: the ack tells the parent (wire
// Ack.failed), whose doctor control policy counts it as evidence.
var ErrShardFailed = errors.New("the shard's process failed on this host")

// Run is the agent's one background goroutine: it calls Tick every
// TickInterval of the configured clock until ctx ends. Tick errors are passed to
// onErr when it is not nil.
func (a *Agent) Run(ctx context.Context, onErr func(error)) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-a.cfg.Clock.After(a.cfg.TickInterval):
		}
		if err := a.Tick(ctx, a.cfg.Clock.Now()); err != nil {
			if errors.Is(err, errClosed) {
				return err
			}
			if onErr != nil {
				onErr(err)
			}
		}
	}
}

// Report builds the report sent to the parent at now: capacity, measured used
// load, headroom (capacity - used, floored at 0), per-shard load of the running
// shards sorted by id, throughput (sum of shard rates), LatencyP99 (the worst
// shard p99) and LatencyP50 (the median of the shard p99s), and hints: headroom
// always, shed when used exceeds capacity (the shards with the largest
// dominant share first, until the excess is covered).
func (a *Agent) Report(now time.Time) interfaces.Report {
	// Not under a.mu: a report (which renews the lease at the parent) must
	// not wait for a slow driver call; it lists the shards running as of the
	// last input.
	a.leaseMu.Lock()
	running := a.running
	a.leaseMu.Unlock()
	measured := a.cfg.Driver.Measure()

	a.repMu.Lock()
	a.repSeq++
	seq := a.repSeq
	a.repMu.Unlock()

	r := interfaces.Report{Child: a.cfg.Host, Epoch: seq, Capacity: a.cfg.Capacity}
	var p99s []time.Duration
	for _, id := range running {
		sl, ok := measured[id]
		if !ok {
			sl = interfaces.ShardLoad{Shard: id}
		}
		sl.Shard = id
		r.Shards = append(r.Shards, sl)
		r.Used = r.Used.Add(sl.Load)
		r.Throughput += sl.Rate
		p99s = append(p99s, sl.LatencyP99)
	}
	r.Headroom = a.cfg.Capacity.Sub(r.Used).Max(interfaces.Load{})
	if len(p99s) > 0 {
		sort.Slice(p99s, func(i, j int) bool { return p99s[i] < p99s[j] })
		r.LatencyP99 = p99s[len(p99s)-1]
		r.LatencyP50 = p99s[(len(p99s)-1)/2]
	}
	r.Hints = append(r.Hints, interfaces.Hint{Kind: interfaces.HintHeadroom, Amount: r.Headroom, Reason: "spare capacity"})
	if !r.Used.Fits(a.cfg.Capacity) {
		excess := r.Used.Sub(a.cfg.Capacity).Max(interfaces.Load{})
		type cand struct {
			sl    interfaces.ShardLoad
			share float64
		}
		cands := make([]cand, len(r.Shards))
		for i, s := range r.Shards {
			_, share := s.Load.Div(a.cfg.Capacity).MaxDim()
			cands[i] = cand{s, share}
		}
		sort.SliceStable(cands, func(i, j int) bool { return cands[i].share > cands[j].share })
		var shed []interfaces.ShardID
		var covered interfaces.Load
		for _, c := range cands {
			if excess.Fits(covered) {
				break
			}
			shed = append(shed, c.sl.Shard)
			covered = covered.Add(c.sl.Load)
		}
		r.Hints = append(r.Hints, interfaces.Hint{Kind: interfaces.HintShed, Amount: excess, Shards: shed,
			Reason: fmt.Sprintf("used load exceeds capacity at %s", now.UTC().Format(time.RFC3339))})
	}
	return r
}

// Close stops every running shard (recording the stops in the ledger), then
// closes the driver (when it is a driver.Closer), the ledger and the store. The
// records stay in the store; after a restart they resume only when confirmed.
func (a *Agent) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	a.closed = true
	var errs []error
	for _, id := range a.core.Running() {
		r, _ := a.core.Record(id)
		if err := driver.IgnoreNotFound(a.cfg.Driver.Stop(id)); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", id, err))
			continue
		}
		if _, err := a.ledger.Append(id, r.Epoch, ledger.EventStop, a.stopTime(id)); err != nil {
			errs = append(errs, err)
		}
	}
	if c, ok := a.cfg.Driver.(driver.Closer); ok {
		if err := c.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, a.ledger.Close(), a.store.Close())
	return errors.Join(errs...)
}
