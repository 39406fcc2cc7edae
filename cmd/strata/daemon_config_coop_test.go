package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/tierd"
	"github.com/strata-sched/strata/interfaces"
)

// The integration keys of a tier config: mode, operator constraints (manual),
// collaborative settings and labels, each error naming the key.
func TestTierConfigIntegration(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		code       int
		want       string
	}{
		{"default collaborative", regionYAML, 0, "config ok"},
		{"decoupled", regionYAML + "integration: decoupled\n", 0, "config ok"},
		{"unknown mode", regionYAML + "integration: friendly\n", 2, `integration: must be decoupled, manual or collaborative (got "friendly")`},
		{"manual", regionYAML + "integration: manual\nconstraints:\n  - {kind: allowed, shards: [etl/1], children: [h1]}\n  - {kind: capacity, children: [h2], limit: {cpu: 4}}\n  - {kind: max_moves, max: 3}\n", 0, "config ok"},
		{"constraints need manual", regionYAML + "constraints:\n  - {kind: max_moves, max: 3}\n", 2, "constraints: operator constraints need integration: manual"},
		{"bad constraint kind", regionYAML + "integration: manual\nconstraints:\n  - {kind: teleport}\n", 2, `constraints[0].kind: must be capacity, pin, allowed, anti_affinity, max_moves or avoid (got "teleport")`},
		{"allowed without shards", regionYAML + "integration: manual\nconstraints:\n  - {kind: allowed, children: [h1]}\n", 2, "constraints[0].shards: is required for allowed"},
		{"bad coop target", regionYAML + "coop: {target: 1.5}\n", 2, "coop.target: must be in (0, 1]"},
		{"labels", regionYAML + "labels: {disk: ssd}\ncoop: {target: 0.7, hold: 5m, budget_fraction: 0.1, min_budget: 2}\n", 0, "config ok"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI("region", "--config", writeFile(t, tt.body), "--check-config")
			if code != tt.code || !strings.Contains(out+errOut, tt.want) {
				t.Errorf("exit %d (want %d), output %q, want it to contain %q", code, tt.code, out+errOut, tt.want)
			}
		})
	}
	var f tierFile
	if err := decodeStrict("c.yaml", []byte(regionYAML+"integration: manual\nlabels: {disk: ssd}\ncoop: {hold: 5m}\nconstraints:\n  - {kind: pin, shards: [etl/1], children: [h1], reason: keep it local}\n"), &f); err != nil {
		t.Fatal(err)
	}
	c, err := f.tierConfig(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Integration != tierd.IntegrationManual || c.Labels["disk"] != "ssd" || c.Coop.Hold != 5*time.Minute || len(c.Constraints) != 1 ||
		c.Constraints[0].Kind != interfaces.ConstraintPin || c.Constraints[0].Reason != "keep it local" || c.Constraints[0].Children[0] != "h1" {
		t.Fatalf("config %+v", c)
	}
}
