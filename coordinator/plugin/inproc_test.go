package plugin_test

import (
	"context"
	"log"
	"math"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strata-sched/strata/coordinator/plugin"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/testutil"
	"github.com/strata-sched/strata/tiers"
)

// funcServer is an in-process TierPolicy plugin whose Plan is plan.
type funcServer struct {
	wire.UnimplementedTierPolicyServer
	plan func(ctx context.Context, req *wire.PlanRequest) (*wire.PlanResponse, error)
}

func (s *funcServer) Info(context.Context, *wire.InfoRequest) (*wire.InfoResponse, error) {
	return &wire.InfoResponse{Name: "inproc", ContractVersions: wire.SupportedVersions()}, nil
}

func (s *funcServer) Plan(ctx context.Context, req *wire.PlanRequest) (*wire.PlanResponse, error) {
	return s.plan(ctx, req)
}

// serveFunc serves a plugin whose Plan is plan, until the test ends, and
// returns its address.
func serveFunc(t *testing.T, plan func(ctx context.Context, req *wire.PlanRequest) (*wire.PlanResponse, error)) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	wire.RegisterTierPolicyServer(srv, &funcServer{plan: plan})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

func newPlugin(t *testing.T, cfg interfaces.PolicyConfig) *plugin.Policy {
	t.Helper()
	pol, err := tiers.New(plugin.Name, cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := pol.(*plugin.Policy)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// A plan the tier could not commit — an infinite delta, a reason over the
// length limit — is malformed (docs/writing-a-tier.md): the wire conversion
// refuses it, the round plans with the fallback and the plugin is unhealthy.
// Before, it passed as well-formed and its moves then sank the commit batch.
func TestUncommittablePlanIsAPluginFailure(t *testing.T) {
	for name, bad := range map[string]*wire.Move{
		"infinite delta": {Shard: "s0", To: "h0", Delta: math.Inf(-1), Reason: "ok"},
		"long reason":    {Shard: "s0", To: "h0", Reason: strings.Repeat("r", interfaces.MaxTextLen+1)},
		"long goal":      {Shard: "s0", To: "h0", Goal: strings.Repeat("g", interfaces.MaxTextLen+1)},
	} {
		t.Run(name, func(t *testing.T) {
			addr := serveFunc(t, func(context.Context, *wire.PlanRequest) (*wire.PlanResponse, error) {
				return &wire.PlanResponse{Plan: &wire.Plan{Status: wire.PlanStatus(interfaces.StatusOK), Moves: []*wire.Move{
					{Shard: "s1", To: "h1", Reason: "fine"}, bad,
				}}}, nil
			})
			p := newPlugin(t, interfaces.PolicyConfig{"address": addr, "retry": "1h"})
			plan, err := p.Plan(context.Background(), view())
			if err != nil {
				t.Fatalf("fallback failed: %v", err)
			}
			for _, m := range plan.Moves {
				if math.IsInf(m.Delta, 0) || len(m.Reason) > interfaces.MaxTextLen || len(m.Goal) > interfaces.MaxTextLen || m.Reason == "fine" {
					t.Fatalf("the plugin's uncommittable plan was used: %+v", m)
				}
			}
			if len(plan.Moves) != 6 {
				t.Errorf("fallback placed %d of 6 shards", len(plan.Moves))
			}
			if st := p.Status(); st.Healthy || !strings.Contains(st.LastError, "plan.moves[1]") {
				t.Errorf("status %+v: want unhealthy, naming the refused move", st)
			}
		})
	}
}

// A hung plugin used to take the whole round deadline (its time-out and the
// round's solve timeout are both 2s by default), and the fallback then ran on
// an expired context: the local solver stopped at once and placed nothing. The
// plugin now gets at most half of what is left, the fallback the rest.
func TestHungPluginLeavesTheFallbackTime(t *testing.T) {
	left := make(chan time.Duration, 1)
	addr := serveFunc(t, func(ctx context.Context, _ *wire.PlanRequest) (*wire.PlanResponse, error) {
		if dl, ok := ctx.Deadline(); ok {
			left <- time.Until(dl)
		}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	p := newPlugin(t, interfaces.PolicyConfig{"address": addr, "timeout": "10s", "retry": "1h"})
	const round = 600 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), round)
	defer cancel()
	start := time.Now()
	plan, err := p.Plan(ctx, view()) // 6 unplaced shards, room for 8
	if err != nil {
		t.Fatalf("fallback failed: %v", err)
	}
	if len(plan.Moves) != 6 {
		t.Errorf("fallback after a hung plugin placed %d of 6 unplaced shards (status %v, %d infeasible)", len(plan.Moves), plan.Status, len(plan.Infeasible))
	}
	if took := time.Since(start); took > round {
		t.Errorf("Plan took %v, past the round's deadline %v", took, round)
	}
	select {
	case d := <-left:
		if d > round/2 {
			t.Errorf("the plugin call had %v of the round's %v: want at most half", d, round)
		}
	default:
		t.Error("the plugin call had no deadline")
	}
	if p.Status().Healthy {
		t.Error("a plugin that timed out is marked healthy")
	}
}

// The policy logs its transitions — failing (with the fallback it plans
// with), healthy again — through the logger it is given, not every call: it
// logged nothing before, so a tier switched to its fallback silently.
func TestPluginLogsTransitions(t *testing.T) {
	var down atomic.Bool
	addr := serveFunc(t, func(context.Context, *wire.PlanRequest) (*wire.PlanResponse, error) {
		if down.Load() {
			return nil, status.Error(codes.Unavailable, "down for maintenance")
		}
		return &wire.PlanResponse{Plan: &wire.Plan{Status: wire.PlanStatus(interfaces.StatusOK)}}, nil
	})
	p := newPlugin(t, interfaces.PolicyConfig{"address": addr, "retry": "1ms", "fallback": "greedy"})
	var out testutil.Buffer
	p.SetLogger(log.New(&out, "", 0))
	plan := func() {
		t.Helper()
		time.Sleep(5 * time.Millisecond) // past the retry back-off
		if _, err := p.Plan(context.Background(), view()); err != nil {
			t.Fatal(err)
		}
	}
	plan()
	plan() // healthy, still: nothing new
	down.Store(true)
	plan()
	plan() // unhealthy, still: nothing new
	plan()
	down.Store(false)
	plan()
	plan()
	got := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(got) != 3 {
		t.Fatalf("log %q: want 3 lines (healthy, failed, healthy again)", got)
	}
	if !strings.Contains(got[0], "healthy") ||
		!strings.Contains(got[1], "failed") || !strings.Contains(got[1], "down for maintenance") || !strings.Contains(got[1], "fallback greedy") ||
		!strings.Contains(got[2], "healthy again") || !strings.Contains(got[2], "3 failed calls") {
		t.Errorf("log %q", got)
	}
	for _, l := range got {
		if !strings.Contains(l, addr) {
			t.Errorf("log line %q does not name the plugin", l)
		}
	}
}
