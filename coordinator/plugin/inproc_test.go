package plugin_test

import (
	"context"
	"math"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/strata-sched/strata/coordinator/plugin"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
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
