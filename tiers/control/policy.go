package control

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// Control policies (issue 7, deliverable 5) sit beside the controller: where the
// controller decides how much a round may move, a policy notices one kind of
// trouble and says what to do about it, in three steps —
//
//	Detect    symptoms from the round's view and the policy's own history
//	          (a child whose shards process slowly, a shard failing on hosts);
//	Diagnose  which symptoms are confirmed (enough evidence, long enough), each
//	          a Finding with its evidence in words;
//	Resolve   actions: constraints for this round's solve (shards kept off a
//	          child), shards to evict now, shards to quarantine, jobs to
//	          resize, alerts.
//
// Policies are pure and deterministic like the Controller: time comes in the
// input, no clock, no randomness, no I/O. They keep memory between rounds (when
// a symptom was first seen, which children a shard must avoid until when), so
// one goroutine drives a Policies value, once per round, after Controller.Step.
// They are chosen by name from a registry (RegisterPolicy), like tier policies
// and solvers, and configured with string settings validated by their factory.

// Failure is evidence that a shard's process failed on a child: a start that
// failed, or a process that exited on its own. The daemons collect them from the
// children's acks; the simulator can inject them.
type Failure struct {
	Shard interfaces.ShardID
	Child interfaces.ChildID
	At    time.Time
	Error string
}

// PolicyInput is one round's observation for the control policies.
type PolicyInput struct {
	// Now is the time of the round.
	Now time.Time
	// View is the round's view (reports included). Quarantined shards are
	// not in it.
	View *interfaces.View
	// Failures are the process failures observed since the last round.
	Failures []Failure
	// Quarantined maps each quarantined shard to its reason.
	Quarantined map[interfaces.ShardID]string
}

// Symptom is something a policy noticed, not yet confirmed.
type Symptom struct {
	Policy  string             `json:"policy"`
	Subject string             `json:"subject"` // what it is about: "host-2/job-a", a shard, a job
	Child   interfaces.ChildID `json:"child,omitempty"`
	Job     string             `json:"job,omitempty"`
	Shard   interfaces.ShardID `json:"shard,omitempty"`
	// Value is what was measured, Reference what was expected (policy's units).
	Value     float64   `json:"value"`
	Reference float64   `json:"reference"`
	Since     time.Time `json:"since"`
	Evidence  string    `json:"evidence"`
}

// Finding is a diagnosed symptom: Diagnosis names it, Confirmed says whether the
// evidence suffices to act, Action says what Resolve did about it.
type Finding struct {
	Symptom
	Diagnosis string `json:"diagnosis"`
	Confirmed bool   `json:"confirmed"`
	Action    string `json:"action,omitempty"`
}

func (f Finding) String() string {
	s := f.Policy + ": " + f.Diagnosis + ": " + f.Evidence
	if f.Action != "" {
		s += " → " + f.Action
	}
	return s
}

// Eviction asks that a shard leave a child this round, with why.
type Eviction struct {
	Shard  interfaces.ShardID
	From   interfaces.ChildID
	Reason string
}

// QuarantineAction asks that a shard be quarantined (never placed again until
// released) with a reason.
type QuarantineAction struct {
	Shard  interfaces.ShardID
	Reason string
}

// Resize is a job's shard-count change: the recommendation, and whether it is
// to be applied (mode apply) or only reported.
type Resize struct {
	Job     string `json:"job"`
	Current int    `json:"current"`
	Advised int    `json:"advised"`
	// Target is what to apply now: Advised bounded by the step (= Current when
	// only reported or cooling down).
	Target int    `json:"target"`
	Apply  bool   `json:"apply"`
	Reason string `json:"reason"`
}

// Actions are what policies ask the round to do.
type Actions struct {
	// Constraints are added to the solve's view (hard: interfaces.ConstraintAllowed
	// lists every child but the ones the shards must avoid).
	Constraints []interfaces.Constraint
	// Evict lists shards that must move off their child this round.
	Evict      []Eviction
	Quarantine []QuarantineAction
	Resize     []Resize
	Alerts     []Alert
}

func (a *Actions) add(b Actions) {
	a.Constraints = append(a.Constraints, b.Constraints...)
	a.Evict = append(a.Evict, b.Evict...)
	a.Quarantine = append(a.Quarantine, b.Quarantine...)
	a.Resize = append(a.Resize, b.Resize...)
	a.Alerts = append(a.Alerts, b.Alerts...)
}

// Policy is one control policy. Detect, Diagnose and Resolve are called in this
// order once per round by Policies.Run, with the same input.
type Policy interface {
	Name() string
	Detect(in *PolicyInput) []Symptom
	Diagnose(in *PolicyInput, symptoms []Symptom) []Finding
	// Resolve turns the findings into actions and fills each acted-on
	// finding's Action.
	Resolve(in *PolicyInput, findings []Finding) Actions
}

// PolicySettings configure one policy by key (from the daemon's YAML:
// control_policy_config: {straggler: {factor: "2"}}).
type PolicySettings map[string]string

// PolicyFactory builds a policy from its settings; a bad setting is an error
// naming the field (control_policies.<name>.<key>) and the rule.
type PolicyFactory func(s PolicySettings) (Policy, error)

var policies = interfaces.NewRegistry[PolicyFactory]("control policy")

// RegisterPolicy makes a control policy selectable by name. It panics on a
// malformed name, a nil factory or a name taken twice (a programming error, at
// init).
func RegisterPolicy(name string, f PolicyFactory) {
	if f == nil {
		panic("control: RegisterPolicy needs a factory")
	}
	if err := policies.Add(name, f); err != nil {
		panic("control: " + err.Error())
	}
}

// PolicyNames lists the registered control policies, sorted.
func PolicyNames() []string { return policies.Names() }

// DefaultPolicies is the default selection: straggler and doctor act, autoscale
// only reports (its default mode).
func DefaultPolicies() []string { return []string{PolicyStraggler, PolicyDoctor, PolicyAutoscale} }

// Built-in policy names.
const (
	PolicyStraggler = "straggler"
	PolicyDoctor    = "doctor"
	PolicyAutoscale = "autoscale"
)

func init() {
	RegisterPolicy(PolicyStraggler, newStraggler)
	RegisterPolicy(PolicyDoctor, newDoctor)
	RegisterPolicy(PolicyAutoscale, newAutoscale)
}

// Policies runs the selected control policies in order.
type Policies struct {
	list []Policy
	last []Finding
}

// NewPolicies builds the named policies with their settings. An unknown name, a
// name given twice, settings for a policy that is not selected, or a bad
// setting is an error naming the field.
func NewPolicies(names []string, settings map[string]PolicySettings) (*Policies, error) {
	ps := &Policies{}
	seen := map[string]bool{}
	for i, n := range names {
		f, err := policies.Get(n)
		if err != nil {
			return nil, &interfaces.FieldError{Field: fmt.Sprintf("control_policies[%d]", i),
				Rule: "must be a known control policy (" + strings.Join(PolicyNames(), ", ") + ")", Value: n}
		}
		if seen[n] {
			return nil, &interfaces.FieldError{Field: fmt.Sprintf("control_policies[%d]", i), Rule: "must not repeat a policy", Value: n}
		}
		seen[n] = true
		p, err := f(settings[n])
		if err != nil {
			return nil, err
		}
		ps.list = append(ps.list, p)
	}
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !seen[k] {
			return nil, &interfaces.FieldError{Field: "control_policy_config." + k, Rule: "configures a policy that is not in control_policies", Value: k}
		}
	}
	return ps, nil
}

// Names returns the policies' names in order.
func (ps *Policies) Names() []string {
	out := make([]string, len(ps.list))
	for i, p := range ps.list {
		out[i] = p.Name()
	}
	return out
}

// Outcome is what a round of policies found and asks for.
type Outcome struct {
	Findings []Finding
	Actions  Actions
}

// Run runs every policy's detect → diagnose → resolve on in. Bad input (no
// view, no time) is an error naming the field.
func (ps *Policies) Run(in PolicyInput) (Outcome, error) {
	if in.View == nil {
		return Outcome{}, invalidf("policy_input.view", "is required", "nil")
	}
	if in.Now.IsZero() {
		return Outcome{}, invalidf("policy_input.now", "is required", "zero time")
	}
	for i, f := range in.Failures {
		if f.Shard == "" || f.Child == "" || f.At.IsZero() {
			return Outcome{}, invalidf(fmt.Sprintf("policy_input.failures[%d]", i), "needs shard, child and time", fmt.Sprintf("%+v", f))
		}
	}
	var out Outcome
	for _, p := range ps.list {
		s := p.Detect(&in)
		f := p.Diagnose(&in, s)
		a := p.Resolve(&in, f)
		out.Findings = append(out.Findings, f...)
		out.Actions.add(a)
	}
	ps.last = out.Findings
	return out, nil
}

// Last returns the findings of the last round (a copy).
func (ps *Policies) Last() []Finding { return append([]Finding(nil), ps.last...) }

// Merge folds the policies' actions into the round's decision: their
// constraints join the decision's, and shards to evict make the round an
// emergency round for them (only they, and the shards the controller already
// evacuates, move; no move budget), unless the mass-failure guard holds every
// move. The record says why.
func (o *Outcome) Merge(d *Decision) {
	d.Constraints = append(d.Constraints, o.Actions.Constraints...)
	for _, a := range o.Actions.Alerts {
		d.Alerts = append(d.Alerts, a)
		d.Record.Alerts = append(d.Record.Alerts, a.String())
	}
	if len(o.Actions.Evict) == 0 || d.Record.Guard {
		return
	}
	have := map[interfaces.ShardID]bool{}
	for _, id := range d.Evacuate {
		have[id] = true
	}
	n := 0
	for _, e := range o.Actions.Evict {
		if !have[e.Shard] {
			have[e.Shard] = true
			d.Evacuate = append(d.Evacuate, e.Shard)
			n++
		}
	}
	if d.Mode != ModeEmergency {
		// The periodic budget does not apply to an emergency round.
		keep := d.Constraints[:0]
		for _, c := range d.Constraints {
			if c.Kind != interfaces.ConstraintMaxMoves {
				keep = append(keep, c)
			}
		}
		d.Constraints = keep
		d.MaxMoves, d.MaxBytes = 0, 0
		d.Record.Why = fmt.Sprintf("control policies evict %d shards (was %s: %s)", n, d.Mode, d.Record.Why)
		d.Mode = ModeEmergency
		d.Record.Mode = d.Mode.String()
	} else {
		d.Record.Why += fmt.Sprintf("; control policies evict %d shards", n)
	}
	d.Record.Evacuate = len(d.Evacuate)
}

// Merge is Outcome.Merge for the controller's own decision: after o is merged
// into d (the decision Step just returned), the controller's pending copy and
// its round record are amended too, so that Observe accepts the moves of an
// evicting round and remembers them (anti-bounce, cooldown) and History shows
// the round as it ran.
func (c *Controller) Merge(d *Decision, o *Outcome) {
	o.Merge(d)
	if c.pending == nil || c.pending.Round != d.Round {
		return
	}
	*c.pending = *d
	if n := len(c.history); n > 0 && c.history[n-1].Round == d.Round {
		c.history[n-1] = d.Record
	}
}

// settings reads a policy's string settings with validation.
type settings struct {
	policy string
	s      PolicySettings
	used   map[string]bool
	err    error
}

func newSettings(policy string, s PolicySettings) *settings {
	return &settings{policy: policy, s: s, used: map[string]bool{}}
}

func (r *settings) fail(key, rule, v string) {
	if r.err == nil {
		r.err = &interfaces.FieldError{Field: "control_policy_config." + r.policy + "." + key, Rule: rule, Value: v}
	}
}

func (r *settings) float(key string, def float64, ok func(float64) bool, rule string) float64 {
	r.used[key] = true
	v, has := r.s[key]
	if !has {
		return def
	}
	x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || !ok(x) {
		r.fail(key, rule, v)
		return def
	}
	return x
}

func (r *settings) int(key string, def int, min int) int {
	r.used[key] = true
	v, has := r.s[key]
	if !has {
		return def
	}
	x, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || x < min {
		r.fail(key, fmt.Sprintf("must be an integer ≥ %d", min), v)
		return def
	}
	return x
}

func (r *settings) dur(key string, def time.Duration) time.Duration {
	r.used[key] = true
	v, has := r.s[key]
	if !has {
		return def
	}
	x, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || x < 0 {
		r.fail(key, "must be a duration ≥ 0 (e.g. 30s, 10m)", v)
		return def
	}
	return x
}

func (r *settings) oneOf(key, def string, allowed ...string) string {
	r.used[key] = true
	v, has := r.s[key]
	if !has {
		return def
	}
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	r.fail(key, "must be one of "+strings.Join(allowed, ", "), v)
	return def
}

// done reports the first bad value, or a key the policy does not know.
func (r *settings) done() error {
	if r.err != nil {
		return r.err
	}
	keys := make([]string, 0, len(r.s))
	for k := range r.s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !r.used[k] {
			known := make([]string, 0, len(r.used))
			for u := range r.used {
				known = append(known, u)
			}
			sort.Strings(known)
			return &interfaces.FieldError{Field: "control_policy_config." + r.policy + "." + k, Rule: "is not a setting of " + r.policy + " (known: " + strings.Join(known, ", ") + ")", Value: r.s[k]}
		}
	}
	return nil
}

// effectiveOwners maps each placed shard of v to its effective child (in-flight moves
// count as done) and says which shards are in flight.
func effectiveOwners(v *interfaces.View) (map[interfaces.ShardID]interfaces.ChildID, map[interfaces.ShardID]bool) {
	own := make(map[interfaces.ShardID]interfaces.ChildID, len(v.Assignments))
	for _, a := range v.Assignments {
		own[a.Shard] = a.Child
	}
	fl := make(map[interfaces.ShardID]bool, len(v.InFlight))
	for _, m := range v.InFlight {
		own[m.Shard] = m.To
		fl[m.Shard] = true
	}
	return own, fl
}

// allBut lists the children of v except the excluded ones, in view order.
func allBut(v *interfaces.View, ex map[interfaces.ChildID]bool) []interfaces.ChildID {
	var out []interfaces.ChildID
	for _, ch := range v.Children {
		if !ex[ch.ID] {
			out = append(out, ch.ID)
		}
	}
	return out
}

// canLeave reports whether some active child outside ex admits s under its own
// rules (pin, allowed list, labels): evicting a shard that cannot go anywhere
// else would only make the solve infeasible for it.
func canLeave(v *interfaces.View, s *interfaces.Shard, ex map[interfaces.ChildID]bool) bool {
	for i := range v.Children {
		ch := &v.Children[i]
		if !ex[ch.ID] && ch.State == interfaces.ChildActive && s.Constraints.Excludes(ch) == "" {
			return true
		}
	}
	return false
}
