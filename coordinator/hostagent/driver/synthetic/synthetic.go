package synthetic

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/strata-sched/strata/coordinator/hostagent/driver"
	"github.com/strata-sched/strata/coordinator/hostagent/driver/synthetic/exec"
	"github.com/strata-sched/strata/interfaces"
)

// Profile overrides a shard's base load. Zero fields fall back to the spec.
type Profile struct {
	CPU  float64 // cores
	Mem  float64 // bytes
	Net  float64 // bytes/s
	Rate float64 // records/s
}

// Config configures the driver.
type Config struct {
	Clock interfaces.Clock
	Seed  uint64
	// Wave is the relative amplitude of a sinusoidal swing of cpu, net and rate
	// with the given Period (default 1 minute). 0 means flat.
	Wave   float64
	Period time.Duration
	// Noise is the relative amplitude of the per-second noise. 0 means none.
	Noise float64
	// BaseLatency is the p99 latency reported at scale 1 by the model (shards
	// the execution core does not run or has not measured yet). Default 10ms.
	BaseLatency time.Duration

	// Cores is the host's cpu capacity. When > 0 the driver runs its shards'
	// work in the execution core (package exec) on ceil(Cores) cores of speed
	// Cores/ceil(Cores) and reports each shard's measured p99 latency; 0 keeps
	// the BaseLatency model for every shard.
	Cores float64
	// Discipline is how the host picks the next item: "llf" (least laxity
	// first, the default) or "fifo".
	Discipline string
	// Arrivals is "poisson" (default) or "deterministic".
	Arrivals string
	// Window is the span of the measured percentiles (default 10s).
	Window time.Duration
	// DefaultSLO orders the items of shards without a latency SLO (default 1s);
	// their misses are not counted against anything.
	DefaultSLO time.Duration
	// MaxItemRate caps the items per second a shard's work is split into
	// (default 200): an item carries rate/items records and costs cpu/items
	// seconds of one core.
	MaxItemRate float64
}

// Defaults of the execution settings.
const (
	DefaultSLO         = time.Second
	DefaultMaxItemRate = 200.0
)

type shard struct {
	spec    interfaces.Shard
	epoch   interfaces.Epoch
	scale   float64
	profile Profile
	inCore  bool        // added to the execution core
	params  exec.Params // in force in the core
}

// Driver is the synthetic driver. It is safe for concurrent use.
type Driver struct {
	cfg      Config
	mu       sync.Mutex
	shards   map[interfaces.ShardID]*shard
	profiles map[interfaces.ShardID]Profile
	scales   map[interfaces.ShardID]float64
	failNext error
	starts   int
	core     *exec.Core // nil when Cores is 0
}

var _ driver.Driver = (*Driver)(nil)

// New returns a synthetic driver.
func New(cfg Config) (*Driver, error) {
	if cfg.Clock == nil {
		return nil, &interfaces.FieldError{Field: "synthetic.clock", Rule: "is required"}
	}
	for name, v := range map[string]float64{"synthetic.wave": cfg.Wave, "synthetic.noise": cfg.Noise} {
		if math.IsNaN(v) || v < 0 || v >= 1 {
			return nil, &interfaces.FieldError{Field: name, Rule: "must be in [0, 1)", Value: fmt.Sprint(v)}
		}
	}
	if cfg.Period < 0 || cfg.BaseLatency < 0 {
		return nil, &interfaces.FieldError{Field: "synthetic.period/base_latency", Rule: "must be ≥ 0"}
	}
	if cfg.Period == 0 {
		cfg.Period = time.Minute
	}
	if cfg.BaseLatency == 0 {
		cfg.BaseLatency = 10 * time.Millisecond
	}
	d := &Driver{cfg: cfg, shards: map[interfaces.ShardID]*shard{},
		profiles: map[interfaces.ShardID]Profile{}, scales: map[interfaces.ShardID]float64{}}
	if err := d.newCore(); err != nil {
		return nil, err
	}
	return d, nil
}

// newCore validates the execution settings and builds the core when Cores > 0.
func (d *Driver) newCore() error {
	cfg := &d.cfg
	disc, err := exec.ParseDiscipline("synthetic.discipline", cfg.Discipline)
	if err != nil {
		return err
	}
	arr, err := exec.ParseArrivals("synthetic.arrivals", cfg.Arrivals)
	if err != nil {
		return err
	}
	cfg.Discipline, cfg.Arrivals = string(disc), string(arr)
	if math.IsNaN(cfg.Cores) || math.IsInf(cfg.Cores, 0) || cfg.Cores < 0 || cfg.Cores > 1<<16 {
		return &interfaces.FieldError{Field: "synthetic.cores", Rule: "must be a number in [0, 65536]", Value: fmt.Sprint(cfg.Cores)}
	}
	if cfg.Window < 0 {
		return &interfaces.FieldError{Field: "synthetic.window", Rule: "must be ≥ 0", Value: cfg.Window.String()}
	}
	if cfg.DefaultSLO < 0 {
		return &interfaces.FieldError{Field: "synthetic.default_slo", Rule: "must be ≥ 0", Value: cfg.DefaultSLO.String()}
	}
	if math.IsNaN(cfg.MaxItemRate) || math.IsInf(cfg.MaxItemRate, 0) || cfg.MaxItemRate < 0 {
		return &interfaces.FieldError{Field: "synthetic.max_item_rate", Rule: "must be a finite number ≥ 0", Value: fmt.Sprint(cfg.MaxItemRate)}
	}
	if cfg.DefaultSLO == 0 {
		cfg.DefaultSLO = DefaultSLO
	}
	if cfg.MaxItemRate == 0 {
		cfg.MaxItemRate = DefaultMaxItemRate
	}
	if cfg.Cores == 0 {
		return nil
	}
	n := math.Ceil(cfg.Cores)
	d.core, err = exec.New(exec.Config{Cores: int(n), Speed: cfg.Cores / n, Discipline: disc, Arrivals: arr,
		Seed: cfg.Seed, Window: cfg.Window}, cfg.Clock.Now())
	if err != nil {
		return fmt.Errorf("synthetic: %w", err)
	}
	return nil
}

// Start begins producing load for spec.
func (d *Driver) Start(_ context.Context, spec interfaces.Shard, epoch interfaces.Epoch) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.failNext; err != nil {
		d.failNext = nil
		return err
	}
	if s, ok := d.shards[spec.ID]; ok {
		if s.epoch == epoch {
			return nil
		}
		return fmt.Errorf("synthetic: shard %s runs under epoch %d, asked to start under %d: %w", spec.ID, s.epoch, epoch, interfaces.ErrConflict)
	}
	scale, ok := d.scales[spec.ID]
	if !ok {
		scale = 1
	}
	s := &shard{spec: spec, epoch: epoch, scale: scale, profile: d.profiles[spec.ID]}
	d.shards[spec.ID] = s
	d.starts++
	d.sync(s, d.cfg.Clock.Now())
	return nil
}

// Stop stops producing load for shard.
func (d *Driver) Stop(id interfaces.ShardID) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.shards[id]
	if !ok {
		return fmt.Errorf("synthetic: shard %s: %w: not running", id, interfaces.ErrNotFound)
	}
	if s.inCore {
		// Its queued and running work is discarded with it.
		_, _ = d.core.Remove(d.cfg.Clock.Now(), id)
	}
	delete(d.shards, id)
	return nil
}

// Running returns the epoch each running shard was started under.
func (d *Driver) Running() map[interfaces.ShardID]interfaces.Epoch {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[interfaces.ShardID]interfaces.Epoch, len(d.shards))
	for id, s := range d.shards {
		out[id] = s.epoch
	}
	return out
}

// Starts returns how many successful starts the driver performed.
func (d *Driver) Starts() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.starts
}

// Scale multiplies shard's load by factor from now on (2 doubles it); it also
// applies to later starts of the shard. factor must be finite and ≥ 0.
func (d *Driver) Scale(id interfaces.ShardID, factor float64) error {
	if math.IsNaN(factor) || math.IsInf(factor, 0) || factor < 0 {
		return &interfaces.FieldError{Field: "synthetic.scale", Rule: "must be a finite number ≥ 0", Value: fmt.Sprint(factor)}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.scales[id] = factor
	if s, ok := d.shards[id]; ok {
		s.scale = factor
		d.sync(s, d.cfg.Clock.Now())
	}
	return nil
}

// SetProfile overrides shard's base load (also for later starts).
func (d *Driver) SetProfile(id interfaces.ShardID, p Profile) error {
	for name, v := range map[string]float64{"cpu": p.CPU, "mem": p.Mem, "net": p.Net, "rate": p.Rate} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return &interfaces.FieldError{Field: "synthetic.profile." + name, Rule: "must be a finite number ≥ 0", Value: fmt.Sprint(v)}
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.profiles[id] = p
	if s, ok := d.shards[id]; ok {
		s.profile = p
		d.sync(s, d.cfg.Clock.Now())
	}
	return nil
}

// FailNextStart makes the next Start return err (fault injection for tests).
func (d *Driver) FailNextStart(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failNext = err
}

// Measure returns every running shard's load at the clock's current time. With
// the execution core, it first runs the host's work up to now, and a shard's
// LatencyP99 is the measured one (see Measured).
func (d *Driver) Measure() map[interfaces.ShardID]interfaces.ShardLoad {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.cfg.Clock.Now()
	if d.core != nil {
		d.core.Advance(now)
	}
	out := make(map[interfaces.ShardID]interfaces.ShardLoad, len(d.shards))
	for id, s := range d.shards {
		l := d.loadAt(s, now)
		if s.inCore {
			st, _ := d.core.Stats(id)
			if p99, ok := Measured(st); ok {
				l.LatencyP99 = p99
			}
		}
		out[id] = l
		// The load at now drives the work of the next interval.
		d.syncLoad(s, now, l)
	}
	return out
}

// Measured is the latency the driver reports for a shard with execution stats
// st: the window's p99, or the age of the shard's oldest queued item when that
// is larger (a backlog that has not completed yet is latency too). ok is false
// when nothing completed in the window and nothing waits: the shard then
// reports the BaseLatency model.
func Measured(st exec.Stats) (p99 time.Duration, ok bool) {
	if st.Window.Completed == 0 && st.Queued == 0 {
		return 0, false
	}
	return max(st.Window.P99, st.OldestQueued), true
}

// ExecStats returns the execution-core stats of a running shard (false when
// the core is off or the shard does not run in it).
func (d *Driver) ExecStats(id interfaces.ShardID) (exec.Stats, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.shards[id]
	if !ok || !s.inCore {
		return exec.Stats{}, false
	}
	return d.core.Stats(id)
}

// sync brings s's execution parameters in line with its load at now.
func (d *Driver) sync(s *shard, now time.Time) {
	if d.core != nil {
		d.syncLoad(s, now, d.loadAt(s, now))
	}
}

// syncLoad sets s's parameters in the core from its load l at now: items per
// second min(rate, MaxItemRate), each costing cpu/items seconds of one core, SLO
// the shard's (DefaultSLO when it has none). A shard joins the core once it has
// both rate and cpu; without them it keeps its queue (rate 0) and, once that
// drains, reports the model.
func (d *Driver) syncLoad(s *shard, now time.Time, l interfaces.ShardLoad) {
	if d.core == nil {
		return
	}
	slo := s.spec.LatencySLO
	if slo <= 0 {
		slo = d.cfg.DefaultSLO
	}
	p := exec.Params{SLO: slo, Cost: s.params.Cost}
	if items := math.Min(l.InputRate, d.cfg.MaxItemRate); items > 0 && l.Load.CPU > 0 {
		p.Rate = items
		p.Cost = time.Duration(math.Max(1, math.Min(l.Load.CPU/items*float64(time.Second), float64(time.Hour))))
	}
	switch {
	case s.inCore && p != s.params:
		if err := d.core.Update(now, s.spec.ID, p); err == nil {
			s.params = p
		}
	case !s.inCore && p.Rate > 0:
		if err := d.core.Add(now, s.spec.ID, p); err == nil {
			s.inCore, s.params = true, p
		}
	}
}

// LoadAt is the pure generator: the load of a shard with spec, scale and profile
// at time t under cfg.
func LoadAt(cfg Config, spec interfaces.Shard, scale float64, p Profile, t time.Time) interfaces.ShardLoad {
	if cfg.Period == 0 {
		cfg.Period = time.Minute
	}
	if cfg.BaseLatency == 0 {
		cfg.BaseLatency = 10 * time.Millisecond
	}
	h := fnv.New64a()
	h.Write([]byte(spec.ID))
	key := h.Sum64()
	phase := rand.New(rand.NewPCG(cfg.Seed, key)).Float64() * 2 * math.Pi
	sec := uint64(t.Unix())
	u := rand.New(rand.NewPCG(cfg.Seed^key, sec)).Float64()*2 - 1
	cycle := float64(t.UnixNano()%int64(cfg.Period)) / float64(cfg.Period)
	m := (1 + cfg.Wave*math.Sin(2*math.Pi*cycle+phase)) * (1 + cfg.Noise*u)

	pick := func(override, fromSpec float64) float64 {
		if override != 0 {
			return override
		}
		return fromSpec
	}
	cpu := pick(p.CPU, spec.Load.CPU)
	mem := pick(p.Mem, spec.Load.Mem)
	net := pick(p.Net, spec.Load.Net)
	rate := pick(p.Rate, spec.InputRate)
	tasks := spec.Load.Tasks
	l := interfaces.Load{CPU: cpu * scale * m, Mem: mem * scale, Net: net * scale * m, Tasks: tasks}
	for k, v := range spec.Load.Extra {
		l = l.With(k, v*scale)
	}
	return interfaces.ShardLoad{
		Shard:      spec.ID,
		Load:       l,
		Rate:       rate * scale * m,
		InputRate:  rate * scale * m,
		LatencyP99: time.Duration(float64(cfg.BaseLatency) * scale * m),
	}
}

func (d *Driver) loadAt(s *shard, t time.Time) interfaces.ShardLoad {
	return LoadAt(d.cfg, s.spec, s.scale, s.profile, t)
}
