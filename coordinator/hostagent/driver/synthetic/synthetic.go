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
	// BaseLatency is the p99 latency reported at scale 1. Default 10ms.
	BaseLatency time.Duration
}

type shard struct {
	spec    interfaces.Shard
	epoch   interfaces.Epoch
	scale   float64
	profile Profile
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
	return &Driver{cfg: cfg, shards: map[interfaces.ShardID]*shard{},
		profiles: map[interfaces.ShardID]Profile{}, scales: map[interfaces.ShardID]float64{}}, nil
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
	d.shards[spec.ID] = &shard{spec: spec, epoch: epoch, scale: scale, profile: d.profiles[spec.ID]}
	d.starts++
	return nil
}

// Stop stops producing load for shard.
func (d *Driver) Stop(id interfaces.ShardID) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.shards[id]; !ok {
		return fmt.Errorf("synthetic: shard %s: %w: not running", id, interfaces.ErrNotFound)
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
	}
	return nil
}

// FailNextStart makes the next Start return err (fault injection for tests).
func (d *Driver) FailNextStart(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failNext = err
}

// Measure returns every running shard's load at the clock's current time.
func (d *Driver) Measure() map[interfaces.ShardID]interfaces.ShardLoad {
	now := d.cfg.Clock.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[interfaces.ShardID]interfaces.ShardLoad, len(d.shards))
	for id, s := range d.shards {
		out[id] = d.loadAt(s, now)
	}
	return out
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
