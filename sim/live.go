package sim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/strata-sched/strata/interfaces"
)

// Planning against a live cluster ("strata plan --scenario FILE"): the cluster's
// hosts, shards and current assignment, read through its Admin API, are the
// topology, the workload and the starting point of the run; the plan file adds
// only what the operator asks about — events, load changes on the running jobs,
// policies, the run length and assertions.

// LiveHost is a host of a live cluster as its region sees it.
type LiveHost struct {
	Name     string
	Region   string
	Capacity interfaces.Load
	Labels   map[string]string
	State    interfaces.ChildState
}

// LiveShard is a shard of a live cluster and where it is: its region and its
// host, "" where it is not placed at that level. A shard in flight counts as
// already at its destination. Measured is its load as its host last reported
// it (zero when not reported): as in the tiers' control loop, each dimension
// measured > 0 replaces the declared one in Shard.Load.
type LiveShard struct {
	Shard    interfaces.Shard
	Region   string
	Host     string
	Measured interfaces.Load
}

// LiveState is what a plan starts from: every host and shard of the cluster and
// the current assignment, and the policies its tiers run (used when the plan
// file lists none).
type LiveState struct {
	Hosts        []LiveHost
	Shards       []LiveShard
	GlobalPolicy string
	RegionPolicy string
}

// LivePolicy is the name of the policy a plan file without policies gets: the
// cluster's own global and region policies, collaborative integration.
const LivePolicy = "live"

// liveState is a checked LiveState with its jobs, as a scenario carries it.
type liveState struct {
	hosts   []LiveHost
	shards  []LiveShard
	jobs    []string
	regions map[string]bool
}

// check validates the live state: unique, valid host names with a region and a
// capacity; unique shards whose host is a known host of their region.
func (l *LiveState) check() (*liveState, error) {
	ls := &liveState{hosts: l.Hosts, shards: make([]LiveShard, len(l.Shards)), regions: map[string]bool{}}
	if len(l.Hosts) == 0 {
		return nil, fmt.Errorf("live state: the cluster has no hosts: %w", interfaces.ErrInvalid)
	}
	hostRegion := make(map[string]string, len(l.Hosts))
	for i, h := range l.Hosts {
		if err := interfaces.ValidateID(fmt.Sprintf("live state: hosts[%d].name", i), h.Name); err != nil {
			return nil, err
		}
		if err := interfaces.ValidateID(fmt.Sprintf("live state: host %s: region", h.Name), h.Region); err != nil {
			return nil, err
		}
		if _, dup := hostRegion[h.Name]; dup {
			return nil, fmt.Errorf("live state: host %q appears twice: %w", h.Name, interfaces.ErrInvalid)
		}
		if err := interfaces.ValidateLoad("live state: host "+h.Name+": capacity", h.Capacity); err != nil {
			return nil, err
		}
		if h.Capacity.IsZero() {
			return nil, fmt.Errorf("live state: host %s: capacity is zero (has it reported yet?): %w", h.Name, interfaces.ErrInvalid)
		}
		hostRegion[h.Name] = h.Region
		ls.regions[h.Region] = true
	}
	seen := make(map[interfaces.ShardID]bool, len(l.Shards))
	jobs := map[string]bool{}
	for i, s := range l.Shards {
		if err := interfaces.ValidateShard(s.Shard); err != nil {
			return nil, fmt.Errorf("live state: shards[%d]: %w", i, err)
		}
		if err := interfaces.ValidateLoad(fmt.Sprintf("live state: shard %s: measured", s.Shard.ID), s.Measured); err != nil {
			return nil, err
		}
		if seen[s.Shard.ID] {
			return nil, fmt.Errorf("live state: shard %q appears twice: %w", s.Shard.ID, interfaces.ErrInvalid)
		}
		seen[s.Shard.ID] = true
		if s.Host != "" {
			r, ok := hostRegion[s.Host]
			if !ok {
				return nil, fmt.Errorf("live state: shard %s: host %q is not a host of the cluster: %w", s.Shard.ID, s.Host, interfaces.ErrInvalid)
			}
			if s.Region != "" && s.Region != r {
				return nil, fmt.Errorf("live state: shard %s: host %s is in region %s, not %s: %w", s.Shard.ID, s.Host, r, s.Region, interfaces.ErrInvalid)
			}
			s.Region = r
		}
		if !ls.regions[s.Region] {
			// Placed on a region without hosts (or nowhere): the run places it.
			s.Region = ""
		}
		ls.shards[i] = s
		if !jobs[s.Shard.Job] {
			jobs[s.Shard.Job] = true
			ls.jobs = append(ls.jobs, s.Shard.Job)
		}
	}
	return ls, nil
}

// buildShards adds the live cluster's jobs and shards to w (in place of the
// generated workload). Constraints are split by tier: allowed regions and a
// pinned host's region for the global tier; the rest for the region tier.
func (l *liveState) buildShards(w *world) {
	job := make(map[string]int32, len(l.jobs))
	for _, name := range l.jobs {
		job[name] = int32(len(w.jobName))
		w.jobName = append(w.jobName, name)
		w.jobArrive = append(w.jobArrive, 0)
		w.jobLeave = append(w.jobLeave, 0)
		w.jobSLO = append(w.jobSLO, 0)
	}
	hostRegion := make(map[string]string, len(l.hosts))
	for _, h := range l.hosts {
		hostRegion[h.Name] = h.Region
	}
	for _, s := range l.shards {
		sh := s.Shard
		j := job[sh.Job]
		if sh.LatencySLO > w.jobSLO[j] {
			w.jobSLO[j] = sh.LatencySLO
		}
		c := sh.Constraints
		var g interfaces.ShardConstraints
		r := interfaces.ShardConstraints{Labels: c.Labels, AntiAffinity: c.AntiAffinity, MaxPerChild: c.MaxPerChild}
		for _, a := range c.Allowed {
			if l.regions[string(a)] {
				g.Allowed = append(g.Allowed, a)
			} else if hostRegion[string(a)] != "" {
				r.Allowed = append(r.Allowed, a)
			}
		}
		if reg := hostRegion[string(c.Pinned)]; reg != "" {
			r.Pinned = c.Pinned
			g.Allowed = []interfaces.ChildID{interfaces.ChildID(reg)}
		}
		w.addShard(sh.ID, j, vec(s.load()), sh.InputRate, sh.StateBytes, g, r)
	}
}

// load is the shard's declared load with the measured dimensions (> 0) in
// place of the declared ones.
func (s LiveShard) load() interfaces.Load { return s.Shard.Load.WithMeasured(s.Measured) }

// place starts the run from the live cluster's assignment and host states. A
// host the live cluster has declared failed starts declared failed (its region
// tier's next round re-places its shards), not as a host that has just failed
// (silent, then within its grace, perhaps held by the mass-failure guard).
func (l *liveState) place(e *engine) {
	w := e.w
	hosts := make(map[string]int32, len(w.hostName))
	for i, n := range w.hostName {
		hosts[n] = int32(i)
	}
	regions := make(map[string]int32, len(w.regionName))
	for i, n := range w.regionName {
		regions[n] = int32(i)
	}
	e.resizeHosts()
	for _, h := range l.hosts {
		i := hosts[h.Name]
		w.hostState[i] = h.State
		e.hostDeclared[i] = h.State == interfaces.ChildFailed
	}
	for i, s := range l.shards {
		w.active[i] = true
		if r, ok := regions[s.Region]; ok && s.Region != "" {
			e.region_[i], e.epochR[i] = r, 1
		}
		if h, ok := hosts[s.Host]; ok && s.Host != "" {
			e.host[i], e.epochH[i] = h, 1
		}
	}
	e.dirty = true
}

// LoadPlan reads a plan file and returns the scenario it makes with the live
// state; see ParsePlan.
func LoadPlan(path string, live *LiveState) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("plan file: %w", err)
	}
	return ParsePlan(data, path, live)
}

// ParsePlan parses a plan file — a scenario without topology and without
// workload jobs, replay or arrivals — and returns the scenario that runs it on
// the live state: the live hosts (with their capacities, labels and states) are
// the topology, the live shards (declared loads, rates, state sizes and
// constraints) the workload, and the run starts from the live assignment.
//
// The file may have name, description, seed, duration (default 10m), tick,
// control_interval, sample_every, model, workload.steps/spikes/hot/diurnal (on
// the live jobs, by name), events (on the live hosts and regions, by name),
// policies (default: one policy named "live" with the cluster's global and
// region policies, collaborative) and assertions. A topology section, or
// workload jobs, replay or arrivals, is an error naming its line: the live
// state is the topology and the workload. Every error names the file, the line
// and the key.
func ParsePlan(data []byte, name string, live *LiveState) (*Scenario, error) {
	if live == nil {
		return nil, fmt.Errorf("%s: no live state to plan against: %w", name, interfaces.ErrInvalid)
	}
	ls, err := live.check()
	if err != nil {
		return nil, err
	}
	sc, err := decodeScenario(data, name)
	if err != nil {
		return nil, err
	}
	if err := sc.checkPlanSections(); err != nil {
		return nil, err
	}
	// The live state as topology and workload, for the checks of the rest of
	// the file (job names in steps, host names in constraints); the engine
	// builds the shards from the live state itself.
	for _, h := range ls.hosts {
		c := h.Capacity
		sc.Topology.Hosts = append(sc.Topology.Hosts, HostSpec{Name: h.Name, Region: h.Region, Labels: h.Labels,
			Capacity: LoadSpec{CPU: Quantity(c.CPU), Mem: Quantity(c.Mem), Net: Quantity(c.Net), Tasks: Quantity(c.Tasks)}})
	}
	count := map[string]int{}
	for _, s := range ls.shards {
		count[s.Shard.Job]++
	}
	for _, j := range ls.jobs {
		sc.Workload.Jobs = append(sc.Workload.Jobs, JobSpec{Name: j, Shards: count[j]})
	}
	if len(sc.Workload.Jobs) == 0 {
		// A cluster with no jobs: plan an empty workload (validate needs a job).
		sc.Workload.Jobs = []JobSpec{{Name: "none", Shards: 1}}
		ls.jobs = nil
	}
	if len(sc.Policies) == 0 {
		for _, p := range []struct{ what, name string }{{"global", live.GlobalPolicy}, {"region", live.RegionPolicy}} {
			if why := policyProblem(p.name); why != "" {
				return nil, fmt.Errorf("%s: policies: the file lists none, and the cluster's %s policy %q cannot be simulated: %s; list policies in the file: %w",
					name, p.what, p.name, why, interfaces.ErrInvalid)
			}
		}
		sc.Policies = []PolicySpec{{Name: LivePolicy, Solver: live.RegionPolicy, GlobalSolver: live.GlobalPolicy, Integration: Collaborative}}
	}
	if sc.Duration == 0 && !sc.hasKey("duration") {
		sc.Duration = Duration(10 * time.Minute)
	}
	sc.setDefaults()
	sc.live = ls // validate names the live cluster in its messages
	if err := sc.validate(); err != nil {
		return nil, err
	}
	if len(ls.shards) == 0 {
		sc.Workload.Jobs = nil
	}
	return sc, nil
}

// hasKey reports whether the file has the top-level key.
func (sc *Scenario) hasKey(key string) bool {
	if sc.root == nil || len(sc.root.Content) == 0 {
		return false
	}
	m := sc.root.Content[0]
	for i := 0; m.Kind == yaml.MappingNode && i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return true
		}
	}
	return false
}

// checkPlanSections rejects what the live state provides: topology, and the
// workload's jobs, replay and arrivals.
func (sc *Scenario) checkPlanSections() error {
	top := sc.root
	if top == nil || len(top.Content) == 0 || top.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	m := top.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		switch k.Value {
		case "topology":
			return fmt.Errorf("%s:%d: topology: not allowed in a plan file: the live cluster's hosts (capacities, labels, states) are the topology; add hosts with an add_hosts event: %w", sc.file, k.Line, interfaces.ErrInvalid)
		case "workload":
			if v.Kind != yaml.MappingNode {
				continue
			}
			for j := 0; j+1 < len(v.Content); j += 2 {
				switch kk := v.Content[j]; kk.Value {
				case "jobs", "replay", "arrivals":
					return fmt.Errorf("%s:%d: workload.%s: not allowed in a plan file: the live cluster's jobs and shards are the workload; change their load with workload.steps, spikes, hot or diurnal: %w", sc.file, kk.Line, kk.Value, interfaces.ErrInvalid)
				}
			}
		}
	}
	return nil
}

// PlanMove is a change of a shard's place the simulator predicts: from its
// live region and host to where the run put it. To is "" while the new region
// has not placed it on a host yet; From is "" for a shard that was not placed.
type PlanMove struct {
	Shard      string `json:"shard"`
	FromRegion string `json:"from_region"`
	From       string `json:"from"`
	ToRegion   string `json:"to_region"`
	To         string `json:"to"`
	StateBytes int64  `json:"state_bytes"`
}

// FirstWindow is the stretch of a plan's run whose moves are listed: the first
// control interval, stretched past a failure at t=0 to the round that declares
// it and re-places its shards — detect_after, plus the largest control grace of
// the plan's policies (FailoverAfter), plus a tick; never past the end of the
// run.
func (sc *Scenario) FirstWindow() time.Duration {
	w := sc.ControlInterval.D()
	for _, e := range sc.Events {
		if e.At == 0 && (e.Kind == EventHostFail || e.Kind == EventRegionLoss) {
			for _, p := range sc.Policies {
				w = max(w, sc.FailoverAfter(p)+sc.Tick.D())
			}
		}
	}
	if tick := sc.Tick.D(); w%tick != 0 {
		w += tick - w%tick
	}
	return min(w, sc.Duration.D())
}

// FirstMoves runs one policy of a plan scenario over its FirstWindow and
// returns every shard whose place differs from the live assignment at the end
// of it (a move still in flight counts at its destination), in the live
// state's shard order, and the state bytes those relocations carry.
func FirstMoves(ctx context.Context, sc *Scenario, policy string, seed uint64) ([]PlanMove, int64, error) {
	if sc.live == nil {
		return nil, 0, errors.New("FirstMoves: the scenario is not a plan against a live state (use ParsePlan)")
	}
	var spec *PolicySpec
	for i := range sc.Policies {
		if sc.Policies[i].Name == policy {
			spec = &sc.Policies[i]
		}
	}
	if spec == nil {
		return nil, 0, fmt.Errorf("policy %q is not in the plan file: %w", policy, interfaces.ErrNotFound)
	}
	if seed == 0 {
		seed = sc.Seed
	}
	short := *sc
	short.Duration = Duration(sc.FirstWindow())
	short.Assertions = nil
	short.SampleEvery = short.Duration
	e, err := newEngine(&short, *spec, seed, nil, nil)
	if err != nil {
		return nil, 0, err
	}
	if _, err := e.run(ctx); err != nil {
		return nil, 0, err
	}
	w := e.w
	name := func(names []string, i int32) string {
		if i < 0 {
			return ""
		}
		return names[i]
	}
	var out []PlanMove
	var bytes int64
	for i, s := range sc.live.shards {
		r, h := e.region_[i], e.host[i]
		switch e.moveKind[i] {
		case moveHost:
			h = e.moveTo[i]
		case moveRegion:
			r, h = e.moveTo[i], -1
		case moveRack:
			h = -1
		}
		toR, to := name(w.regionName, r), name(w.hostName, h)
		if toR == s.Region && to == s.Host {
			continue
		}
		m := PlanMove{Shard: string(s.Shard.ID), FromRegion: s.Region, From: s.Host, ToRegion: toR, To: to}
		if s.Host != "" || s.Region != "" {
			m.StateBytes = s.Shard.StateBytes
			bytes += m.StateBytes
		}
		out = append(out, m)
	}
	return out, bytes, nil
}

// StartChanges returns the events of a plan at t=0 that a tier's own plan can
// express — host_fail and drain (the host's region treats it as draining) and
// region_loss (the global tier treats the region as draining) — and the others
// at t=0, which it cannot (add_hosts, host_slow, host_recover, region_recover).
func (sc *Scenario) StartChanges() (expressible, other []Event) {
	for _, e := range sc.Events {
		if e.At != 0 {
			continue
		}
		switch e.Kind {
		case EventHostFail, EventDrain, EventRegionLoss:
			expressible = append(expressible, e)
		default:
			other = append(other, e)
		}
	}
	return expressible, other
}
