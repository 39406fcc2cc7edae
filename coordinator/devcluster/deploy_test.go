package devcluster

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/strata-sched/strata/coordinator/telemetry"
	"github.com/strata-sched/strata/coordinator/telemetry/promtest"
	"gopkg.in/yaml.v3"
)

// deployDir is the repository's deploy/ folder.
const deployDir = "../../deploy"

// TestPromtoolChecksDeploy runs Prometheus' own checks on deploy/: the alert
// rules load and pass their unit tests, and the compose scrape config is valid.
func TestPromtoolChecksDeploy(t *testing.T) {
	promtool := promtest.Need(t, "promtool")
	for _, args := range [][]string{
		{"check", "rules", "strata-alerts.yml"},
		{"test", "rules", "strata-alerts.test.yml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = filepath.Join(deployDir, "prometheus")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	cmd := exec.Command(promtool, "check", "config", "prometheus.yml")
	cmd.Dir = filepath.Join(deployDir, "compose")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check config compose/prometheus.yml: %v\n%s", err, out)
	}
}

// deployQueries returns every PromQL expression of deploy/: the Grafana
// dashboard's targets and the alert rules, by where they come from.
func deployQueries(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	b, err := os.ReadFile(filepath.Join(deployDir, "grafana", "strata.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("grafana/strata.json: %v", err)
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("grafana/strata.json: panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			out["dashboard panel "+p.Title+" "+tg.RefID] = tg.Expr
		}
	}
	b, err = os.ReadFile(filepath.Join(deployDir, "prometheus", "strata-alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatalf("prometheus/strata-alerts.yml: %v", err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out["alert "+r.Alert] = r.Expr
		}
	}
	return out
}

var metricName = regexp.MustCompile(`\bstrata_[a-z0-9_]+`)

// checkDeployQueries checks, against a Prometheus scraping a dev cluster,
// that every query of the dashboard and the alert rules parses and names only
// metrics the cluster exports (or, for hashicorp/raft's own metrics, that only
// a one-daemon process exports, listed as such in the catalogue).
func checkDeployQueries(t *testing.T, p *promtest.Server) {
	ctx := context.Background()
	names, err := p.By(ctx, `group by (__name__) ({__name__=~"strata_.+"})`, "__name__")
	if err != nil {
		t.Fatal(err)
	}
	cat := telemetry.Catalogue()
	queries := deployQueries(t)
	used := 0
	for where, q := range queries {
		pq := strings.ReplaceAll(q, "$__rate_interval", "1m")
		if _, err := p.Query(ctx, pq); err != nil {
			t.Errorf("%s: Prometheus refuses %q: %v", where, q, err)
		}
		for _, n := range metricName.FindAllString(q, -1) {
			used++
			if _, ok := names[n]; ok {
				continue
			}
			base := strings.TrimPrefix(n, telemetry.Prefix)
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				base = strings.TrimSuffix(base, suf)
			}
			if d, ok := cat[base]; ok && d.OneDaemon {
				continue
			}
			if _, ok := names[telemetry.Prefix+base+"_bucket"]; ok {
				continue
			}
			t.Errorf("%s: %s is not exported by the dev cluster", where, n)
		}
	}
	t.Logf("%d queries of deploy/ name %d metrics; all exported", len(queries), used)
}
