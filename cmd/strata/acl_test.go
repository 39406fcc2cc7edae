package main

import (
	"encoding/json"
	"strings"
	"testing"
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
