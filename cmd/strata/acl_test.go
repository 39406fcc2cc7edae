package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/tierd"
	"github.com/strata-sched/strata/internal/testutil"
)

// TestACLCLI: client commands send --token or STRATA_TOKEN; a missing token
// and a read token used to delete a job are refused with the server's
// reason (exit 1); tokens are created (secret shown once), listed without
// secrets and revoked.
func TestACLCLI(t *testing.T) {
	a, _ := startRaftPair(t)
	addr := "--addr=" + a.GRPCAddr()
	t.Setenv("STRATA_TOKEN", "")

	code, _, errOut := runCLI("status", addr)
	if code != 1 || !strings.Contains(errOut, "refused the call") || !strings.Contains(errOut, "requires an ACL token: give --token or STRATA_TOKEN") {
		t.Fatalf("status without a token: exit %d, stderr %q", code, errOut)
	}
	code, out, errOut := runCLI("acl", "token", "create", "viewer", "--policy", "read", "-o", "json", addr, "--token", raftTestToken)
	if code != 0 {
		t.Fatalf("create: exit %d: %s", code, errOut)
	}
	var created tokenCreateJSON
	if err := json.Unmarshal([]byte(out), &created); err != nil || created.Secret == "" || created.Policy != "read" {
		t.Fatalf("create -o json: %q (%v)", out, err)
	}
	t.Setenv("STRATA_TOKEN", created.Secret)
	if code, _, errOut := runCLI("status", addr); code != 0 {
		t.Fatalf("status with STRATA_TOKEN: exit %d: %s", code, errOut)
	}
	code, _, errOut = runCLI("job", "delete", "anything", addr)
	if code != 1 || !strings.Contains(errOut, `DeleteJob needs a token with policy admin; token "viewer" has policy read`) {
		t.Fatalf("job delete with a read token: exit %d, stderr %q", code, errOut)
	}
	code, out, errOut = runCLI("acl", "token", "list", addr, "--token", raftTestToken)
	if code != 0 || !strings.Contains(out, "viewer") || !strings.Contains(out, "bootstrap") || strings.Contains(out, created.Secret) {
		t.Fatalf("list: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, _, errOut := runCLI("acl", "token", "revoke", "viewer", addr, "--token", raftTestToken); code != 0 {
		t.Fatalf("revoke: exit %d: %s", code, errOut)
	}
	code, _, errOut = runCLI("status", addr)
	if code != 1 || !strings.Contains(errOut, "unknown or revoked") {
		t.Fatalf("status with a revoked token: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = runCLI("acl", "token", "create", "x", "--policy", "root", addr)
	if code != 2 || !strings.Contains(errOut, "--policy: must be read, operate or admin") {
		t.Errorf("create with a bad policy: exit %d, stderr %q", code, errOut)
	}
}

// TestACLTokenTree: --tree creates one secret at every tier instance of the
// tree, so that a command walking the tree works with it; revoke --tree
// takes it back everywhere.
func TestACLTokenTree(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(raftTestToken), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func(tier, instance string, parent []string) *tierd.Daemon {
		d, err := tierd.Start(tierd.Config{Tier: tier, Instance: instance, NodeID: "n1", DataDir: t.TempDir(),
			RaftAddr: testutil.FreeAddr(t), GRPCAddr: testutil.FreeAddr(t), Bootstrap: true, Parent: parent,
			Interval: 50 * time.Millisecond, ACL: tierd.ACLConfig{Enabled: true, BootstrapTokenFile: file}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	g := start("global", "global", nil)
	r := start("region", "eu-1", []string{g.GRPCAddr()})
	addr := "--addr=" + g.GRPCAddr()
	t.Setenv("STRATA_TOKEN", raftTestToken)
	testutil.Eventually(t, "the region under the global tier", 20*time.Second, func() error {
		code, out, errOut := runCLI("status", "-o", "json", addr)
		if code != 0 || !strings.Contains(out, r.GRPCAddr()) || strings.Contains(out, "unreachable") {
			return fmt.Errorf("exit %d, %s %s", code, out, errOut)
		}
		return nil
	})
	code, out, errOut := runCLI("acl", "token", "create", "ops", "--policy", "operate", "--tree", "-o", "json", addr)
	if code != 0 {
		t.Fatalf("create --tree: exit %d: %s", code, errOut)
	}
	var created tokenCreateJSON
	if err := json.Unmarshal([]byte(out), &created); err != nil || len(created.Instances) != 2 {
		t.Fatalf("create --tree -o json: %q (%v)", out, err)
	}
	for _, d := range []*tierd.Daemon{g, r} {
		if ts := d.Tier().FSM.Tokens(); len(ts) != 1 || ts[0].ID != "ops" {
			t.Errorf("tokens of %s: %+v", d.GRPCAddr(), ts)
		}
	}
	t.Setenv("STRATA_TOKEN", created.Secret)
	code, out, errOut = runCLI("status", "-o", "json", addr)
	if code != 0 || strings.Contains(out, "unreachable") || strings.Contains(errOut, "unreachable") {
		t.Errorf("status with the tree's token: exit %d, %s %s", code, out, errOut)
	}
	t.Setenv("STRATA_TOKEN", raftTestToken)
	if code, _, errOut := runCLI("acl", "token", "revoke", "ops", "--tree", addr); code != 0 {
		t.Fatalf("revoke --tree: exit %d: %s", code, errOut)
	}
	for _, d := range []*tierd.Daemon{g, r} {
		if ts := d.Tier().FSM.Tokens(); len(ts) != 0 {
			t.Errorf("tokens of %s after revoke --tree: %+v", d.GRPCAddr(), ts)
		}
	}
}
