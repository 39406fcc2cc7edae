package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

// fakePlanner is an Admin server that knows some plan tokens and records the
// ApplyPlan calls it gets.
type fakePlanner struct {
	wire.UnimplementedAdminServer
	addr   string
	tokens map[string]bool

	mu    sync.Mutex
	calls []string
}

func startPlanner(t *testing.T, tokens ...string) *fakePlanner {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakePlanner{addr: lis.Addr().String(), tokens: map[string]bool{}}
	for _, tok := range tokens {
		f.tokens[tok] = true
	}
	srv := grpc.NewServer()
	wire.RegisterAdminServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return f
}

func (f *fakePlanner) ApplyPlan(_ context.Context, req *wire.ApplyPlanRequest) (*wire.ApplyPlanResponse, error) {
	f.mu.Lock()
	f.calls = append(f.calls, req.GetToken())
	f.mu.Unlock()
	if !f.tokens[req.GetToken()] {
		return nil, wire.ToStatus(fmt.Errorf("plan token %q: unknown or expired: %w", req.GetToken(), interfaces.ErrNotFound))
	}
	return &wire.ApplyPlanResponse{MovesCommitted: 2, StateIndex: 9}, nil
}

func (f *fakePlanner) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// TestPlanApplyHonoursAddr: "plan apply TOKEN@ADDRESS" dials --addr or
// STRATA_ADDR when one is set (the token's address may not be reachable from
// here; a replica forwards to its leader), falls back to the token's address
// when that instance does not know the token (it was another tier
// instance's), and dials the token's address otherwise. A malformed address
// in the token is a usage error. It used to dial the token's address always.
func TestPlanApplyHonoursAddr(t *testing.T) {
	t.Setenv("STRATA_ADDR", "")
	dead := closedAddr(t)

	// --addr set: dialled, although the token names an address nobody serves.
	p := startPlanner(t, "t1")
	code, out, errOut := runCLI("plan", "apply", "t1@"+dead, "--addr", p.addr)
	if code != 0 || !strings.Contains(out, "applied: 2 moves committed, 0 refused") || len(p.called()) != 1 {
		t.Fatalf("apply with --addr: exit %d, stdout %q, stderr %q, calls %v", code, out, errOut, p.called())
	}
	// STRATA_ADDR set: the same.
	t.Setenv("STRATA_ADDR", p.addr)
	if code, out, errOut := runCLI("plan", "apply", "t1@"+dead); code != 0 || !strings.Contains(out, "applied:") || len(p.called()) != 2 {
		t.Fatalf("apply with STRATA_ADDR: exit %d, stdout %q, stderr %q, calls %v", code, out, errOut, p.called())
	}
	t.Setenv("STRATA_ADDR", "")

	// The token is a region's; --addr is the global tier's: the global tier
	// does not know it, so the token's address is asked.
	global, region := startPlanner(t), startPlanner(t, "t2")
	if code, out, errOut := runCLI("plan", "apply", "t2@"+region.addr, "--addr", global.addr); code != 0 || !strings.Contains(out, "applied:") || len(global.called()) != 1 || len(region.called()) != 1 {
		t.Fatalf("apply of a region's token via the global tier: exit %d, stdout %q, stderr %q, calls %v / %v", code, out, errOut, global.called(), region.called())
	}
	// Known nowhere: the error is the token's own instance's.
	if code, _, errOut := runCLI("plan", "apply", "t3@"+region.addr, "--addr", global.addr); code != 1 || !strings.Contains(errOut, `plan token "t3": unknown or expired`) {
		t.Errorf("apply of an unknown token: exit %d, stderr %q", code, errOut)
	}

	// Neither set: the token's address.
	if code, _, errOut := runCLI("plan", "apply", "t2@"+region.addr); code != 0 || len(region.called()) != 3 {
		t.Fatalf("apply without --addr: exit %d, stderr %q, calls %v", code, errOut, region.called())
	}
	// An unreachable token address without --addr: the hint is --addr.
	code, _, errOut = runCLI("plan", "apply", "t2@"+dead, "--timeout", "3s")
	if code != 1 || !strings.Contains(errOut, "cannot reach the tier instance that made the plan at "+dead) || !strings.Contains(errOut, "--addr") {
		t.Errorf("apply at an unreachable token address: exit %d, stderr %q", code, errOut)
	}
	// A malformed address in the token: exit 2, nothing dialled.
	for _, tok := range []string{"t1@nocolon", "t1@", "@" + p.addr, "t1"} {
		if code, _, errOut := runCLI("plan", "apply", tok, "--addr", p.addr); code != 2 || !strings.Contains(errOut, "TOKEN") {
			t.Errorf("apply %q: exit %d, stderr %q; want a usage error naming TOKEN", tok, code, errOut)
		}
	}
	if n := len(p.called()); n != 2 {
		t.Errorf("malformed tokens reached the server: %d calls, want 2", n)
	}
}
