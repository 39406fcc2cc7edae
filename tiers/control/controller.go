package control

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/interfaces"
)

// Mode is what a round does.
type Mode uint8

// Modes.
const (
	ModeHold      Mode = iota // no solve, no moves
	ModePeriodic              // improve within the round's budget
	ModeEmergency             // re-place shards of lost/draining children and unplaced shards now
)

var modeNames = [...]string{"hold", "periodic", "emergency"}

func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return "unknown"
}

// Alert is something an operator should see, with a machine-readable code.
type Alert struct {
	Code    string // mass_failure, no_capacity, solve_failed, straggler
	Message string
}

func (a Alert) String() string { return a.Code + ": " + a.Message }

// Alert codes.
const (
	AlertMassFailure = "mass_failure"
	AlertNoCapacity  = "no_capacity"
	AlertSolveFailed = "solve_failed"
	AlertStraggler   = "straggler"
)

// Input is one round's observation.
type Input struct {
	// Now is the time of the round; the controller never reads a clock.
	Now time.Time
	// View is the tier as its leader sees it (children with states, shards,
	// assignments, in-flight moves, constraints, the children's latest reports).
	View *interfaces.View
	// Silent maps each child that has gone silent to the moment from which its
	// grace period counts — the daemons give the expiry of its lease, so a child
	// is never declared failed before its lease has run out (DESIGN.md §3 rule 4).
	// Children already failed in the view are ignored.
	Silent map[interfaces.ChildID]time.Time
	// AckMassFailure is an operator's acknowledgement that the silent children are
	// really gone: the mass-failure guard lets them be declared failed.
	AckMassFailure bool
}

// Decision is what a round should do.
type Decision struct {
	Round uint64
	Mode  Mode
	// MaxMoves and MaxBytes are the budget of a periodic round (relocations and
	// their state bytes; first placements are free). 0 in an emergency round
	// means no limit; a hold round moves nothing.
	MaxMoves int
	MaxBytes int64
	// Constraints are added to the view before solving (Apply does it): the
	// anti-bounce rules (interfaces.ConstraintAllowed: every child but the ones
	// the shard recently left) and, in a periodic round, the budget
	// (interfaces.ConstraintMaxMoves).
	Constraints []interfaces.Constraint
	// DeclareFailed are the children silent past the grace: the caller marks
	// them failed (commits it) before acting. Empty while the guard holds.
	DeclareFailed []interfaces.ChildID
	// Evacuate lists, in an emergency round, the shards that must be (re)placed:
	// only their moves are admitted.
	Evacuate []interfaces.ShardID
	Alerts   []Alert
	// Record explains the round.
	Record Record

	bounce map[interfaces.ShardID][]interfaces.ChildID // children each shard may not go back to
	held   map[backoffKey]Held                         // moves held back (Backoff)
	rules  string                                      // rulesKey of the round
}

// rulesKey summarizes what besides the error decides whether a solve can find
// moves: the anti-bounce rules, the held moves and the number of active
// children.
func rulesKey(d *Decision, active int) string {
	ids := make([]string, 0, len(d.bounce)+len(d.held))
	for id, ex := range d.bounce {
		ids = append(ids, string(id)+">"+joinIDs(ex))
	}
	for k := range d.held {
		ids = append(ids, string(k.shard)+"!"+string(k.to))
	}
	sort.Strings(ids)
	return fmt.Sprintf("%d|%s", active, strings.Join(ids, ";"))
}

// Solve reports whether the caller should run its policy this round.
func (d *Decision) Solve() bool { return d.Mode != ModeHold }

// Record explains one round: what was measured, what was decided and why, and
// (after Observe) what happened.
type Record struct {
	Round uint64    `json:"round"`
	At    time.Time `json:"at"`
	Mode  string    `json:"mode"`
	Why   string    `json:"why"`
	// Errors against the targets (relative; 0 = on target) and the combined one.
	Imbalance float64 `json:"imbalance_error"`
	Util      float64 `json:"util_error"`
	SLO       float64 `json:"slo_error"`
	Error     float64 `json:"error"`
	// Need is the estimated number of moves back to the targets; Integrator the
	// PI integrator after this round.
	Need        int      `json:"need"`
	Integrator  float64  `json:"integrator"`
	MaxMoves    int      `json:"max_moves"`
	MaxBytes    int64    `json:"max_bytes,omitempty"`
	Concurrency int      `json:"concurrency"`
	InFlight    int      `json:"in_flight"`
	Silent      int      `json:"silent"`
	Declared    []string `json:"declared_failed,omitempty"`
	Evacuate    int      `json:"evacuate,omitempty"`
	Guard       bool     `json:"guard"`
	AntiBounce  int      `json:"anti_bounce_shards"`
	Held        int      `json:"moves_held,omitempty"` // moves held back after repeated rejections (Backoff)
	Alerts      []string `json:"alerts,omitempty"`
	// Filled by Observe.
	Observed   bool          `json:"observed"`
	Planned    int           `json:"planned"`
	Applied    int           `json:"applied"`
	SolveError string        `json:"solve_error,omitempty"`
	P99        time.Duration `json:"p99,omitempty"`
}

// RoundResult is what the caller reports after acting on a Decision.
type RoundResult struct {
	// Round is the Decision's round.
	Round uint64
	// At is when the moves were committed (zero: the decision's time).
	At time.Time
	// SolveErr is non-nil when the solve failed or timed out: nothing was
	// applied and the last good assignment is kept.
	SolveErr error
	// Planned is the number of moves the policy proposed; Applied the moves
	// committed (a subset of Decision.Admit's).
	Planned int
	Applied []interfaces.Move
	// Rejected are the moves the caller's commit verification rejected this
	// round (not Admit's refusals): a move rejected for the same reason
	// HoldAfter rounds in a row is held (Backoff).
	Rejected []balancer.Rejection
	// P99 is the tier's p99 latency measured over the last interval (0: not
	// measured); MovesActive the moves that were in flight during it.
	P99         time.Duration
	MovesActive int
}

type left struct {
	child interfaces.ChildID
	until time.Time
}

type smoothed struct {
	seq  uint64
	p99  float64 // ns
	used interfaces.Load
}

// Controller is the control loop's state: the PI integrator, the cooldown, the
// AIMD move concurrency, the EWMA-smoothed reports, the recent-move memory and
// the guard. It is not safe for concurrent use: one goroutine drives it (the
// daemon's loop or the simulator), calling Step then Observe once per round.
type Controller struct {
	cfg Config

	round       uint64
	lastNow     time.Time
	pending     *Decision // the last decision, until observed
	integrator  float64
	coolRound   uint64    // periodic rounds hold while round ≤ coolRound
	coolUntil   time.Time // ... and while now < coolUntil
	concurrency int
	baseline    float64 // quiet p99, ns
	reports     map[interfaces.ChildID]*smoothed
	recent      map[interfaces.ShardID][]left
	guard       bool
	failures    int // consecutive failed solves
	stuck       bool
	stuckErr    float64 // the error of the fruitless round
	stuckRules  string  // its anti-bounce rules and active children: a change retries
	history     []Record
	backoff     Backoff // moves the commit keeps rejecting (HoldAfter, HoldFor)
}

// New returns a controller with cfg (validated).
func New(cfg Config) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Controller{
		cfg:         cfg,
		concurrency: cfg.InitialConcurrency,
		reports:     map[interfaces.ChildID]*smoothed{},
		recent:      map[interfaces.ShardID][]left{},
		backoff:     Backoff{After: cfg.HoldAfter, Hold: cfg.HoldFor},
	}, nil
}

// Config returns the controller's configuration.
func (c *Controller) Config() Config { return c.cfg }

// Concurrency returns the current AIMD move concurrency.
func (c *Controller) Concurrency() int { return c.concurrency }

// Integrator returns the PI integrator (in moves).
func (c *Controller) Integrator() float64 { return c.integrator }

// Guarded reports whether the mass-failure guard is engaged.
func (c *Controller) Guarded() bool { return c.guard }

// History returns the most recent round records, oldest first (a copy).
func (c *Controller) History() []Record {
	out := make([]Record, len(c.history))
	copy(out, c.history)
	return out
}

// Status is the controller's state for an operator's status page.
type Status struct {
	Round       uint64    `json:"round"`
	Guard       bool      `json:"mass_failure_guard"`
	Concurrency int       `json:"move_concurrency"`
	Integrator  float64   `json:"integrator"`
	CoolRound   uint64    `json:"cooldown_through_round,omitempty"`
	CoolUntil   time.Time `json:"cooldown_until,omitempty"`
	AntiBounce  int       `json:"shards_remembered"`
	Failures    int       `json:"consecutive_solve_failures"`
	// Last is the last round's record (zero before the first round); its
	// Alerts are the alerts in force.
	Last Record `json:"last"`
}

// Status returns the controller's state and its last round's record.
func (c *Controller) Status() Status {
	st := Status{Round: c.round, Guard: c.guard, Concurrency: c.concurrency, Integrator: c.integrator,
		CoolRound: c.coolRound, CoolUntil: c.coolUntil, AntiBounce: len(c.recent), Failures: c.failures}
	if n := len(c.history); n > 0 {
		st.Last = c.history[n-1]
	}
	return st
}

// SmoothedP99 returns a child's EWMA-smoothed p99 (0 when it never reported one).
func (c *Controller) SmoothedP99(id interfaces.ChildID) time.Duration {
	if s, ok := c.reports[id]; ok {
		// Within what a Duration holds: a float at the int64 limit would
		// convert to a negative Duration, read as "no latency".
		return time.Duration(math.Min(s.p99, math.MaxInt64/2))
	}
	return 0
}

func invalidf(field, rule string, v any) error {
	return &interfaces.FieldError{Field: field, Rule: rule, Value: fmt.Sprint(v)}
}

// Step runs observe → detect → decide for one round. Bad input (no view, no
// time, time going backwards, a silent child the view does not have) is an
// error naming the field; the controller's state is then unchanged.
func (c *Controller) Step(in Input) (Decision, error) {
	if in.View == nil {
		return Decision{}, invalidf("input.view", "is required", "nil")
	}
	if in.Now.IsZero() {
		return Decision{}, invalidf("input.now", "is required", "zero time")
	}
	if !c.lastNow.IsZero() && in.Now.Before(c.lastNow) {
		return Decision{}, invalidf("input.now", "must not go backwards (last round at "+c.lastNow.Format(time.RFC3339Nano)+")", in.Now.Format(time.RFC3339Nano))
	}
	known := make(map[interfaces.ChildID]interfaces.ChildState, len(in.View.Children))
	for i := range in.View.Children {
		ch := &in.View.Children[i]
		if err := interfaces.ValidateLoad(fmt.Sprintf("input.view.children[%d].capacity", i), ch.Capacity); err != nil {
			return Decision{}, err
		}
		known[ch.ID] = ch.State
	}
	for i := range in.View.Shards {
		if err := interfaces.ValidateLoad(fmt.Sprintf("input.view.shards[%d].load", i), in.View.Shards[i].Load); err != nil {
			return Decision{}, err
		}
	}
	for id, r := range in.View.Reports {
		if r.LatencyP99 < 0 {
			return Decision{}, invalidf(fmt.Sprintf("input.view.reports[%s].latency_p99", id), "must be ≥ 0", r.LatencyP99)
		}
		if err := interfaces.ValidateLoad(fmt.Sprintf("input.view.reports[%s].used", id), r.Used); err != nil {
			return Decision{}, err
		}
	}
	silentIDs := make([]interfaces.ChildID, 0, len(in.Silent))
	for id := range in.Silent {
		if _, ok := known[id]; !ok {
			return Decision{}, fmt.Errorf("input.silent: child %q is not in the view: %w", id, interfaces.ErrNotFound)
		}
		silentIDs = append(silentIDs, id)
	}
	sort.Slice(silentIDs, func(i, j int) bool { return silentIDs[i] < silentIDs[j] })

	c.round++
	c.lastNow = in.Now
	now := in.Now
	cfg := &c.cfg
	d := Decision{Round: c.round}
	rec := Record{Round: c.round, At: now, Concurrency: c.concurrency, InFlight: len(in.View.InFlight)}

	// Observe: smooth the reports, forget expired move memory.
	c.smooth(in.View)
	for id, ls := range c.recent {
		keep := ls[:0]
		for _, l := range ls {
			if now.Before(l.until) {
				keep = append(keep, l)
			}
		}
		if len(keep) == 0 {
			delete(c.recent, id)
		} else {
			c.recent[id] = keep
		}
	}

	// Detect: silent children, the guard.
	var silent, pastGrace []interfaces.ChildID
	live := 0
	for _, ch := range in.View.Children {
		if ch.State != interfaces.ChildFailed {
			live++
		}
	}
	for _, id := range silentIDs {
		if known[id] == interfaces.ChildFailed {
			continue
		}
		silent = append(silent, id)
		if now.Sub(in.Silent[id]) >= cfg.Grace {
			pastGrace = append(pastGrace, id)
		}
	}
	rec.Silent = len(silent)
	mass := len(silent) >= cfg.MassFailureMin && live > 0 && float64(len(silent)) > cfg.MassFailureFraction*float64(live)
	c.guard = mass && !in.AckMassFailure
	if mass {
		msg := fmt.Sprintf("%d of %d children silent (more than %.0f%%)", len(silent), live, 100*cfg.MassFailureFraction)
		if c.guard {
			msg += ": holding all moves and declaring nobody failed until they return or an operator acknowledges"
		} else {
			msg += ": acknowledged by an operator, failing over"
		}
		d.Alerts = append(d.Alerts, Alert{Code: AlertMassFailure, Message: msg})
	}
	if c.failures >= cfg.SolveFailAlert {
		d.Alerts = append(d.Alerts, Alert{Code: AlertSolveFailed, Message: fmt.Sprintf("%d consecutive solves failed; the last good assignment is kept", c.failures)})
	}
	d.Alerts = append(d.Alerts, c.stragglers(in.View)...)
	rec.Guard = c.guard

	finish := func(mode Mode, why string) (Decision, error) {
		d.Mode = mode
		rec.Mode = mode.String()
		rec.Why = why
		rec.MaxMoves, rec.MaxBytes = d.MaxMoves, d.MaxBytes
		rec.Integrator = c.integrator
		rec.Concurrency = c.concurrency
		rec.AntiBounce = len(d.bounce)
		rec.Held = len(d.held)
		for _, a := range d.Alerts {
			rec.Alerts = append(rec.Alerts, a.String())
		}
		d.Record = rec
		c.pending = &d
		c.push(rec)
		return d, nil
	}
	if c.guard {
		return finish(ModeHold, fmt.Sprintf("mass-failure guard: %d of %d children silent", len(silent), live))
	}

	// Children silent past the grace are declared failed now.
	d.DeclareFailed = pastGrace
	for _, id := range pastGrace {
		rec.Declared = append(rec.Declared, string(id))
		known[id] = interfaces.ChildFailed
	}
	view := in.View
	if len(pastGrace) > 0 {
		vv := *in.View
		vv.Children = make([]interfaces.Child, len(in.View.Children))
		for i, ch := range in.View.Children {
			ch.State = known[ch.ID]
			vv.Children[i] = ch
		}
		view = &vv
	}
	p := project(view)
	activeChildren := 0
	for i := range view.Children {
		if p.active(i) {
			activeChildren++
		}
	}

	// Emergency: shards to (re)place — unplaced, on an inactive child, or on
	// a child the view's pin and allowed rules exclude while they allow
	// another (e.g. a region none of whose hosts can hold them: a shard there
	// runs nowhere, as on a failed child). The shards' own constraints are
	// not read here: they may name the children of another tier.
	ruled := mustLeave(view, nil)
	for i := range view.Shards {
		if p.inFlight[i] {
			continue
		}
		s := &view.Shards[i]
		if o := p.owner[i]; o >= 0 && p.active(o) {
			allowed, ok := ruled[s.ID]
			if !ok || len(allowed) == 0 || slices.Contains(allowed, view.Children[o].ID) {
				continue
			}
		}
		d.Evacuate = append(d.Evacuate, s.ID)
	}
	evac := make(map[interfaces.ShardID]bool, len(d.Evacuate))
	for _, id := range d.Evacuate {
		evac[id] = true
	}
	c.antiBounce(&d, p, evac)
	c.holdBack(&d, now, view)
	rec.Evacuate = len(d.Evacuate)
	if len(d.Evacuate) > 0 || len(pastGrace) > 0 {
		if activeChildren == 0 {
			d.Alerts = append(d.Alerts, Alert{Code: AlertNoCapacity, Message: fmt.Sprintf("%d shards need a child and no child is active", len(d.Evacuate))})
			return finish(ModeHold, "no active child to place shards on")
		}
		why := fmt.Sprintf("%d shards to re-place (unplaced or on failed/draining children)", len(d.Evacuate))
		if len(pastGrace) > 0 {
			why = fmt.Sprintf("declaring %d children failed (silent past the %v grace); ", len(pastGrace), cfg.Grace) + why
		}
		return finish(ModeEmergency, why)
	}

	// Periodic: measure, dead band, cooldown, PI, concurrency.
	m := measure(p, cfg, c.SmoothedP99)
	rec.Imbalance, rec.Util, rec.SLO, rec.Error, rec.Need = m.Imbalance, m.Util, m.SLO, m.Error, m.Need
	switch {
	case activeChildren < 2:
		return finish(ModeHold, "fewer than two active children")
	case m.Error <= 0 || m.Error < cfg.DeadBand:
		c.integrator = 0
		c.stuck = false
		return finish(ModeHold, fmt.Sprintf("within the dead band: error %.4f < %.4f", m.Error, cfg.DeadBand))
	case c.round <= c.coolRound || now.Before(c.coolUntil):
		return finish(ModeHold, fmt.Sprintf("cooling down after the moves of a recent round (error %.4f: %s)", m.Error, m.Worst))
	case c.stuck && math.Abs(m.Error-c.stuckErr) < cfg.DeadBand/2+1e-12 && c.stuckRules == rulesKey(&d, activeChildren):
		return finish(ModeHold, fmt.Sprintf("the last solve found no move at this error (%.4f): waiting for the load to change", m.Error))
	}
	c.stuck = false
	d.rules = rulesKey(&d, activeChildren)
	need := float64(m.Need)
	out := cfg.Kp*need + cfg.Ki*c.integrator
	if out < float64(cfg.MaxMoves) { // conditional integration: no windup while saturated
		c.integrator = math.Min(cfg.IntegralMax, c.integrator+need)
		out = cfg.Kp*need + cfg.Ki*c.integrator
	}
	// Clamped as a float first: a large gain converts to an int out of range.
	budget := int(math.Ceil(math.Min(out, float64(cfg.MaxMoves)) - 1e-9))
	budget = max(cfg.MinMoves, min(cfg.MaxMoves, budget))
	avail := c.concurrency - len(view.InFlight)
	if avail <= 0 {
		return finish(ModeHold, fmt.Sprintf("move concurrency: %d moves in flight, limit %d (error %.4f: %s)", len(view.InFlight), c.concurrency, m.Error, m.Worst))
	}
	budget = min(budget, avail)
	d.MaxMoves, d.MaxBytes = budget, cfg.MaxBytes
	d.Constraints = append(d.Constraints, interfaces.Constraint{Kind: interfaces.ConstraintMaxMoves, Max: budget, MaxBytes: cfg.MaxBytes,
		Reason: fmt.Sprintf("control round %d: PI budget (error %.4f, need %d, integrator %.1f, concurrency %d)", c.round, m.Error, m.Need, c.integrator, c.concurrency)})
	return finish(ModePeriodic, fmt.Sprintf("error %.4f outside the dead band %.4f: %s; budget %d moves", m.Error, cfg.DeadBand, m.Worst, budget))
}

// smooth folds the view's reports into the EWMA state, one sample per report
// sequence number, and forgets children that left the view.
func (c *Controller) smooth(v *interfaces.View) {
	inView := make(map[interfaces.ChildID]bool, len(v.Children))
	for _, ch := range v.Children {
		inView[ch.ID] = true
	}
	for id := range c.reports {
		if !inView[id] {
			delete(c.reports, id)
		}
	}
	a := c.cfg.ReportAlpha
	for _, ch := range v.Children {
		r, ok := v.Reports[ch.ID]
		if !ok {
			continue
		}
		s, seen := c.reports[ch.ID]
		switch {
		case !seen:
			c.reports[ch.ID] = &smoothed{seq: r.Epoch, p99: float64(r.LatencyP99), used: r.Used}
		case r.Epoch != s.seq:
			s.seq = r.Epoch
			s.p99 = a*float64(r.LatencyP99) + (1-a)*s.p99
			s.used = r.Used.Scale(a).Add(s.used.Scale(1 - a))
		}
	}
}

// stragglers flags children whose smoothed p99 is far above the tier's median.
func (c *Controller) stragglers(v *interfaces.View) []Alert {
	if c.cfg.StragglerFactor == 0 {
		return nil
	}
	var lats []time.Duration
	for _, ch := range v.Children {
		if ch.State == interfaces.ChildActive {
			if l := c.SmoothedP99(ch.ID); l > 0 {
				lats = append(lats, l)
			}
		}
	}
	if len(lats) < 3 {
		return nil
	}
	med := median(lats)
	var out []Alert
	for _, ch := range v.Children {
		if l := c.SmoothedP99(ch.ID); ch.State == interfaces.ChildActive && med > 0 && float64(l) > c.cfg.StragglerFactor*float64(med) {
			out = append(out, Alert{Code: AlertStraggler, Message: fmt.Sprintf("%s p99 %v is %.1f× the tier median %v", ch.ID, l, float64(l)/float64(med), med)})
		}
	}
	return out
}

// antiBounce adds, for every shard that recently left some children, a
// ConstraintAllowed listing every other child of the view (its current owner
// always included). Shards that must be evacuated get none: an emergency obeys
// hard constraints only. Shards with the same excluded set share a constraint.
func (c *Controller) antiBounce(d *Decision, p *projection, evac map[interfaces.ShardID]bool) {
	if len(c.recent) == 0 {
		return
	}
	type group struct {
		shards   []interfaces.ShardID
		excluded []interfaces.ChildID
	}
	var order []string
	groups := map[string]*group{}
	ruled := mustLeave(p.v, c.recent)
	for i := range p.v.Shards {
		s := &p.v.Shards[i]
		ls := c.recent[s.ID]
		if len(ls) == 0 || evac[s.ID] || p.owner[i] < 0 {
			continue
		}
		cur := p.v.Children[p.owner[i]].ID
		if allowed, ok := ruled[s.ID]; ok && !slices.Contains(allowed, cur) {
			// The view's own rules (a pin, an allowed list: e.g. a child
			// that cannot place the shard asked the parent to keep it
			// elsewhere) make it leave its owner. If every child they
			// allow is one it recently left, an anti-bounce rule would
			// leave it nowhere to go and it would run nowhere (issue 24):
			// the rule yields.
			back := true
			for _, a := range allowed {
				if !slices.ContainsFunc(ls, func(l left) bool { return l.child == a }) {
					back = false
					break
				}
			}
			if back {
				continue
			}
		}
		var ex []interfaces.ChildID
		for _, l := range ls {
			if _, ok := p.childIdx[l.child]; ok && l.child != cur {
				ex = append(ex, l.child)
			}
		}
		if len(ex) == 0 {
			continue
		}
		sort.Slice(ex, func(a, b int) bool { return ex[a] < ex[b] })
		ex = uniq(ex)
		if d.bounce == nil {
			d.bounce = map[interfaces.ShardID][]interfaces.ChildID{}
		}
		d.bounce[s.ID] = ex
		key := joinIDs(ex)
		g, ok := groups[key]
		if !ok {
			g = &group{excluded: ex}
			groups[key] = g
			order = append(order, key)
		}
		g.shards = append(g.shards, s.ID)
	}
	for _, key := range order {
		g := groups[key]
		var allowed []interfaces.ChildID
		for _, ch := range p.v.Children {
			if !slices.Contains(g.excluded, ch.ID) {
				allowed = append(allowed, ch.ID)
			}
		}
		// The current owners are never excluded (ex omits them), so the list is
		// never empty for a placed shard; a group whose members sit on different
		// children gets those children through the lists' complement.
		d.Constraints = append(d.Constraints, interfaces.Constraint{Kind: interfaces.ConstraintAllowed, Shards: g.shards, Children: allowed,
			Reason: fmt.Sprintf("anti-bounce: recently moved off %s; not back within %v", key, c.cfg.BounceWindow)})
	}
}

// mustLeave returns, for the shards of recent (nil: every shard) that the
// view's pin and allowed constraints name, the children those rules together
// allow (their intersection, in the view's child order).
func mustLeave(v *interfaces.View, recent map[interfaces.ShardID][]left) map[interfaces.ShardID][]interfaces.ChildID {
	var out map[interfaces.ShardID][]interfaces.ChildID
	for _, k := range v.Constraints {
		if k.Kind != interfaces.ConstraintPin && k.Kind != interfaces.ConstraintAllowed {
			continue
		}
		for _, id := range k.Shards {
			if recent != nil && len(recent[id]) == 0 {
				continue
			}
			if out == nil {
				out = map[interfaces.ShardID][]interfaces.ChildID{}
			}
			prev, seen := out[id]
			var next []interfaces.ChildID
			for _, ch := range v.Children {
				in := slices.Contains(k.Children, ch.ID)
				if k.Kind == interfaces.ConstraintPin {
					in = len(k.Children) > 0 && k.Children[0] == ch.ID
				}
				if in && (!seen || slices.Contains(prev, ch.ID)) {
					next = append(next, ch.ID)
				}
			}
			out[id] = next
		}
	}
	return out
}

// holdBack adds, for the moves held at now (Backoff), the rules that keep the
// policy off them (every mode: they are moves the commit refuses), and
// remembers them for Admit.
func (c *Controller) holdBack(d *Decision, now time.Time, v *interfaces.View) {
	if c.cfg.HoldFor <= 0 {
		return
	}
	held := c.backoff.Held(now)
	if len(held) == 0 {
		return
	}
	d.held = make(map[backoffKey]Held, len(held))
	for _, h := range held {
		d.held[backoffKey{h.Shard, h.To}] = h
	}
	d.Constraints = append(d.Constraints, c.backoff.Rules(now, v)...)
}

// Held returns the moves held back at now after the commit rejected them
// HoldAfter rounds in a row, sorted by shard and target.
func (c *Controller) Held(now time.Time) []Held { return c.backoff.Held(now) }

func uniq(xs []interfaces.ChildID) []interfaces.ChildID {
	out := xs[:0]
	for i, x := range xs {
		if i == 0 || x != xs[i-1] {
			out = append(out, x)
		}
	}
	return out
}

func joinIDs(xs []interfaces.ChildID) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = string(x)
	}
	return strings.Join(s, ",")
}

func (c *Controller) push(r Record) {
	if len(c.history) >= c.cfg.History {
		copy(c.history, c.history[1:])
		c.history = c.history[:len(c.history)-1]
	}
	c.history = append(c.history, r)
}

// ErrNoDecision is returned by Observe when there is no decision to observe.
var ErrNoDecision = errors.New("control: no decision awaits a result")

// Observe feeds back what the caller did with the last Decision: the moves it
// committed (remembered for anti-bounce, and they start the cooldown), whether
// the solve failed (nothing may have been applied: the last good assignment is
// kept), and the p99 measured while moves were in flight (AIMD concurrency).
// It must be called at most once per Step, with that Step's round.
func (c *Controller) Observe(r RoundResult) error {
	if c.pending == nil {
		return fmt.Errorf("round %d: %w", r.Round, ErrNoDecision)
	}
	d := c.pending
	if r.Round != d.Round {
		return invalidf("result.round", fmt.Sprintf("must be the round of the last decision (%d)", d.Round), r.Round)
	}
	if r.SolveErr != nil && len(r.Applied) > 0 {
		return invalidf("result.applied", "must be empty when the solve failed (the last good assignment is kept)", len(r.Applied))
	}
	if d.Mode == ModeHold && len(r.Applied) > 0 {
		return invalidf("result.applied", "must be empty in a hold round", len(r.Applied))
	}
	if r.Planned < 0 || r.P99 < 0 || r.MovesActive < 0 {
		return invalidf("result", "planned, p99 and moves_active must be ≥ 0", fmt.Sprintf("%d, %v, %d", r.Planned, r.P99, r.MovesActive))
	}
	c.pending = nil
	at := r.At
	if at.IsZero() {
		at = d.Record.At
	}
	rec := &c.history[len(c.history)-1]
	rec.Observed, rec.Planned, rec.Applied, rec.P99 = true, r.Planned, len(r.Applied), r.P99

	if r.SolveErr != nil {
		c.failures++
		rec.SolveError = r.SolveErr.Error()
		rec.Why += "; solve failed, kept the last good assignment"
	} else if d.Mode != ModeHold {
		c.failures = 0
	}
	if d.Mode == ModePeriodic && r.SolveErr == nil && r.Planned == 0 {
		c.stuck, c.stuckErr, c.stuckRules = true, d.Record.Error, d.rules
	}
	if c.cfg.HoldFor > 0 {
		c.backoff.Observe(at, r.Rejected, r.Applied)
	}
	if len(r.Applied) > 0 {
		c.coolRound = d.Round + uint64(c.cfg.CooldownRounds)
		c.coolUntil = at.Add(c.cfg.Cooldown)
		if c.cfg.BounceWindow > 0 {
			for _, m := range r.Applied {
				if m.From != "" {
					c.recent[m.Shard] = append(c.recent[m.Shard], left{child: m.From, until: at.Add(c.cfg.BounceWindow)})
				}
			}
		}
	}
	// AIMD on the measured p99.
	if r.P99 > 0 {
		p99 := float64(r.P99)
		switch {
		case r.MovesActive == 0:
			if c.baseline == 0 {
				c.baseline = p99
			} else {
				c.baseline = c.cfg.BaselineAlpha*p99 + (1-c.cfg.BaselineAlpha)*c.baseline
			}
			c.concurrency = min(c.cfg.MaxConcurrency, c.concurrency+1)
		case c.baseline > 0 && p99 > c.baseline*(1+c.cfg.LatencyRise):
			c.concurrency = max(c.cfg.MinConcurrency, int(math.Floor(float64(c.concurrency)*c.cfg.Backoff)))
		case c.baseline > 0:
			c.concurrency = min(c.cfg.MaxConcurrency, c.concurrency+1)
		}
	}
	return nil
}
