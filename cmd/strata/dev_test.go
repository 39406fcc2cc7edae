package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestDevHintNamesTheBinaryAsInvoked: "make run" starts $(CURDIR)/bin/strata,
// which is not on the PATH, so the commands "strata dev" suggests must say
// ./bin/strata there (they said "strata status", which is not found).
func TestDevHintNamesTheBinaryAsInvoked(t *testing.T) {
	cwd := filepath.FromSlash("/work/strata")
	for _, tt := range []struct{ arg0, want string }{
		{filepath.FromSlash("/work/strata/bin/strata"), "./bin/strata"},
		{filepath.FromSlash("bin/strata"), "./bin/strata"},
		{"strata", "strata"},
		{filepath.FromSlash("/usr/local/bin/strata"), "strata"},
		{filepath.FromSlash("/tmp/go-build1/b001/exe/strata"), "strata"},
	} {
		if got := commandName(tt.arg0, cwd); got != filepath.FromSlash(tt.want) {
			t.Errorf("commandName(%q, %q) = %q, want %q", tt.arg0, cwd, got, tt.want)
		}
	}
	h := devHint("./bin/strata", devAdminAddr, 64)
	if !strings.Contains(h, "./bin/strata status") || strings.Contains(h, " strata status") {
		t.Errorf("hint %q: want ./bin/strata status", h)
	}
	h = devHint("strata", "127.0.0.1:7499", 0)
	if !strings.Contains(h, "STRATA_ADDR=127.0.0.1:7499 strata status") {
		t.Errorf("hint for another address %q: want STRATA_ADDR", h)
	}
}

// TestDevBindsLoopbackOnly: strata dev runs without TLS, so it refuses an
// address others could reach.
func TestDevBindsLoopbackOnly(t *testing.T) {
	for _, args := range [][]string{{"dev", "--addr", "0.0.0.0:7400"}, {"dev", "--raft-admin", "10.0.0.1:7301"}, {"dev", "--http", "0.0.0.0:7500"}} {
		code, out, errOut := runCLI(args...)
		if code != 2 || !strings.Contains(out+errOut, "must be a loopback address") || !strings.Contains(out+errOut, "strata dev runs without TLS and binds loopback only") {
			t.Errorf("%v: exit %d, output %q", args, code, out+errOut)
		}
	}
}
