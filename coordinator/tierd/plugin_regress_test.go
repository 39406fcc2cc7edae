package tierd

import (
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/plugin"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/internal/testutil"
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
		{"1500ms", 2 * time.Second, true}, // above half: never reached
		{"", 2 * time.Second, false},      // the default, 1s
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

// Start builds the policy (for "plugin", a gRPC client) and the metrics
// reporter before it listens; a failed Start returned without closing them.
func TestFailedStartClosesThePluginAndTheMetrics(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	start := func() {
		_, err := Start(Config{Tier: "global", Instance: "g", NodeID: "n1", DataDir: t.TempDir(),
			RaftAddr: "127.0.0.1:0", GRPCAddr: busy.Addr().String(), Bootstrap: true,
			Policy: plugin.Name, PolicyConfig: interfaces.PolicyConfig{"address": "127.0.0.1:1"}}, nil)
		if err == nil || !strings.Contains(err.Error(), "listen.grpc") {
			t.Fatalf("want a listen.grpc error, got %v", err)
		}
	}
	start() // whatever a first Start leaves for good (package-level state) is not a leak
	leaked := func() int {
		buf := make([]byte, 1<<20)
		st := string(buf[:runtime.Stack(buf, true)])
		return strings.Count(st, "created by google.golang.org/grpc") + strings.Count(st, "created by github.com/uber-go/tally")
	}
	time.Sleep(200 * time.Millisecond)
	before := leaked()
	for i := 0; i < 5; i++ {
		start()
	}
	testutil.Eventually(t, "no goroutines left by failed starts", 5*time.Second, func() error {
		if n := leaked(); n > before {
			return fmt.Errorf("%d goroutines of grpc clients or tally reporters after 5 failed starts, %d before", n, before)
		}
		return nil
	})
}
