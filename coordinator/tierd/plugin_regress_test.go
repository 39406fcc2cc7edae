package tierd

import (
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/plugin"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/tiers"
)

// A plugin time-out at or above the solve timeout is never reached (the call
// gets at most half the solve timeout): the configuration is warned about.
func TestPluginTimeoutNotBelowSolveTimeoutIsWarned(t *testing.T) {
	for _, tc := range []struct {
		timeout string
		solve   time.Duration
		warn    bool
	}{
		{"2s", 2 * time.Second, true},
		{"3s", 2 * time.Second, true},
		{"1s", 2 * time.Second, false},
		{"", 2 * time.Second, false}, // the default, 1s
		{"", time.Second, true},
	} {
		cfg := interfaces.PolicyConfig{"address": "127.0.0.1:1"}
		if tc.timeout != "" {
			cfg["timeout"] = tc.timeout
		}
		pol, err := tiers.New(plugin.Name, cfg)
		if err != nil {
			t.Fatal(err)
		}
		w := PolicyWarnings(Config{SolveTimeout: tc.solve}, pol)
		_ = pol.(*plugin.Policy).Close()
		if got := len(w) > 0; got != tc.warn {
			t.Errorf("timeout %q, solve_timeout %v: warnings %q, want a warning: %v", tc.timeout, tc.solve, w, tc.warn)
		}
		if tc.warn && (len(w) != 1 || !strings.Contains(w[0], "policy.config.timeout") || !strings.Contains(w[0], "control.solve_timeout")) {
			t.Errorf("warning %q should name both settings", w)
		}
	}
	local, _ := tiers.New("local", nil)
	if w := PolicyWarnings(Config{SolveTimeout: time.Millisecond}, local); len(w) != 0 {
		t.Errorf("built-in policy warned about: %q", w)
	}
}
