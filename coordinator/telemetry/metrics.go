package telemetry

import (
	"net/http"
	"runtime"
	"runtime/debug"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Version is the build's version, set by the binary at start (cmd/strata sets
// it from its -X main.version); it labels strata_build_info.
var Version = "dev"

// Prefix starts every metric name.
const Prefix = "strata_"

// Metrics is one daemon's registry: what its /metrics serves, and nothing of
// another daemon's, even when several run in one process (strata dev).
type Metrics struct {
	reg    *prometheus.Registry
	labels prometheus.Labels // the daemon's constant labels

	mu   sync.Mutex
	fams map[string]*family // by exported name, without the prefix

	// Scope is the root scope: Counter, Gauge and Timer by name.
	Scope *Scope
}

// family is one metric of a daemon: a pushed vector, or a scrape-time
// collector (pushes to it are ignored), or a running total.
type family struct {
	def     Def
	counter *prometheus.CounterVec
	gauge   *prometheus.GaugeVec
	hist    *prometheus.HistogramVec
	total   *totalCollector
	scraped bool
}

// NewMetrics returns a daemon's registry. labels are constant labels on every
// series (tier, tier_instance, node; or tier and host); "instance" and "job"
// are Prometheus' own target labels, so a label of either name is renamed with
// an "exported_" prefix rather than silently shadowed.
func NewMetrics(labels map[string]string) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), labels: prometheus.Labels{}, fams: map[string]*family{}}
	for k, v := range labels {
		if k == "instance" || k == "job" {
			k = "exported_" + k
		}
		m.labels[k] = v
	}
	m.Scope = &Scope{m: m}
	rev := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				rev = s.Value
			}
		}
	}
	m.Func("build_info", func(emit Emit) { emit(1, Version, rev, runtime.Version()) })
	if claimProcess(m) {
		m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return m
}

// Registry is the daemon's Prometheus registry (for tests and extra
// collectors).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the daemon's metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Close releases what the daemon claimed of the process (the raft metrics
// bridge). The registry keeps serving.
func (m *Metrics) Close() error {
	releaseProcess(m)
	return nil
}

// Init makes, at zero, every label-less metric of the catalogue that daemon
// ("tier" or "host") pushes.
func (m *Metrics) Init(daemon string) {
	for _, d := range Catalogue() {
		if d.Daemon != daemon || len(d.Labels) > 0 {
			continue
		}
		switch d.Kind {
		case KindCounter:
			m.Scope.Counter(d.Name)
		case KindHistogram:
			m.Scope.Timer(d.Name)
		case KindGauge:
			m.Scope.Gauge(d.Name)
		}
	}
}

// Emit gives one sample of a scrape-time metric: its value and the values of
// its variable labels, in the order of its Def.Labels.
type Emit func(v float64, labelValues ...string)

// Func exports the metric name (a catalogue entry) from fn, called on every
// scrape: the value is read from the daemon's state, so a follower exports
// its own. Values pushed through a Scope under this name are ignored.
func (m *Metrics) Func(name string, fn func(Emit)) {
	def := lookup(name, nil, KindGauge)
	m.mu.Lock()
	defer m.mu.Unlock()
	if f, ok := m.fams[def.Name]; ok && !f.scraped {
		m.reg.Unregister(f.collector())
	}
	m.fams[def.Name] = &family{def: def, scraped: true}
	m.reg.MustRegister(&funcCollector{desc: m.desc(def), kind: def.Kind, fn: fn})
}

func (m *Metrics) desc(def Def) *prometheus.Desc {
	return prometheus.NewDesc(Prefix+def.Name, def.Help, def.Labels, m.labels)
}

func (f *family) collector() prometheus.Collector {
	switch {
	case f.counter != nil:
		return f.counter
	case f.gauge != nil:
		return f.gauge
	case f.hist != nil:
		return f.hist
	}
	return f.total
}

// fam returns the family of a pushed metric used under name with the given
// label names, making and registering it on first use; nil when the name is
// a scrape-time metric.
func (m *Metrics) fam(name string, labelNames []string, k Kind) *family {
	def := lookup(name, labelNames, k)
	m.mu.Lock()
	defer m.mu.Unlock()
	if f, ok := m.fams[def.Name]; ok {
		if f.scraped {
			return nil
		}
		return f
	}
	f := &family{def: def}
	n, help, cl := Prefix+def.Name, def.Help, m.labels
	switch def.Kind {
	case KindCounter:
		f.counter = prometheus.NewCounterVec(prometheus.CounterOpts{Name: n, Help: help, ConstLabels: cl}, def.Labels)
	case KindHistogram:
		f.hist = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: n, Help: help, ConstLabels: cl, Buckets: def.Buckets}, def.Labels)
	case KindTotal:
		f.total = &totalCollector{desc: m.desc(def), values: map[string]totalValue{}}
	default:
		f.gauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: n, Help: help, ConstLabels: cl}, def.Labels)
	}
	if err := m.reg.Register(f.collector()); err != nil {
		// Only a name clash between an unlisted metric and another's labels
		// can get here; drop the metric rather than fail the daemon.
		f = &family{def: def, scraped: true}
	}
	m.fams[def.Name] = f
	return f
}

// funcCollector exports one scrape-time metric.
type funcCollector struct {
	desc *prometheus.Desc
	kind Kind
	fn   func(Emit)
}

func (c *funcCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *funcCollector) Collect(ch chan<- prometheus.Metric) {
	vt := prometheus.GaugeValue
	if c.kind == KindCounter || c.kind == KindTotal {
		vt = prometheus.CounterValue
	}
	c.fn(func(v float64, lv ...string) {
		if mt, err := prometheus.NewConstMetric(c.desc, vt, v, lv...); err == nil {
			ch <- mt
		}
	})
}

// totalCollector exports running totals set by their owner as counters.
type totalCollector struct {
	desc   *prometheus.Desc
	mu     sync.Mutex
	values map[string]totalValue
}

type totalValue struct {
	labels []string
	v      float64
}

func (c *totalCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *totalCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, tv := range c.values {
		if mt, err := prometheus.NewConstMetric(c.desc, prometheus.CounterValue, tv.v, tv.labels...); err == nil {
			ch <- mt
		}
	}
}

func (c *totalCollector) set(lv []string, v float64) {
	key := ""
	for _, s := range lv {
		key += s + "\x00"
	}
	c.mu.Lock()
	c.values[key] = totalValue{labels: lv, v: v}
	c.mu.Unlock()
}

// Scope hands out a daemon's metrics by name, with the label values it was
// Tagged with. The method names are tally's, which the daemons used before.
type Scope struct {
	m    *Metrics
	tags map[string]string
}

// Tagged returns a scope whose metrics carry tags as label values.
func (s *Scope) Tagged(tags map[string]string) *Scope {
	t := make(map[string]string, len(s.tags)+len(tags))
	for k, v := range s.tags {
		t[k] = v
	}
	for k, v := range tags {
		t[k] = v
	}
	return &Scope{m: s.m, tags: t}
}

func (s *Scope) tagNames() []string {
	out := make([]string, 0, len(s.tags))
	for k := range s.tags {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (s *Scope) values(def Def) []string {
	out := make([]string, len(def.Labels))
	for i, l := range def.Labels {
		out[i] = s.tags[l]
	}
	return out
}

// Counter is a metric that only goes up.
type Counter struct{ c prometheus.Counter }

// Inc adds n (negative n is ignored).
func (c Counter) Inc(n int64) {
	if c.c != nil && n > 0 {
		c.c.Add(float64(n))
	}
}

// Gauge is a value that is set.
type Gauge struct {
	g     prometheus.Gauge
	total func(float64)
}

// Update sets the value.
func (g Gauge) Update(v float64) {
	switch {
	case g.g != nil:
		g.g.Set(v)
	case g.total != nil:
		g.total(v)
	}
}

// Timer records durations into a histogram.
type Timer struct{ o prometheus.Observer }

// Record observes one duration.
func (t Timer) Record(d time.Duration) {
	if t.o != nil {
		t.o.Observe(d.Seconds())
	}
}

// Counter returns the counter name.
func (s *Scope) Counter(name string) Counter {
	f := s.m.fam(name, s.tagNames(), KindCounter)
	if f == nil || f.counter == nil {
		return Counter{}
	}
	c, err := f.counter.GetMetricWithLabelValues(s.values(f.def)...)
	if err != nil {
		return Counter{}
	}
	return Counter{c: c}
}

// Gauge returns the gauge name (or, for a KindTotal metric, the setter of its
// running total).
func (s *Scope) Gauge(name string) Gauge {
	f := s.m.fam(name, s.tagNames(), KindGauge)
	if f == nil {
		return Gauge{}
	}
	lv := s.values(f.def)
	if f.total != nil {
		return Gauge{total: func(v float64) { f.total.set(lv, v) }}
	}
	if f.gauge == nil {
		return Gauge{}
	}
	g, err := f.gauge.GetMetricWithLabelValues(lv...)
	if err != nil {
		return Gauge{}
	}
	return Gauge{g: g}
}

// Timer returns the histogram name.
func (s *Scope) Timer(name string) Timer {
	f := s.m.fam(name, s.tagNames(), KindHistogram)
	if f == nil || f.hist == nil {
		return Timer{}
	}
	o, err := f.hist.GetMetricWithLabelValues(s.values(f.def)...)
	if err != nil {
		return Timer{}
	}
	return Timer{o: o}
}
