package telemetry

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
)

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// Two daemons in one process (strata dev) have two registries: neither exports
// the other's series, and the same name registers twice without error.
func TestRegistriesAreSeparate(t *testing.T) {
	a := NewMetrics(map[string]string{"tier": "global", "tier_instance": "global"})
	b := NewMetrics(map[string]string{"tier": "region", "tier_instance": "region-1"})
	a.Scope.Counter("moves_committed_total").Inc(5)
	b.Scope.Counter("moves_committed_total").Inc(7)
	sa, sb := scrape(t, a), scrape(t, b)
	if !strings.Contains(sa, `strata_moves_committed_total{tier="global",tier_instance="global"} 5`) || strings.Contains(sa, "region-1") {
		t.Errorf("global's metrics:\n%s", sa)
	}
	if !strings.Contains(sb, `strata_moves_committed_total{tier="region",tier_instance="region-1"} 7`) || strings.Contains(sb, `"global"`) {
		t.Errorf("region's metrics:\n%s", sb)
	}
}

func TestKinds(t *testing.T) {
	m := NewMetrics(map[string]string{"tier": "region"})
	m.Scope.Timer("solve_seconds").Record(3 * time.Millisecond)
	m.Scope.Gauge("plugin_failures").Update(4) // a running total
	m.Scope.Gauge("plugin_failures").Update(6)
	m.Scope.Tagged(map[string]string{"resource": "gpu"}).Gauge("host_extra_load").Update(2)
	m.Scope.Counter("made_up_total").Inc(1)
	m.Func("leader", func(emit Emit) { emit(1) })
	m.Scope.Gauge("leader").Update(0) // ignored: read at scrape time
	out := scrape(t, m)
	for _, want := range []string{
		"# TYPE strata_solve_seconds histogram",
		`strata_solve_seconds_bucket{tier="region",le="0.003125"} 1`,
		"# TYPE strata_plugin_failures_total counter",
		`strata_plugin_failures_total{tier="region"} 6`,
		`strata_host_extra_load{resource="gpu",tier="region"} 2`,
		"# HELP strata_made_up_total " + Undocumented,
		`strata_leader{tier="region"} 1`,
		`strata_build_info{goversion="`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
}

// The catalogue follows Prometheus' conventions.
func TestCatalogueConventions(t *testing.T) {
	for name, d := range Catalogue() {
		if len(d.Help) < 20 || strings.HasPrefix(d.Help, name) || strings.HasPrefix(d.Help, Prefix+name) {
			t.Errorf("%s: HELP %q is not a description", name, d.Help)
		}
		if (d.Kind == KindCounter || d.Kind == KindTotal) != strings.HasSuffix(name, "_total") {
			t.Errorf("%s: a %s must end in _total, and only a counter", name, d.Kind)
		}
		if d.Kind == KindHistogram && (len(d.Buckets) < 5 || !strings.HasSuffix(name, "_seconds")) {
			t.Errorf("%s: a latency histogram needs buckets and seconds", name)
		}
		for _, l := range d.Labels {
			if l == "instance" || l == "job" {
				t.Errorf("%s: label %q is Prometheus' own", name, l)
			}
		}
	}
}

func TestRaftSinkForwardsToItsOwner(t *testing.T) {
	m := NewMetrics(nil)
	var s raftSink
	s.AddSample([]string{"raft", "commitTime"}, 2) // ms, before any owner: dropped
	s.set(m)
	s.AddSample([]string{"raft", "commitTime"}, 2)
	s.AddSample([]string{"raft", "rpc", "appendEntries"}, 2) // not exported
	s.IncrCounter([]string{"raft", "state", "leader"}, 1)
	s.IncrCounter([]string{"raft", "apply"}, 3)
	out := scrape(t, m)
	for _, want := range []string{
		"strata_raft_commit_seconds_sum 0.002",
		"strata_raft_commit_seconds_count 1",
		`strata_raft_transitions_total{state="leader"} 1`,
		"strata_raft_apply_total 3",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "appendEntries") {
		t.Errorf("an unlisted raft key was exported:\n%s", out)
	}
}

// docs/operations.md lists every metric of the catalogue.
func TestOperationsDocListsEveryMetric(t *testing.T) {
	b, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for name := range Catalogue() {
		if !strings.Contains(string(b), "`"+Prefix+name+"`") {
			t.Errorf("docs/operations.md does not list %s%s", Prefix, name)
		}
	}
}
