package control

import (
	"fmt"
	"math"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// Config holds the tuning knobs of a Controller. Start from DefaultConfig and
// change what you need; New validates every field (a bad value is an error
// naming the field, wrapping interfaces.ErrInvalid).
type Config struct {
	// TargetImbalance is the balance target: per resource, the busiest active
	// child's utilization divided by the lower bound (max(Σload/Σcapacity,
	// largest shard / largest capacity)). ≥ 1. Default 1.10.
	TargetImbalance float64
	// Floor: a resource's imbalance counts only when its busiest child is at or
	// above this utilization; imbalance among lightly loaded children costs no
	// latency and is not worth moves. In [0, 1]. Default 0.2.
	Floor float64
	// TargetUtil is the utilization no child should exceed in any resource while
	// the tier's mean is below it (overload error). In (0, 1]. Default 0.85.
	TargetUtil float64
	// DeadBand: an error component (imbalance − target, utilization − target,
	// p99/SLO − 1) below DeadBand is ignored; when all are, the round holds and
	// the integrator resets, so a steady load gives zero moves. ≥ 0. Default 0.05.
	DeadBand float64

	// Kp and Ki are the PI gains, in moves per move of error: the error is the
	// estimated number of moves that would bring every component back to its
	// target. Budget = ceil(Kp·need + Ki·I). Kp > 0, Ki ≥ 0. Defaults 1.0, 0.25.
	Kp, Ki float64
	// IntegralMax clamps the integrator I (in moves) — anti-windup; the
	// integrator also stops growing while the budget is saturated at MaxMoves.
	// ≥ 0. Default 64.
	IntegralMax float64
	// MinMoves and MaxMoves bound a periodic round's move budget when it moves at
	// all. 1 ≤ MinMoves ≤ MaxMoves. Defaults 1 and 64.
	MinMoves, MaxMoves int
	// MaxBytes caps the state bytes a periodic round may move; 0 = no cap.
	MaxBytes int64

	// CooldownRounds and Cooldown: after a round that applied moves, periodic
	// rounds hold for CooldownRounds rounds and until Cooldown has passed
	// (emergency rounds ignore the cooldown). ≥ 0. Defaults 1 round, 0.
	CooldownRounds int
	Cooldown       time.Duration

	// Grace is how long a child must be silent (counted from the Since the caller
	// gives: its lease expiry) before it is declared failed and its shards move.
	// ≥ 0. Default 5s.
	Grace time.Duration
	// MassFailureFraction: when more than this fraction of the tier's live
	// children are silent at once (and at least MassFailureMin of them), the
	// guard engages: nothing is declared failed, nothing moves, and an alert is
	// raised until enough children come back or an operator acknowledges.
	// In (0, 1]. Defaults 0.3 and 2.
	MassFailureFraction float64
	MassFailureMin      int

	// BounceWindow is how long a shard that left a child may not be moved back to
	// it. ≥ 0 (0 disables anti-bounce). Default 10m.
	BounceWindow time.Duration

	// HoldAfter and HoldFor: a move (shard → child) that the caller's commit
	// rejected for the same reason HoldAfter rounds in a row
	// (RoundResult.Rejected) is held for HoldFor — kept out of the policy's
	// view and refused by Admit (Backoff). HoldAfter ≥ 1 and HoldFor ≥ 0
	// (0 disables holding). Defaults 3 and 1m.
	HoldAfter int
	HoldFor   time.Duration

	// ReportAlpha is the EWMA weight of a new report (p99, used load). In (0, 1].
	// Default 0.3.
	ReportAlpha float64
	// StragglerFactor: a child whose smoothed p99 is above StragglerFactor × the
	// median smoothed p99 of the tier raises a straggler alert. > 1, or 0 to
	// disable. Default 3.
	StragglerFactor float64
	// SolveFailAlert: that many consecutive failed solves raise an alert. ≥ 1.
	// Default 3.
	SolveFailAlert int

	// Move concurrency (AIMD): at most Concurrency moves in flight; it starts at
	// InitialConcurrency, grows by 1 per healthy round up to MaxConcurrency, and is
	// multiplied by Backoff (at least MinConcurrency) when the p99 measured while
	// moves were in flight exceeds the quiet baseline by more than LatencyRise
	// (a fraction). Defaults 8, 1, 64, 0.5, 0.25.
	InitialConcurrency, MinConcurrency, MaxConcurrency int
	Backoff, LatencyRise                               float64
	// BaselineAlpha is the EWMA weight of a quiet round's p99 in the baseline.
	// In (0, 1]. Default 0.2.
	BaselineAlpha float64

	// History is how many round records are kept. ≥ 1. Default 64.
	History int
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		TargetImbalance:     1.10,
		Floor:               0.2,
		TargetUtil:          0.85,
		DeadBand:            0.05,
		Kp:                  1.0,
		Ki:                  0.25,
		IntegralMax:         64,
		MinMoves:            1,
		MaxMoves:            64,
		CooldownRounds:      1,
		Grace:               5 * time.Second,
		MassFailureFraction: 0.3,
		MassFailureMin:      2,
		BounceWindow:        10 * time.Minute,
		HoldAfter:           DefaultBackoffAfter,
		HoldFor:             DefaultBackoffHold,
		ReportAlpha:         0.3,
		StragglerFactor:     3,
		SolveFailAlert:      3,
		InitialConcurrency:  8,
		MinConcurrency:      1,
		MaxConcurrency:      64,
		Backoff:             0.5,
		LatencyRise:         0.25,
		BaselineAlpha:       0.2,
		History:             64,
	}
}

func bad(field, rule string, v any) error {
	return &interfaces.FieldError{Field: "control." + field, Rule: rule, Value: fmt.Sprintf("%v", v)}
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// Validate checks every field; the error names the field and the rule.
func (c Config) Validate() error {
	type check struct {
		ok    bool
		field string
		rule  string
		v     any
	}
	checks := []check{
		{finite(c.TargetImbalance) && c.TargetImbalance >= 1, "target_imbalance", "must be a finite number ≥ 1", c.TargetImbalance},
		{finite(c.Floor) && c.Floor >= 0 && c.Floor <= 1, "floor", "must be in [0, 1]", c.Floor},
		{finite(c.TargetUtil) && c.TargetUtil > 0 && c.TargetUtil <= 1, "target_util", "must be in (0, 1]", c.TargetUtil},
		{finite(c.DeadBand) && c.DeadBand >= 0, "dead_band", "must be a finite number ≥ 0", c.DeadBand},
		{finite(c.Kp) && c.Kp > 0, "kp", "must be a finite number > 0", c.Kp},
		{finite(c.Ki) && c.Ki >= 0, "ki", "must be a finite number ≥ 0", c.Ki},
		{finite(c.IntegralMax) && c.IntegralMax >= 0, "integral_max", "must be a finite number ≥ 0", c.IntegralMax},
		{c.MinMoves >= 1, "min_moves", "must be ≥ 1", c.MinMoves},
		{c.MaxMoves >= c.MinMoves, "max_moves", "must be ≥ min_moves", c.MaxMoves},
		{c.MaxBytes >= 0, "max_bytes", "must be ≥ 0 (0 = no cap)", c.MaxBytes},
		{c.CooldownRounds >= 0, "cooldown_rounds", "must be ≥ 0", c.CooldownRounds},
		{c.Cooldown >= 0, "cooldown", "must be ≥ 0", c.Cooldown},
		{c.Grace >= 0, "grace", "must be ≥ 0", c.Grace},
		{finite(c.MassFailureFraction) && c.MassFailureFraction > 0 && c.MassFailureFraction <= 1, "mass_failure_fraction", "must be in (0, 1]", c.MassFailureFraction},
		{c.MassFailureMin >= 1, "mass_failure_min", "must be ≥ 1", c.MassFailureMin},
		{c.BounceWindow >= 0, "bounce_window", "must be ≥ 0 (0 disables anti-bounce)", c.BounceWindow},
		{c.HoldAfter >= 1, "hold_after", "must be ≥ 1", c.HoldAfter},
		{c.HoldFor >= 0, "hold_for", "must be ≥ 0 (0 disables holding)", c.HoldFor},
		{finite(c.ReportAlpha) && c.ReportAlpha > 0 && c.ReportAlpha <= 1, "report_alpha", "must be in (0, 1]", c.ReportAlpha},
		{finite(c.StragglerFactor) && (c.StragglerFactor == 0 || c.StragglerFactor > 1), "straggler_factor", "must be > 1, or 0 to disable", c.StragglerFactor},
		{c.SolveFailAlert >= 1, "solve_fail_alert", "must be ≥ 1", c.SolveFailAlert},
		{c.MinConcurrency >= 1, "min_concurrency", "must be ≥ 1", c.MinConcurrency},
		{c.MaxConcurrency >= c.MinConcurrency, "max_concurrency", "must be ≥ min_concurrency", c.MaxConcurrency},
		{c.InitialConcurrency >= c.MinConcurrency && c.InitialConcurrency <= c.MaxConcurrency, "initial_concurrency", "must be in [min_concurrency, max_concurrency]", c.InitialConcurrency},
		{finite(c.Backoff) && c.Backoff > 0 && c.Backoff < 1, "backoff", "must be in (0, 1)", c.Backoff},
		{finite(c.LatencyRise) && c.LatencyRise >= 0, "latency_rise", "must be a finite number ≥ 0", c.LatencyRise},
		{finite(c.BaselineAlpha) && c.BaselineAlpha > 0 && c.BaselineAlpha <= 1, "baseline_alpha", "must be in (0, 1]", c.BaselineAlpha},
		{c.History >= 1, "history", "must be ≥ 1", c.History},
	}
	for _, k := range checks {
		if !k.ok {
			return bad(k.field, k.rule, k.v)
		}
	}
	return nil
}
