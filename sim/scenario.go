package sim

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/internal/units"
	"github.com/strata-sched/strata/internal/yamlerr"
	"github.com/strata-sched/strata/tiers/control"
)

// Scenario is a what-if question as a file: topology, workload, events, the
// policies to compare, the run length and the assertions to check. Load it with
// LoadScenario or ParseScenario; both validate it and name the line and key of the
// first problem.
type Scenario struct {
	Name        string   `yaml:"name"`
	Description string   `yaml:"description"`
	Seed        uint64   `yaml:"seed"`
	Duration    Duration `yaml:"duration"`
	Tick        Duration `yaml:"tick"`
	// ControlInterval is how often each tier instance runs its control step.
	ControlInterval Duration `yaml:"control_interval"`
	// SampleEvery is the resolution of the time series (CSV and plots).
	SampleEvery Duration     `yaml:"sample_every"`
	Model       Model        `yaml:"model"`
	Topology    Topology     `yaml:"topology"`
	Workload    Workload     `yaml:"workload"`
	Events      []Event      `yaml:"events"`
	Policies    []PolicySpec `yaml:"policies"`
	Assertions  []Assertion  `yaml:"assertions"`

	// Control tunes every tier instance's controller (tiers/control), for every
	// policy; a policy's own control block overrides it key by key.
	Control *ControlSpec `yaml:"control"`

	// dir is the directory of the scenario file; relative data paths resolve
	// against it.
	dir string
	// root is the parsed YAML, kept to name lines in validation errors.
	root *yaml.Node
	file string
	// live, for a plan against a live cluster (live.go), replaces the
	// workload's jobs with the cluster's shards and starts from its assignment.
	live *liveState
}

// Model holds the parameters of the latency, lag, move and control models.
type Model struct {
	// ServiceMS is the mean service time of a record on an idle host, in ms: the
	// M/M/1 model gives a mean sojourn of ServiceMS/(1-ρ).
	ServiceMS float64 `yaml:"service_ms"`
	// MaxUtil caps ρ in the queueing formula (the backlog model takes over above).
	MaxUtil float64 `yaml:"max_util"`
	// MoveBandwidth is the state-transfer rate of a move inside a region, bytes/s.
	MoveBandwidth Quantity `yaml:"move_bandwidth"`
	// CrossRegionBandwidth is the state-transfer rate between regions, bytes/s.
	CrossRegionBandwidth Quantity `yaml:"cross_region_bandwidth"`
	// MoveOverhead is the fixed time every move takes on top of the transfer.
	MoveOverhead Duration `yaml:"move_overhead"`
	// DetectAfter is how long a failure takes to be noticed by the parent tier.
	DetectAfter Duration `yaml:"detect_after"`
	// Trigger, Target and Floor are deprecated aliases of the control block
	// (the simulator runs the daemons' controller, tiers/control): trigger
	// sets control.target_imbalance to trigger − dead_band (the controller then
	// acts when the busiest child's utilization over the lower bound exceeds
	// trigger), target sets control.target_util and floor control.floor; a key
	// of a control block wins. MoveBudget, the old per-round fraction of
	// shards, has no equivalent and is rejected (use control.max_moves).
	Trigger    float64 `yaml:"trigger"`
	Target     float64 `yaml:"target"`
	Floor      float64 `yaml:"floor"`
	MoveBudget float64 `yaml:"move_budget"`
}

// Topology describes the hosts: generated per region, or listed one by one.
type Topology struct {
	Regions []RegionSpec `yaml:"regions"`
	Hosts   []HostSpec   `yaml:"hosts"`
	// RacksPerRegion, when > 0, groups each region's hosts into that many racks,
	// round-robin in the order the hosts are defined (hosts added by events
	// continue the round): host k of a region is on rack "<region>-r<k mod N>"
	// and carries the label rack=<that name>. Racks are the children of a
	// region tier instance in a chain with the rack tier (PolicySpec.Chain),
	// and the unit of the rack_loss_impact metric and the spread assertion.
	RacksPerRegion int `yaml:"racks_per_region"`
}

// RegionSpec generates Hosts hosts in one region. Classes, when given, make the
// capacities heterogeneous: each host draws a class by weight; Jitter then varies
// every dimension by up to ±Jitter (a fraction).
type RegionSpec struct {
	Name     string            `yaml:"name"`
	Hosts    int               `yaml:"hosts"`
	Capacity LoadSpec          `yaml:"capacity"`
	Classes  []HostClass       `yaml:"classes"`
	Jitter   float64           `yaml:"jitter"`
	Labels   map[string]string `yaml:"labels"`
}

// HostClass is one kind of host in a generated region.
type HostClass struct {
	Weight   float64           `yaml:"weight"`
	Capacity LoadSpec          `yaml:"capacity"`
	Labels   map[string]string `yaml:"labels"`
}

// HostSpec is one explicitly listed host.
type HostSpec struct {
	Name     string            `yaml:"name"`
	Region   string            `yaml:"region"`
	Capacity LoadSpec          `yaml:"capacity"`
	Labels   map[string]string `yaml:"labels"`
}

// LoadSpec is a load or capacity vector as written in a scenario.
type LoadSpec struct {
	CPU   Quantity `yaml:"cpu"`
	Mem   Quantity `yaml:"mem"`
	Net   Quantity `yaml:"net"`
	Tasks Quantity `yaml:"tasks"`
}

// Load converts to the domain type.
func (l LoadSpec) Load() interfaces.Load {
	return interfaces.Load{CPU: float64(l.CPU), Mem: float64(l.Mem), Net: float64(l.Net), Tasks: float64(l.Tasks)}
}

// Workload describes the jobs and how their load changes over time.
type Workload struct {
	Jobs     []JobSpec     `yaml:"jobs"`
	Diurnal  *DiurnalSpec  `yaml:"diurnal"`
	Steps    []StepSpec    `yaml:"steps"`
	Spikes   []SpikeSpec   `yaml:"spikes"`
	Hot      []HotSpec     `yaml:"hot"`
	Replay   *ReplaySpec   `yaml:"replay"`
	Arrivals *ArrivalsSpec `yaml:"arrivals"`
}

// JobSpec generates the shards of one job. Sizes sets how shard sizes spread: every
// shard's load, input rate and state scale with its size weight (mean 1).
type JobSpec struct {
	Name       string   `yaml:"name"`
	Shards     int      `yaml:"shards"`
	Load       LoadSpec `yaml:"load"`
	InputRate  float64  `yaml:"input_rate"`
	StateBytes Quantity `yaml:"state_bytes"`
	Sizes      SizeSpec `yaml:"sizes"`
	Arrive     Duration `yaml:"arrive"`
	Leave      Duration `yaml:"leave"`
	LatencySLO Duration `yaml:"latency_slo"`
	Regions    []string `yaml:"regions"`
	Pinned     string   `yaml:"pinned"`
	Spread     string   `yaml:"anti_affinity"`
	MaxPerHost int      `yaml:"max_per_child"`
}

// SizeSpec is the distribution of shard sizes in a job: "equal", "uniform"
// (between 1 and Ratio) or "zipf" (rank-k weight ∝ k^-s with s chosen so that
// largest/smallest = Ratio, unless S is given).
type SizeSpec struct {
	Dist  string  `yaml:"dist"`
	Ratio float64 `yaml:"ratio"`
	S     float64 `yaml:"s"`
}

// DiurnalSpec multiplies every job's rate by 1 + Amplitude·sin(2π(t+Phase)/Period).
type DiurnalSpec struct {
	Amplitude float64  `yaml:"amplitude"`
	Period    Duration `yaml:"period"`
	Phase     Duration `yaml:"phase"`
}

// StepSpec multiplies the rate of Job (all jobs when empty) by Factor from At on.
// Fraction, when in (0, 1), steps only that fraction of the job's shards (of all
// shards when Job is empty; rounded up, at least one), drawn with the seed.
type StepSpec struct {
	At       Duration `yaml:"at"`
	Job      string   `yaml:"job"`
	Factor   float64  `yaml:"factor"`
	Fraction float64  `yaml:"fraction"`
}

// Partial reports whether the step applies to a drawn fraction of the shards.
func (s StepSpec) Partial() bool { return s.Fraction > 0 && s.Fraction < 1 }

// SpikeSpec multiplies the rate of Job (all jobs when empty) by Factor during
// [At, At+For).
type SpikeSpec struct {
	At     Duration `yaml:"at"`
	For    Duration `yaml:"for"`
	Job    string   `yaml:"job"`
	Factor float64  `yaml:"factor"`
}

// HotSpec makes shards hot: the named Shards, or Count shards of Job picked with
// the seed, have their rate multiplied by Factor during [At, At+For) (For 0: to
// the end).
type HotSpec struct {
	At     Duration `yaml:"at"`
	For    Duration `yaml:"for"`
	Job    string   `yaml:"job"`
	Count  int      `yaml:"count"`
	Shards []string `yaml:"shards"`
	Factor float64  `yaml:"factor"`
}

// ReplaySpec replays a recorded per-shard load series from a CSV file with the
// header time,shard,cpu,mem,net,input_rate (time in seconds from the start).
// Every shard named in the file becomes a shard of job Job; its load and input
// rate hold the last recorded value.
type ReplaySpec struct {
	File       string   `yaml:"file"`
	Job        string   `yaml:"job"`
	StateBytes Quantity `yaml:"state_bytes"`
	Scale      float64  `yaml:"scale"`
}

// ArrivalsSpec replays a real arrival series as the input rate of Job (all jobs
// when empty): arrivals are binned per Bin, and each bin's count divided by the
// mean count becomes the rate multiplier for that stretch of time. The series
// starts at Offset into the file and loops if the run is longer. Format "azure"
// reads TIMESTAMP,ContextTokens,GeneratedTokens; Weight "tokens" counts context
// plus generated tokens instead of requests. Scale stretches virtual time: 1
// virtual second replays Scale seconds of the trace.
type ArrivalsSpec struct {
	File   string   `yaml:"file"`
	Format string   `yaml:"format"`
	Job    string   `yaml:"job"`
	Bin    Duration `yaml:"bin"`
	Weight string   `yaml:"weight"`
	Offset Duration `yaml:"offset"`
	Scale  float64  `yaml:"scale"`
}

// Event kinds.
const (
	EventHostFail    = "host_fail"
	EventHostRecover = "host_recover"
	EventRegionLoss  = "region_loss"
	EventRegionBack  = "region_recover"
	EventDrain       = "drain"
	EventAddHosts    = "add_hosts"
	// EventAckMassFailure is an operator acknowledging a mass failure at one
	// tier instance (Instance: global, a region or a rack): its next round
	// declares the silent children failed despite the guard and fails over.
	EventAckMassFailure = "ack_mass_failure"
	// EventHostSlow makes a host process its shards' records Factor times as
	// fast as before (0 < Factor ≤ 1; 1 is full speed again) while it reports
	// the same utilization: a straggler (a throttled or degraded machine) that
	// only the shards' measured processing rates give away.
	EventHostSlow = "host_slow"
)

// Event is a change to the topology at a virtual time.
type Event struct {
	At       Duration `yaml:"at"`
	Kind     string   `yaml:"kind"`
	Host     string   `yaml:"host"`
	Region   string   `yaml:"region"`
	Count    int      `yaml:"count"`
	Capacity LoadSpec `yaml:"capacity"`
	Instance string   `yaml:"instance"`
	Factor   float64  `yaml:"factor"`
}

// Integration modes.
const (
	Decoupled     = "decoupled"
	Manual        = "manual"
	Collaborative = "collaborative"
)

// PolicySpec is one policy to simulate: the tier policy (by registry name) for
// the global and region tiers, its parameters, and the integration mode.
type PolicySpec struct {
	Name         string            `yaml:"name"`
	Solver       string            `yaml:"solver"`
	GlobalSolver string            `yaml:"global_solver"`
	Integration  string            `yaml:"integration"`
	Params       map[string]string `yaml:"params"`
	// Constraints are operator constraints, used in manual mode.
	Constraints []ConstraintSpec `yaml:"constraints"`
	// Reserve is the collaborative mode's headroom reserve: the global tier caps
	// each region at (1-Reserve) of its capacity when the region reports less
	// headroom than that.
	Reserve float64 `yaml:"reserve"`
	// Chain is the tier chain, from the root down: [global, region, host] (the
	// default) or [global, region, rack, host], where each region instance
	// places shards onto its racks and each rack instance onto its hosts.
	Chain []string `yaml:"chain"`
	// Tiers names the policy of a tier of the chain (keys global, region,
	// rack), overriding global_solver (global) and solver (region and rack).
	Tiers map[string]string `yaml:"tiers"`
	// Control overrides the scenario's control block, key by key, for this
	// policy's tier instances.
	Control *ControlSpec `yaml:"control"`
	// ControlPolicies names the control policies (tiers/control: straggler,
	// doctor, autoscale) every tier instance of this policy runs after its
	// controller's step, as the daemons' control_policies; none when empty.
	// ControlPolicyConfig holds their settings by policy name, as the daemons'
	// control_policy_config.
	ControlPolicies     []string                     `yaml:"control_policies"`
	ControlPolicyConfig map[string]map[string]string `yaml:"control_policy_config"`
}

// ControlSpec is the control block of a scenario or a policy: each key sets the
// control.Config field of the same name (snake_case) for every tier instance's
// controller; a key left out keeps control.DefaultConfig()'s value (or the
// scenario's, in a policy's block). Validated by control.Config.Validate, the
// error naming the key.
type ControlSpec struct {
	TargetImbalance     *float64  `yaml:"target_imbalance"`
	Floor               *float64  `yaml:"floor"`
	TargetUtil          *float64  `yaml:"target_util"`
	DeadBand            *float64  `yaml:"dead_band"`
	Kp                  *float64  `yaml:"kp"`
	Ki                  *float64  `yaml:"ki"`
	IntegralMax         *float64  `yaml:"integral_max"`
	MinMoves            *int      `yaml:"min_moves"`
	MaxMoves            *int      `yaml:"max_moves"`
	MaxBytes            *Quantity `yaml:"max_bytes"`
	CooldownRounds      *int      `yaml:"cooldown_rounds"`
	Cooldown            *Duration `yaml:"cooldown"`
	Grace               *Duration `yaml:"grace"`
	MassFailureFraction *float64  `yaml:"mass_failure_fraction"`
	MassFailureMin      *int      `yaml:"mass_failure_min"`
	BounceWindow        *Duration `yaml:"bounce_window"`
	ReportAlpha         *float64  `yaml:"report_alpha"`
	StragglerFactor     *float64  `yaml:"straggler_factor"`
	SolveFailAlert      *int      `yaml:"solve_fail_alert"`
	InitialConcurrency  *int      `yaml:"initial_concurrency"`
	MinConcurrency      *int      `yaml:"min_concurrency"`
	MaxConcurrency      *int      `yaml:"max_concurrency"`
	Backoff             *float64  `yaml:"backoff"`
	LatencyRise         *float64  `yaml:"latency_rise"`
	BaselineAlpha       *float64  `yaml:"baseline_alpha"`
}

// apply sets the fields of c that s gives; it returns the keys it set.
func (s *ControlSpec) apply(c *control.Config) (keys map[string]bool) {
	keys = map[string]bool{}
	if s == nil {
		return keys
	}
	f := func(key string, dst *float64, v *float64) {
		if v != nil {
			*dst, keys[key] = *v, true
		}
	}
	i := func(key string, dst *int, v *int) {
		if v != nil {
			*dst, keys[key] = *v, true
		}
	}
	d := func(key string, dst *time.Duration, v *Duration) {
		if v != nil {
			*dst, keys[key] = v.D(), true
		}
	}
	f("target_imbalance", &c.TargetImbalance, s.TargetImbalance)
	f("floor", &c.Floor, s.Floor)
	f("target_util", &c.TargetUtil, s.TargetUtil)
	f("dead_band", &c.DeadBand, s.DeadBand)
	f("kp", &c.Kp, s.Kp)
	f("ki", &c.Ki, s.Ki)
	f("integral_max", &c.IntegralMax, s.IntegralMax)
	i("min_moves", &c.MinMoves, s.MinMoves)
	i("max_moves", &c.MaxMoves, s.MaxMoves)
	if s.MaxBytes != nil {
		c.MaxBytes, keys["max_bytes"] = int64(*s.MaxBytes), true
	}
	i("cooldown_rounds", &c.CooldownRounds, s.CooldownRounds)
	d("cooldown", &c.Cooldown, s.Cooldown)
	d("grace", &c.Grace, s.Grace)
	f("mass_failure_fraction", &c.MassFailureFraction, s.MassFailureFraction)
	i("mass_failure_min", &c.MassFailureMin, s.MassFailureMin)
	d("bounce_window", &c.BounceWindow, s.BounceWindow)
	f("report_alpha", &c.ReportAlpha, s.ReportAlpha)
	f("straggler_factor", &c.StragglerFactor, s.StragglerFactor)
	i("solve_fail_alert", &c.SolveFailAlert, s.SolveFailAlert)
	i("initial_concurrency", &c.InitialConcurrency, s.InitialConcurrency)
	i("min_concurrency", &c.MinConcurrency, s.MinConcurrency)
	i("max_concurrency", &c.MaxConcurrency, s.MaxConcurrency)
	f("backoff", &c.Backoff, s.Backoff)
	f("latency_rise", &c.LatencyRise, s.LatencyRise)
	f("baseline_alpha", &c.BaselineAlpha, s.BaselineAlpha)
	return keys
}

// ControlConfig returns the controller configuration of policy p's tier
// instances: control.DefaultConfig(), then the scenario's control block, then
// the policy's.
func (sc *Scenario) ControlConfig(p PolicySpec) control.Config {
	c := control.DefaultConfig()
	m := sc.Model
	if m.Target != 0 {
		c.TargetUtil = m.Target // deprecated aliases (Model)
	}
	if m.Floor != 0 {
		c.Floor = m.Floor
	}
	keys := sc.Control.apply(&c)
	for k := range p.Control.apply(&c) {
		keys[k] = true
	}
	if m.Trigger != 0 && !keys["target_imbalance"] {
		c.TargetImbalance = math.Max(1, m.Trigger-c.DeadBand)
	}
	return c
}

// checkControl validates the scenario's control block and every policy's
// merged configuration, naming the key (and its line) of the first bad value.
func (sc *Scenario) checkControl() error {
	check := func(c control.Config, keys map[string]bool, path []any, fallback []any) error {
		err := c.Validate()
		if err == nil {
			return nil
		}
		var fe *interfaces.FieldError
		if !errors.As(err, &fe) {
			return sc.fail(path, "%v", err)
		}
		key := strings.TrimPrefix(fe.Field, "control.")
		where := append(append([]any(nil), path...), key)
		if !keys[key] && fallback != nil {
			where = append(append([]any(nil), fallback...), key)
		}
		rule := fe.Rule
		if fe.Value != "" {
			rule += " (got " + fe.Value + ")"
		}
		return sc.fail(where, "%s", rule)
	}
	if sc.Control != nil && sc.Control.MaxBytes != nil {
		if err := sc.checkBytes(p("control", "max_bytes"), *sc.Control.MaxBytes); err != nil {
			return err
		}
	}
	for i, pol := range sc.Policies {
		if pol.Control != nil && pol.Control.MaxBytes != nil {
			if err := sc.checkBytes(p("policies", i, "control", "max_bytes"), *pol.Control.MaxBytes); err != nil {
				return err
			}
		}
	}
	base := control.DefaultConfig()
	keys := sc.Control.apply(&base)
	if err := check(base, keys, p("control"), nil); err != nil {
		return err
	}
	for i, pol := range sc.Policies {
		c := base
		pk := pol.Control.apply(&c)
		if err := check(c, pk, p("policies", i, "control"), p("control")); err != nil {
			return err
		}
		if err := check(sc.ControlConfig(pol), pk, p("policies", i, "control"), p("model")); err != nil {
			return err
		}
	}
	return nil
}

// TierRack is the example custom tier between regions and hosts.
const TierRack = "rack"

// NewControlPolicies builds a fresh set of the spec's control policies (one per
// tier instance: policies keep evidence between rounds), or nil when it names
// none. The simulator carries out no job resize, so autoscale must report only.
func (p PolicySpec) NewControlPolicies() (*control.Policies, error) {
	if len(p.ControlPolicies) == 0 {
		if len(p.ControlPolicyConfig) > 0 {
			return nil, fmt.Errorf("control_policy_config is set but control_policies names no policy")
		}
		return nil, nil
	}
	settings := make(map[string]control.PolicySettings, len(p.ControlPolicyConfig))
	for name, kv := range p.ControlPolicyConfig {
		settings[name] = control.PolicySettings(kv)
	}
	if settings[control.PolicyAutoscale]["mode"] == control.AutoscaleApply {
		return nil, fmt.Errorf("control_policy_config.autoscale.mode: the simulator does not resize jobs (want %q)", control.AutoscaleReport)
	}
	return control.NewPolicies(p.ControlPolicies, settings)
}

// HasRack reports whether the policy's chain has the rack tier.
func (p PolicySpec) HasRack() bool {
	for _, t := range p.Chain {
		if t == TierRack {
			return true
		}
	}
	return false
}

// TierPolicy returns the policy name the spec gives tier (global, region or
// rack): Tiers[tier] when set, else GlobalSolver for global and Solver for the
// others.
func (p PolicySpec) TierPolicy(tier string) string {
	if n := p.Tiers[tier]; n != "" {
		return n
	}
	if tier == interfaces.TierGlobal {
		return p.GlobalSolver
	}
	return p.Solver
}

// ConstraintSpec is an operator constraint for manual mode.
type ConstraintSpec struct {
	Tier     string   `yaml:"tier"`
	Kind     string   `yaml:"kind"`
	Shards   []string `yaml:"shards"`
	Job      string   `yaml:"job"`
	Children []string `yaml:"children"`
	Limit    LoadSpec `yaml:"limit"`
	Max      int      `yaml:"max"`
	MaxBytes Quantity `yaml:"max_bytes"`
}

// Assertion kinds.
const (
	AssertBalance = "balance"
	AssertSteady  = "steady"
	AssertSLO     = "slo"
	AssertNoLoss  = "no_loss"
	AssertSpread  = "spread"
	// AssertConverge: after a change at From, host max/mean utilization of
	// Resource is back ≤ Max within Rounds control rounds of the tier
	// instances (the most rounds any one instance ran from From until then).
	AssertConverge = "converge"
	// AssertNoBounce: no shard moves back to a child it left less than Within
	// before (default: the policy's control bounce_window), over [From, To).
	AssertNoBounce = "no_bounce"
	// AssertGuard: the mass-failure guard of some tier instance engages, with
	// its mass_failure alert, within Within of From, and at most Max
	// relocations start over [From, To) (no stampede).
	AssertGuard = "guard"
	// AssertVersus compares two policies of the run after both ran: Policy's
	// utilization spread in Resource (default cpu; max/mean − 1 of host
	// utilization, averaged over every tick) is at least SpreadBetter lower
	// than Baseline's, and its modeled p99 latency at least P99Lower lower
	// (fractions; 0 skips that half). Whole-run figures: from/to do not apply.
	AssertVersus = "versus"
)

// Assertion is a check on a run. Balance: max/mean host utilization of Resource
// ≤ Max at every tick in [From, To). Steady: no moves in [From, To). SLO: the
// modeled p99 latency over [From, To) ≤ LatencyP99MS. NoLoss: every shard owned
// by an active host at the end. Spread: rack_loss_impact (the largest fraction
// of one job's running shards on one rack) ≤ Max at every sample in [From, To];
// needs topology.racks_per_region. Policies, when set, limits the check to those
// policies.
type Assertion struct {
	Kind         string   `yaml:"kind"`
	Resource     string   `yaml:"resource"`
	Max          float64  `yaml:"max"`
	LatencyP99MS float64  `yaml:"latency_p99_ms"`
	From         Duration `yaml:"from"`
	To           Duration `yaml:"to"`
	Policies     []string `yaml:"policies"`
	// Rounds (converge) and Within (no_bounce, guard).
	Rounds int      `yaml:"rounds"`
	Within Duration `yaml:"within"`
	// Policy, Baseline, SpreadBetter and P99Lower (versus).
	Policy       string  `yaml:"policy"`
	Baseline     string  `yaml:"baseline"`
	SpreadBetter float64 `yaml:"spread_better"`
	P99Lower     float64 `yaml:"p99_lower"`
	line         int
}

// Duration is a time.Duration written as "30s", "5m" or a number of seconds
// (internal/units: the one parser configs, job files and scenarios share).
type Duration = units.Duration

// Quantity is a number ≥ 0 that may carry a size suffix: k, K, M, G, T (powers
// of 1000) or Ki, Mi, Gi, Ti (powers of 1024) (internal/units).
type Quantity = units.Quantity

// LoadScenario reads, parses and validates a scenario file.
func LoadScenario(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	return ParseScenario(data, path)
}

// ParseScenario parses and validates a scenario; name is used in messages and its
// directory resolves relative data file paths.
func ParseScenario(data []byte, name string) (*Scenario, error) {
	sc, err := decodeScenario(data, name)
	if err != nil {
		return nil, err
	}
	sc.setDefaults()
	if err := sc.validate(); err != nil {
		return nil, err
	}
	return sc, nil
}

// decodeScenario decodes a scenario or plan file strictly (unknown keys are
// errors naming their line) and keeps its YAML tree for the line numbers of
// later checks; name is used in messages and its directory resolves relative
// data file paths.
func decodeScenario(data []byte, name string) (*Scenario, error) {
	sc := &Scenario{file: name, dir: filepath.Dir(name)}
	if err := yamlerr.Decode(name, data, sc); err != nil {
		return nil, err
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("%s: %v: %w", name, err, interfaces.ErrInvalid)
	}
	sc.root = &root
	return sc, nil
}

// setDefaults fills in what a scenario may leave out.
func (sc *Scenario) setDefaults() {
	if sc.Name == "" {
		sc.Name = strings.TrimSuffix(filepath.Base(sc.file), filepath.Ext(sc.file))
	}
	if sc.Seed == 0 {
		sc.Seed = 1
	}
	if sc.Tick == 0 {
		sc.Tick = Duration(time.Second)
	}
	if sc.ControlInterval == 0 {
		sc.ControlInterval = Duration(30 * time.Second)
	}
	if sc.SampleEvery == 0 {
		sc.SampleEvery = sc.Tick
		if sc.Duration > 0 {
			// About 200 samples per run by default.
			n := int64(sc.Duration) / int64(sc.Tick) / 200
			if n > 1 {
				sc.SampleEvery = Duration(int64(sc.Tick) * n)
			}
		}
	}
	m := &sc.Model
	if m.ServiceMS == 0 {
		m.ServiceMS = 5
	}
	if m.MaxUtil == 0 {
		m.MaxUtil = 0.99
	}
	if m.MoveBandwidth == 0 {
		m.MoveBandwidth = 100e6
	}
	if m.CrossRegionBandwidth == 0 {
		m.CrossRegionBandwidth = m.MoveBandwidth / 4
	}
	if m.MoveOverhead == 0 {
		m.MoveOverhead = Duration(time.Second)
	}
	if m.DetectAfter == 0 {
		m.DetectAfter = Duration(10 * time.Second)
	}
	for i := range sc.Workload.Jobs {
		j := &sc.Workload.Jobs[i]
		if j.Sizes.Dist == "" {
			j.Sizes.Dist = "equal"
		}
		if j.Sizes.Ratio == 0 {
			j.Sizes.Ratio = 20
		}
	}
	if a := sc.Workload.Arrivals; a != nil {
		if a.Format == "" {
			a.Format = "azure"
		}
		if a.Bin == 0 {
			a.Bin = Duration(time.Second)
		}
		if a.Weight == "" {
			a.Weight = "requests"
		}
		if a.Scale == 0 {
			a.Scale = 1
		}
	}
	if r := sc.Workload.Replay; r != nil {
		if r.Job == "" {
			r.Job = "replay"
		}
		if r.Scale == 0 {
			r.Scale = 1
		}
	}
	for i := range sc.Policies {
		p := &sc.Policies[i]
		if p.Integration == "" {
			p.Integration = Decoupled
		}
		if p.Solver == "" {
			if n := p.Tiers[TierRack]; n != "" {
				p.Solver = n
			}
			if n := p.Tiers[interfaces.TierRegion]; n != "" {
				p.Solver = n
			}
		}
		if p.Name == "" {
			p.Name = p.Solver + "/" + p.Integration
		}
		if len(p.Chain) == 0 {
			p.Chain = []string{interfaces.TierGlobal, interfaces.TierRegion, interfaces.TierHost}
		}
		if p.GlobalSolver == "" {
			p.GlobalSolver = p.Solver
		}
		if p.Reserve == 0 {
			p.Reserve = 0.1
		}
	}
	for i := range sc.Assertions {
		a := &sc.Assertions[i]
		if a.To == 0 {
			a.To = sc.Duration
		}
		a.line = sc.line("assertions", i)
	}
}

// line returns the line of the node at path (keys and indexes) in the scenario
// file, or of the deepest node of the path that exists; 0 when unknown.
func (sc *Scenario) line(path ...any) int {
	if sc.root == nil || len(sc.root.Content) == 0 {
		return 0
	}
	n := sc.root.Content[0]
	best := n.Line
	for _, p := range path {
		var next *yaml.Node
		switch k := p.(type) {
		case string:
			if n.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					if n.Content[i].Value == k {
						next = n.Content[i+1]
						break
					}
				}
			}
		case int:
			if n.Kind == yaml.SequenceNode && k >= 0 && k < len(n.Content) {
				next = n.Content[k]
			}
		}
		if next == nil {
			break
		}
		n, best = next, next.Line
	}
	return best
}

// errAt formats a validation error naming the file, the line of path and the key.
func (sc *Scenario) errAt(key string, path []any, rule string, args ...any) error {
	msg := fmt.Sprintf(rule, args...)
	return fmt.Errorf("%s:%d: %s: %s: %w", sc.file, sc.line(path...), key, msg, interfaces.ErrInvalid)
}

func keyOf(path []any) string { return yamlerr.Key(path) }

func (sc *Scenario) fail(path []any, rule string, args ...any) error {
	return sc.errAt(keyOf(path), path, rule, args...)
}

func p(parts ...any) []any { return parts }

// Size limits of a scenario: far above what the simulator runs in minutes
// (docs/benchmarks.md), and low enough that a typo fails validation instead of
// exhausting memory.
const (
	MaxHosts          = 1_000_000
	MaxShards         = 10_000_000
	MaxRacksPerRegion = 10_000
)

// maxBytes bounds byte counts (state sizes, byte budgets): 4 EiB, far from
// int64's limit, so sums of a few stay in range.
const maxBytes = 1 << 62

// checkBytes checks a byte count that becomes an int64.
func (sc *Scenario) checkBytes(path []any, q Quantity) error {
	if q > maxBytes {
		return sc.fail(path, "must be at most 4Ei bytes (got %v)", float64(q))
	}
	return nil
}

// maxQuantity bounds a load or capacity in a scenario: a region's capacity is
// the sum of up to maxHosts hosts, and must stay within interfaces.MaxQuantity.
const maxQuantity = interfaces.MaxQuantity / MaxHosts

func (sc *Scenario) checkLoad(path []any, l LoadSpec, capacity bool) error {
	for _, f := range []struct {
		k string
		v Quantity
	}{{"cpu", l.CPU}, {"mem", l.Mem}, {"net", l.Net}, {"tasks", l.Tasks}} {
		v := float64(f.v)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return sc.fail(append(path, f.k), "must be a finite number (got %v)", v)
		}
		if v < 0 {
			return sc.fail(append(path, f.k), "must be ≥ 0 (got %v)", v)
		}
		if v > maxQuantity {
			return sc.fail(append(path, f.k), "must be at most 1e18 (got %v)", v)
		}
	}
	if capacity && l.Load().IsZero() {
		return sc.fail(path, "capacity must be > 0 in at least one of cpu, mem, net, tasks")
	}
	return nil
}

func (sc *Scenario) checkID(path []any, id string) error {
	if err := interfaces.ValidateID(keyOf(path), id); err != nil {
		var fe *interfaces.FieldError
		if errors.As(err, &fe) {
			return sc.fail(path, "%s", strings.TrimPrefix(fe.Error(), keyOf(path)+": "))
		}
		return sc.fail(path, "%v", err)
	}
	return nil
}

func (sc *Scenario) checkFraction(path []any, v float64, lo, hi float64) error {
	if math.IsNaN(v) || v < lo || v > hi {
		return sc.fail(path, "must be between %v and %v (got %v)", lo, hi, v)
	}
	return nil
}

// hostNames returns every host name the topology defines (generated and listed)
// with its region, in order; used to check events and constraints.
func (sc *Scenario) hostNames() (hosts map[string]string, regions map[string]bool) {
	hosts, regions = map[string]string{}, map[string]bool{}
	for _, r := range sc.Topology.Regions {
		regions[r.Name] = true
		for h := 0; h < r.Hosts; h++ {
			hosts[hostName(r.Name, h)] = r.Name
		}
	}
	for _, h := range sc.Topology.Hosts {
		regions[h.Region] = true
		hosts[h.Name] = h.Region
	}
	return hosts, regions
}

func hostName(region string, i int) string { return fmt.Sprintf("%s-h%03d", region, i) }

// rackName is the name of rack k of a region in a rack chain.
func rackName(region string, k int) string { return fmt.Sprintf("%s-r%d", region, k) }

// validate checks everything that can be checked without running, and names the
// line and key of the first problem.
func (sc *Scenario) validate() error {
	if path, v, ok := yamlerr.NonFinite(sc); ok {
		return sc.fail(path, "must be a finite number (got %v)", v)
	}
	if sc.Duration <= 0 {
		return sc.fail(p("duration"), "is required and must be > 0")
	}
	if sc.Tick <= 0 {
		return sc.fail(p("tick"), "must be > 0")
	}
	if sc.Tick > sc.Duration {
		return sc.fail(p("tick"), "must not be longer than duration")
	}
	if sc.ControlInterval < sc.Tick {
		return sc.fail(p("control_interval"), "must be ≥ tick")
	}
	if sc.SampleEvery < sc.Tick {
		return sc.fail(p("sample_every"), "must be ≥ tick")
	}
	if ticks := int64(sc.Duration) / int64(sc.Tick); ticks > 1e8 {
		return sc.fail(p("duration"), "gives %d ticks; at most 1e8 allowed (raise tick)", ticks)
	}
	m := sc.Model
	if m.ServiceMS <= 0 || math.IsInf(m.ServiceMS, 0) {
		return sc.fail(p("model", "service_ms"), "must be > 0")
	}
	if err := sc.checkFraction(p("model", "max_util"), m.MaxUtil, 0.01, 0.9999); err != nil {
		return err
	}
	if m.MoveBandwidth <= 0 {
		return sc.fail(p("model", "move_bandwidth"), "must be > 0")
	}
	if m.CrossRegionBandwidth <= 0 {
		return sc.fail(p("model", "cross_region_bandwidth"), "must be > 0")
	}
	if m.MoveOverhead < 0 || m.DetectAfter < 0 {
		return sc.fail(p("model"), "move_overhead and detect_after must be ≥ 0")
	}
	if m.Trigger != 0 && (math.IsNaN(m.Trigger) || m.Trigger < 1) {
		return sc.fail(p("model", "trigger"), "must be ≥ 1 (a max/LB ratio; deprecated, see control.target_imbalance; got %v)", m.Trigger)
	}
	if m.Target != 0 {
		if err := sc.checkFraction(p("model", "target"), m.Target, 0.01, 1); err != nil {
			return err
		}
	}
	if err := sc.checkFraction(p("model", "floor"), m.Floor, 0, 1); err != nil {
		return err
	}
	if m.MoveBudget != 0 {
		return sc.fail(p("model", "move_budget"), "is no longer supported: the simulator runs the daemons' controller (tiers/control), whose PI budget is bounded by control.min_moves, max_moves and max_bytes")
	}

	// Topology. totalHosts and totalShards count what the file asks for
	// (regions' hosts, listed hosts, add_hosts events; jobs' shards) against
	// MaxHosts and MaxShards.
	totalHosts, totalShards := 0, 0
	if len(sc.Topology.Regions) == 0 && len(sc.Topology.Hosts) == 0 {
		return sc.fail(p("topology"), "needs regions or hosts")
	}
	seenRegion := map[string]bool{}
	seenHost := map[string]bool{}
	for i, r := range sc.Topology.Regions {
		path := p("topology", "regions", i)
		if err := sc.checkID(append(path, "name"), r.Name); err != nil {
			return err
		}
		if seenRegion[r.Name] {
			return sc.fail(append(path, "name"), "region %q is defined twice", r.Name)
		}
		seenRegion[r.Name] = true
		if r.Hosts <= 0 {
			return sc.fail(append(path, "hosts"), "must be > 0 (got %d)", r.Hosts)
		}
		if totalHosts += r.Hosts; r.Hosts > MaxHosts || totalHosts > MaxHosts {
			return sc.fail(append(path, "hosts"), "the topology may hold at most %d hosts (this brings it to %d)", MaxHosts, totalHosts)
		}
		if err := sc.checkFraction(append(path, "jitter"), r.Jitter, 0, 0.9); err != nil {
			return err
		}
		if len(r.Classes) == 0 {
			if err := sc.checkLoad(append(path, "capacity"), r.Capacity, true); err != nil {
				return err
			}
		}
		for c, cl := range r.Classes {
			cp := append(append([]any(nil), path...), "classes", c)
			if cl.Weight <= 0 {
				return sc.fail(append(cp, "weight"), "must be > 0")
			}
			if err := sc.checkLoad(append(cp, "capacity"), cl.Capacity, true); err != nil {
				return err
			}
		}
		for h := 0; h < r.Hosts; h++ {
			seenHost[hostName(r.Name, h)] = true
		}
	}
	for i, h := range sc.Topology.Hosts {
		path := p("topology", "hosts", i)
		if totalHosts++; totalHosts > MaxHosts {
			return sc.fail(path, "the topology may hold at most %d hosts", MaxHosts)
		}
		if err := sc.checkID(append(path, "name"), h.Name); err != nil {
			return err
		}
		if seenHost[h.Name] {
			return sc.fail(append(path, "name"), "host %q is defined twice", h.Name)
		}
		seenHost[h.Name] = true
		if err := sc.checkID(append(path, "region"), h.Region); err != nil {
			return err
		}
		if err := sc.checkLoad(append(path, "capacity"), h.Capacity, true); err != nil {
			return err
		}
	}
	if n := sc.Topology.RacksPerRegion; n < 0 || n > MaxRacksPerRegion {
		return sc.fail(p("topology", "racks_per_region"), "must be in [0, %d] (got %d)", MaxRacksPerRegion, n)
	}
	hosts, regions := sc.hostNames()
	if n := sc.Topology.RacksPerRegion; n*len(regions) > MaxHosts {
		return sc.fail(p("topology", "racks_per_region"), "gives %d racks over %d regions; at most %d in all", n*len(regions), len(regions), MaxHosts)
	}

	// Workload.
	w := sc.Workload
	if len(w.Jobs) == 0 && w.Replay == nil {
		return sc.fail(p("workload"), "needs jobs or a replay")
	}
	jobs := map[string]bool{}
	for i, j := range w.Jobs {
		path := p("workload", "jobs", i)
		if err := sc.checkID(append(path, "name"), j.Name); err != nil {
			return err
		}
		if jobs[j.Name] {
			return sc.fail(append(path, "name"), "job %q is defined twice", j.Name)
		}
		jobs[j.Name] = true
		if j.Shards <= 0 {
			return sc.fail(append(path, "shards"), "must be > 0 (got %d)", j.Shards)
		}
		if totalShards += j.Shards; j.Shards > MaxShards || totalShards > MaxShards {
			return sc.fail(append(path, "shards"), "the workload may hold at most %d shards (this brings it to %d)", MaxShards, totalShards)
		}
		if err := sc.checkLoad(append(path, "load"), j.Load, false); err != nil {
			return err
		}
		if j.InputRate < 0 || math.IsNaN(j.InputRate) || math.IsInf(j.InputRate, 0) {
			return sc.fail(append(path, "input_rate"), "must be a finite number ≥ 0 (got %v)", j.InputRate)
		}
		if err := sc.checkBytes(append(path, "state_bytes"), j.StateBytes); err != nil {
			return err
		}
		if j.StateBytes < 0 {
			return sc.fail(append(path, "state_bytes"), "must be ≥ 0")
		}
		switch j.Sizes.Dist {
		case "equal", "uniform", "zipf":
		default:
			return sc.fail(append(path, "sizes", "dist"), "must be equal, uniform or zipf (got %q)", j.Sizes.Dist)
		}
		if j.Sizes.Ratio < 1 {
			return sc.fail(append(path, "sizes", "ratio"), "must be ≥ 1 (got %v)", j.Sizes.Ratio)
		}
		if j.Sizes.S < 0 {
			return sc.fail(append(path, "sizes", "s"), "must be ≥ 0")
		}
		if j.Arrive < 0 || j.Leave < 0 || (j.Leave > 0 && j.Leave <= j.Arrive) {
			return sc.fail(append(path, "leave"), "must be 0 (never) or after arrive")
		}
		if j.LatencySLO < 0 {
			return sc.fail(append(path, "latency_slo"), "must be ≥ 0")
		}
		for k, r := range j.Regions {
			if !regions[r] {
				return sc.fail(append(path, "regions", k), "region %q is not in the topology", r)
			}
		}
		if j.Pinned != "" && hosts[j.Pinned] == "" {
			return sc.fail(append(path, "pinned"), "host %q is not in the topology", j.Pinned)
		}
		if j.MaxPerHost < 0 || (j.MaxPerHost > 0 && j.Spread == "") {
			return sc.fail(append(path, "max_per_child"), "must be ≥ 0 and needs anti_affinity")
		}
	}
	if r := w.Replay; r != nil {
		if r.File == "" {
			return sc.fail(p("workload", "replay", "file"), "is required")
		}
		if err := sc.checkID(p("workload", "replay", "job"), r.Job); err != nil {
			return err
		}
		if jobs[r.Job] {
			return sc.fail(p("workload", "replay", "job"), "job %q is also defined in workload.jobs", r.Job)
		}
		jobs[r.Job] = true
		if r.Scale <= 0 {
			return sc.fail(p("workload", "replay", "scale"), "must be > 0")
		}
		if err := sc.checkBytes(p("workload", "replay", "state_bytes"), r.StateBytes); err != nil {
			return err
		}
		if r.StateBytes < 0 {
			return sc.fail(p("workload", "replay", "state_bytes"), "must be ≥ 0")
		}
	}
	if d := w.Diurnal; d != nil {
		if err := sc.checkFraction(p("workload", "diurnal", "amplitude"), d.Amplitude, 0, 1); err != nil {
			return err
		}
		if d.Period <= 0 {
			return sc.fail(p("workload", "diurnal", "period"), "must be > 0")
		}
	}
	checkJob := func(path []any, job string) error {
		if job != "" && !jobs[job] {
			return sc.fail(path, "job %q is not in the workload", job)
		}
		return nil
	}
	for i, s := range w.Steps {
		if err := checkJob(p("workload", "steps", i, "job"), s.Job); err != nil {
			return err
		}
		if s.Factor < 0 || s.At < 0 {
			return sc.fail(p("workload", "steps", i), "factor and at must be ≥ 0")
		}
		if math.IsNaN(s.Fraction) || s.Fraction < 0 || s.Fraction > 1 {
			return sc.fail(p("workload", "steps", i, "fraction"), "must be in [0, 1] (0 or 1: every shard of the job; got %v)", s.Fraction)
		}
	}
	for i, s := range w.Spikes {
		if err := checkJob(p("workload", "spikes", i, "job"), s.Job); err != nil {
			return err
		}
		if s.Factor < 0 || s.At < 0 || s.For <= 0 {
			return sc.fail(p("workload", "spikes", i), "factor and at must be ≥ 0, for > 0")
		}
	}
	for i, h := range w.Hot {
		path := p("workload", "hot", i)
		if err := checkJob(append(path, "job"), h.Job); err != nil {
			return err
		}
		if h.Factor < 0 || h.At < 0 || h.For < 0 {
			return sc.fail(path, "factor, at and for must be ≥ 0")
		}
		if len(h.Shards) == 0 && (h.Count <= 0 || h.Job == "") {
			return sc.fail(path, "needs shards, or job and count > 0")
		}
	}
	if a := w.Arrivals; a != nil {
		path := p("workload", "arrivals")
		if a.File == "" {
			return sc.fail(append(path, "file"), "is required")
		}
		if a.Format != "azure" && a.Format != "times" {
			return sc.fail(append(path, "format"), "must be azure or times (got %q)", a.Format)
		}
		if a.Weight != "requests" && a.Weight != "tokens" {
			return sc.fail(append(path, "weight"), "must be requests or tokens (got %q)", a.Weight)
		}
		if err := checkJob(append(path, "job"), a.Job); err != nil {
			return err
		}
		if a.Bin <= 0 || a.Offset < 0 || a.Scale <= 0 {
			return sc.fail(path, "bin and scale must be > 0, offset ≥ 0")
		}
		// The series is read at offset + t × scale for t up to duration: keep
		// that inside time.Duration's range.
		if end := float64(a.Offset) + float64(sc.Duration)*a.Scale; end > math.MaxInt64/2 {
			return sc.fail(path, "offset + duration × scale must stay within 146 years (got %v + %v × %v)", a.Offset.D(), sc.Duration.D(), a.Scale)
		}
	}

	// Events. An unknown host or region is named with some of the known ones.
	notHost, notRegion := "is not in the topology", "is not in the topology"
	if sc.live != nil {
		notHost, notRegion = "is not a host of the live cluster", "is not a region of the live cluster"
	}
	unknownHost := func(path []any, h string) error {
		return sc.fail(append(path, "host"), "host %q %s (hosts: %s)", h, notHost, someNames(hosts))
	}
	unknownRegion := func(path []any, r string) error {
		return sc.fail(append(path, "region"), "region %q %s (regions: %s)", r, notRegion, someNames(regions))
	}
	for i, e := range sc.Events {
		path := p("events", i)
		if e.At < 0 || e.At > sc.Duration {
			return sc.fail(append(path, "at"), "must be within [0, duration] (got %v)", e.At.D())
		}
		switch e.Kind {
		case EventHostFail, EventHostRecover, EventDrain:
			if e.Host == "" {
				return sc.fail(append(path, "host"), "is required for %s", e.Kind)
			}
			if hosts[e.Host] == "" {
				return unknownHost(path, e.Host)
			}
		case EventRegionLoss, EventRegionBack:
			if !regions[e.Region] {
				return unknownRegion(path, e.Region)
			}
		case EventAddHosts:
			if !regions[e.Region] {
				return unknownRegion(path, e.Region)
			}
			if e.Count <= 0 {
				return sc.fail(append(path, "count"), "must be > 0")
			}
			if totalHosts += e.Count; e.Count > MaxHosts || totalHosts > MaxHosts {
				return sc.fail(append(path, "count"), "the topology may hold at most %d hosts (this brings it to %d)", MaxHosts, totalHosts)
			}
			if err := sc.checkLoad(append(path, "capacity"), e.Capacity, true); err != nil {
				return err
			}
		case EventHostSlow:
			if hosts[e.Host] == "" {
				return unknownHost(path, e.Host)
			}
			if !(e.Factor > 0 && e.Factor <= 1) {
				return sc.fail(append(path, "factor"), "must be in (0, 1] (got %v)", e.Factor)
			}
		case EventAckMassFailure:
			if !sc.instanceKnown(e.Instance) {
				return sc.fail(append(path, "instance"), "tier instance %q is not in the topology (want global, a region, or a rack <region>-r<k> with racks_per_region)", e.Instance)
			}
		default:
			return sc.fail(append(path, "kind"), "unknown event kind %q (known: host_fail, host_recover, region_loss, region_recover, drain, add_hosts, ack_mass_failure, host_slow)", e.Kind)
		}
	}

	// Policies.
	if len(sc.Policies) == 0 {
		return sc.fail(p("policies"), "needs at least one policy")
	}
	names := map[string]bool{}
	for i, pol := range sc.Policies {
		path := p("policies", i)
		if names[pol.Name] {
			return sc.fail(append(path, "name"), "policy %q is listed twice", pol.Name)
		}
		names[pol.Name] = true
		if err := sc.checkChain(path, pol); err != nil {
			return err
		}
		for _, s := range []struct{ key, name string }{{"solver", pol.Solver}, {"global_solver", pol.GlobalSolver}} {
			if s.name == "" {
				return sc.fail(append(path, s.key), "is required (or tiers.region)")
			}
			if why := policyProblem(s.name); why != "" {
				return sc.fail(append(path, s.key), "%s", why)
			}
			if _, err := newPolicy(s.name, pol.Params); err != nil {
				return sc.fail(append(path, s.key), "%v", err)
			}
		}
		switch pol.Integration {
		case Decoupled, Manual, Collaborative:
		default:
			return sc.fail(append(path, "integration"), "must be decoupled, manual or collaborative (got %q)", pol.Integration)
		}
		if err := sc.checkFraction(append(path, "reserve"), pol.Reserve, 0, 0.9); err != nil {
			return err
		}
		if _, err := pol.NewControlPolicies(); err != nil {
			return sc.fail(append(path, "control_policies"), "%v", err)
		}
		if len(pol.Constraints) > 0 && pol.Integration != Manual {
			return sc.fail(append(path, "constraints"), "operator constraints need integration: manual")
		}
		for k, c := range pol.Constraints {
			cp := append(append([]any(nil), path...), "constraints", k)
			if c.Tier != interfaces.TierGlobal && c.Tier != interfaces.TierRegion {
				return sc.fail(append(cp, "tier"), "must be global or region (got %q)", c.Tier)
			}
			switch c.Kind {
			case "capacity", "avoid", "allowed", "max_moves", "pin":
			default:
				return sc.fail(append(cp, "kind"), "must be capacity, avoid, allowed, pin or max_moves (got %q)", c.Kind)
			}
			if err := checkJob(append(cp, "job"), c.Job); err != nil {
				return err
			}
			for m, ch := range c.Children {
				if c.Tier == interfaces.TierGlobal && !regions[ch] {
					return sc.fail(append(cp, "children", m), "region %q is not in the topology", ch)
				}
				if c.Tier == interfaces.TierRegion && hosts[ch] == "" {
					return sc.fail(append(cp, "children", m), "host %q is not in the topology", ch)
				}
			}
			if err := sc.checkLoad(append(cp, "limit"), c.Limit, false); err != nil {
				return err
			}
			if c.Max < 0 || c.MaxBytes < 0 {
				return sc.fail(cp, "max and max_bytes must be ≥ 0")
			}
			if err := sc.checkBytes(append(cp, "max_bytes"), c.MaxBytes); err != nil {
				return err
			}
			if c.Kind == "pin" && len(c.Children) > 1 {
				return sc.fail(append(cp, "children"), "must name exactly one child for pin (got %d)", len(c.Children))
			}
			if (c.Kind == "avoid" || c.Kind == "allowed" || c.Kind == "pin" || c.Kind == "capacity") && len(c.Children) == 0 {
				return sc.fail(append(cp, "children"), "is required for %s", c.Kind)
			}
		}
	}

	if err := sc.checkControl(); err != nil {
		return err
	}

	// Assertions.
	for i, a := range sc.Assertions {
		path := p("assertions", i)
		switch a.Kind {
		case AssertBalance:
			if _, ok := resourceIndex(a.Resource); !ok {
				return sc.fail(append(path, "resource"), "must be cpu, mem, net or tasks (got %q)", a.Resource)
			}
			if a.Max < 1 {
				return sc.fail(append(path, "max"), "must be ≥ 1 (a max/mean ratio; got %v)", a.Max)
			}
		case AssertSLO:
			if a.LatencyP99MS <= 0 {
				return sc.fail(append(path, "latency_p99_ms"), "must be > 0")
			}
		case AssertSpread:
			if sc.Topology.RacksPerRegion <= 0 {
				return sc.fail(append(path, "kind"), "spread needs topology.racks_per_region > 0")
			}
			if a.Max <= 0 || a.Max > 1 {
				return sc.fail(append(path, "max"), "must be a fraction in (0, 1] (got %v)", a.Max)
			}
		case AssertConverge:
			if _, ok := resourceIndex(a.Resource); !ok {
				return sc.fail(append(path, "resource"), "must be cpu, mem, net or tasks (got %q)", a.Resource)
			}
			if a.Max < 1 {
				return sc.fail(append(path, "max"), "must be ≥ 1 (a max/mean ratio; got %v)", a.Max)
			}
			if a.Rounds < 1 {
				return sc.fail(append(path, "rounds"), "must be ≥ 1 (got %d)", a.Rounds)
			}
		case AssertNoBounce:
			if a.Within < 0 {
				return sc.fail(append(path, "within"), "must be ≥ 0 (0: the policy's control bounce_window)")
			}
			if a.Within == 0 {
				for _, pol := range sc.Policies {
					if sc.ControlConfig(pol).BounceWindow <= 0 {
						return sc.fail(append(path, "within"), "is required: policy %q has no control bounce_window", pol.Name)
					}
				}
			}
		case AssertGuard:
			if a.Within <= 0 {
				return sc.fail(append(path, "within"), "must be > 0 (how soon after from the guard must engage)")
			}
			if a.Max < 0 || a.Max != math.Trunc(a.Max) {
				return sc.fail(append(path, "max"), "must be a whole number of moves ≥ 0 (got %v)", a.Max)
			}
		case AssertVersus:
			if err := sc.checkVersus(path, a, names); err != nil {
				return err
			}
		case AssertSteady, AssertNoLoss:
		default:
			return sc.fail(append(path, "kind"), "unknown assertion %q (known: balance, steady, slo, no_loss, spread, converge, no_bounce, guard, versus)", a.Kind)
		}
		if a.From < 0 || a.To > sc.Duration || a.From >= a.To {
			return sc.fail(path, "window [from, to) must lie within [0, duration] and be non-empty")
		}
		for k, name := range a.Policies {
			if !names[name] {
				return sc.fail(append(path, "policies", k), "policy %q is not in policies", name)
			}
		}
	}
	return nil
}

// instanceKnown reports whether name is a tier instance of the topology:
// global, a region, or (with racks_per_region) a rack <region>-r<k>.
func (sc *Scenario) instanceKnown(name string) bool {
	if name == interfaces.TierGlobal {
		return true
	}
	_, regions := sc.hostNames()
	if regions[name] {
		return true
	}
	for r := range regions {
		for k := 0; k < sc.Topology.RacksPerRegion; k++ {
			if name == rackName(r, k) {
				return true
			}
		}
	}
	return false
}

// resourceIndex maps a built-in resource name to its dense index.
func resourceIndex(r string) (int, bool) {
	for i, x := range interfaces.BuiltinResources {
		if x == r {
			return i, true
		}
	}
	return 0, false
}

// checkChain validates a policy's tier chain and its per-tier policies.
func (sc *Scenario) checkChain(path []any, pol PolicySpec) error {
	cp := append(append([]any(nil), path...), "chain")
	known := map[string]bool{interfaces.TierGlobal: true, interfaces.TierRegion: true, TierRack: true, interfaces.TierHost: true}
	seen := map[string]bool{}
	for k, t := range pol.Chain {
		if !known[t] {
			return sc.fail(append(cp, k), "unknown tier %q (the simulator knows global, region, rack, host)", t)
		}
		if seen[t] {
			return sc.fail(append(cp, k), "tier %q appears twice", t)
		}
		seen[t] = true
	}
	if pol.Chain[0] != interfaces.TierGlobal {
		return sc.fail(append(cp, 0), "the chain must start with global (got %q)", pol.Chain[0])
	}
	if last := len(pol.Chain) - 1; pol.Chain[last] != interfaces.TierHost {
		return sc.fail(append(cp, last), "the chain must end with host (got %q)", pol.Chain[last])
	}
	if len(pol.Chain) < 3 || pol.Chain[1] != interfaces.TierRegion {
		return sc.fail(cp, "the chain must be [global, region, host] or [global, region, rack, host] (got %v)", pol.Chain)
	}
	rack := pol.HasRack()
	if rack && sc.Topology.RacksPerRegion <= 0 {
		return sc.fail(cp, "a chain with rack needs topology.racks_per_region > 0")
	}
	if rack {
		for i, j := range sc.Workload.Jobs {
			if j.Pinned != "" {
				return sc.fail(p("workload", "jobs", i, "pinned"), "pinned jobs are not supported with a rack chain (policy %q)", pol.Name)
			}
		}
	}
	tp := append(append([]any(nil), path...), "tiers")
	for _, t := range slices.Sorted(maps.Keys(pol.Tiers)) {
		if t == interfaces.TierHost || !seen[t] {
			return sc.fail(append(tp, t), "tier %q is not a planning tier of the chain %v", t, pol.Chain)
		}
		name := pol.Tiers[t]
		if why := policyProblem(name); why != "" {
			return sc.fail(append(tp, t), "%s", why)
		}
		if _, err := newPolicy(name, pol.Params); err != nil {
			return sc.fail(append(tp, t), "%v", err)
		}
	}
	return nil
}

// someNames lists up to eight of m's keys, sorted, for an error message.
func someNames[V any](m map[string]V) string {
	names := slices.Sorted(maps.Keys(m))
	if len(names) > 8 {
		names = append(names[:8], "…")
	}
	return strings.Join(names, ", ")
}
