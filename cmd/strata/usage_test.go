package main

import (
	"strings"
	"testing"
)

// TestUsageErrorsNameTheirSource: bad input found before any call exits 2
// and names where it came from: STRATA_ADDR when the address came from the
// environment (it used to be blamed on --addr, which was not given), and an
// empty ID for raft join/remove or shards --job (they used to reach the
// cluster, or list every job).
func TestUsageErrorsNameTheirSource(t *testing.T) {
	t.Setenv("STRATA_ADDR", "nocolon")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"status"}, `STRATA_ADDR "nocolon": must be host:port`},
		{[]string{"shards", "--job", "x"}, `STRATA_ADDR "nocolon": must be host:port`},
		{[]string{"status", "--addr", "nocolon2"}, `--addr "nocolon2": must be host:port`},
	} {
		if code, _, errOut := runCLI(tt.args...); code != 2 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%q with STRATA_ADDR=nocolon: exit %d, stderr %q; want exit 2 saying %q", tt.args, code, errOut, tt.want)
		}
	}
	t.Setenv("STRATA_ADDR", "127.0.0.1:1")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"raft", "join", "", "127.0.0.1:7001", "--addr", "127.0.0.1:1"}, "ID: is required"},
		{[]string{"raft", "remove", "", "--addr", "127.0.0.1:1"}, "ID: is required"},
		{[]string{"shards", "--job", ""}, "--job: is required"},
	} {
		args := append(tt.args, "--timeout", "2s")
		if code, _, errOut := runCLI(args...); code != 2 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 saying %q", args, code, errOut, tt.want)
		}
	}
}
