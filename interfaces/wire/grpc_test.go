package wire_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

// serve starts a gRPC server on a real loopback socket and returns a client
// connection to it. Both are closed when the test ends.
func serve(t *testing.T, register func(s *grpc.Server)) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	register(srv)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cc.Close()
		srv.Stop()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return cc
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// firstFit is a trivial TierPolicy written against the generated interface: it
// places every unassigned shard on the first active child.
type firstFit struct {
	wire.UnimplementedTierPolicyServer
}

func (firstFit) Info(context.Context, *wire.InfoRequest) (*wire.InfoResponse, error) {
	return &wire.InfoResponse{Name: "first-fit", ContractVersions: []uint32{1}}, nil
}

func (firstFit) Plan(_ context.Context, req *wire.PlanRequest) (*wire.PlanResponse, error) {
	v := req.GetView()
	var target string
	for _, c := range v.GetChildren() {
		if c.GetState() == wire.ChildState_CHILD_STATE_ACTIVE {
			target = c.GetId()
			break
		}
	}
	placed := map[string]bool{}
	for _, a := range v.GetAssignments() {
		placed[a.GetShard()] = true
	}
	plan := &wire.Plan{Tier: v.GetTier(), Summary: &wire.Summary{}}
	for _, s := range v.GetShards() {
		switch {
		case placed[s.GetId()]:
		case target == "":
			plan.Status = wire.PlanStatus_PLAN_STATUS_INFEASIBLE
			plan.Infeasible = append(plan.Infeasible, &wire.Infeasible{Shard: s.GetId()})
		default:
			plan.Moves = append(plan.Moves, &wire.Move{Shard: s.GetId(), To: target, Reason: "first fit", Goal: "place"})
		}
	}
	plan.Summary.Moves = int64(len(plan.Moves))
	return &wire.PlanResponse{Plan: plan}, nil
}

func testView() *interfaces.View {
	return &interfaces.View{
		Tier: "region", Instance: "eu-1", Now: time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC), Seed: 42,
		Children: []interfaces.Child{
			{ID: "h1", Tier: "host", Capacity: interfaces.Load{CPU: 4}, State: interfaces.ChildDraining},
			{ID: "h2", Tier: "host", Capacity: interfaces.Load{CPU: 8, Extra: map[string]float64{"gpu": 1}}},
		},
		Shards: []interfaces.Shard{
			{ID: "s1", Job: "j", Load: interfaces.Load{CPU: 1}},
			{ID: "s2", Job: "j", Load: interfaces.Load{CPU: 2}},
			{ID: "s3", Job: "j", Load: interfaces.Load{CPU: 1}},
		},
		Assignments: []interfaces.Assignment{{Shard: "s2", Child: "h1", Epoch: 3}},
	}
}

func TestTierPolicyOverSocket(t *testing.T) {
	cc := serve(t, func(s *grpc.Server) { wire.RegisterTierPolicyServer(s, firstFit{}) })
	client := wire.NewTierPolicyClient(cc)
	ctx := testCtx(t)

	info, err := client.Info(ctx, &wire.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	version, err := wire.Negotiate(wire.SupportedVersions(), info.GetContractVersions())
	if err != nil || version != 1 || info.GetName() != "first-fit" {
		t.Fatalf("info %v, negotiated %d, %v", info, version, err)
	}
	view, err := wire.ViewToWire(testView())
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Plan(ctx, &wire.PlanRequest{ContractVersion: version, View: view})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := wire.PlanFromWire(resp.GetPlan())
	if err != nil {
		t.Fatal(err)
	}
	want := interfaces.Plan{
		Tier:   "region",
		Status: interfaces.StatusOK,
		Moves: []interfaces.Move{
			{Shard: "s1", To: "h2", Reason: "first fit", Goal: "place"},
			{Shard: "s3", To: "h2", Reason: "first fit", Goal: "place"},
		},
		Summary: interfaces.Summary{Moves: 2},
	}
	if !reflect.DeepEqual(plan, want) {
		t.Fatalf("plan over the socket:\n got %#v\nwant %#v", plan, want)
	}
}

// spread is a trivial interfaces.Policy: shard i of the unassigned ones goes to
// active child (i + seed) mod n. It records the config it was built with in the
// reason, and fails with ErrNotFound when the view has no children.
type spread struct{ cfg interfaces.PolicyConfig }

func (spread) Name() string { return "spread" }

func (p spread) Plan(_ context.Context, v *interfaces.View) (interfaces.Plan, error) {
	var active []interfaces.ChildID
	for _, c := range v.Children {
		if c.State == interfaces.ChildActive {
			active = append(active, c.ID)
		}
	}
	if len(v.Children) == 0 {
		return interfaces.Plan{}, fmt.Errorf("view %s/%s has no children: %w", v.Tier, v.Instance, interfaces.ErrNotFound)
	}
	placed := map[interfaces.ShardID]bool{}
	for _, a := range v.Assignments {
		placed[a.Shard] = true
	}
	out := interfaces.Plan{Tier: v.Tier, Summary: interfaces.Summary{LB: map[string]float64{"cpu": 0.25}}}
	i := 0
	for _, s := range v.Shards {
		if placed[s.ID] {
			continue
		}
		if len(active) == 0 {
			out.Status = interfaces.StatusInfeasible
			out.Infeasible = append(out.Infeasible, interfaces.Infeasible{Shard: s.ID, Excluded: map[interfaces.ChildID]string{v.Children[0].ID: "draining"}})
			continue
		}
		to := active[(i+int(v.Seed))%len(active)]
		out.Moves = append(out.Moves, interfaces.Move{Shard: s.ID, To: to, Reason: "spread " + p.cfg["mode"], Goal: "balance", Delta: -float64(v.Now.Unix() % 7)})
		i++
	}
	return out, nil
}

func spreadFactory(cfg interfaces.PolicyConfig) (interfaces.Policy, error) {
	if cfg["mode"] == "bad" {
		return nil, fmt.Errorf("mode %q: %w", cfg["mode"], interfaces.ErrInvalid)
	}
	return spread{cfg: cfg}, nil
}

// A policy served with PolicyServer and called through DialPolicy gives the same
// plan as the policy called in process.
func TestRemotePolicyMatchesLocal(t *testing.T) {
	cc := serve(t, func(s *grpc.Server) { wire.RegisterTierPolicyServer(s, wire.NewPolicyServer("spread", spreadFactory)) })
	ctx := testCtx(t)
	cfg := interfaces.PolicyConfig{"mode": "wide"}
	remote, err := wire.DialPolicy(ctx, cc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if remote.Name() != "spread" || remote.Version() != wire.ContractVersion {
		t.Fatalf("name %q version %d", remote.Name(), remote.Version())
	}
	views := []*interfaces.View{testView(), {Tier: "global", Children: []interfaces.Child{{ID: "r1", Tier: "region", Capacity: interfaces.Load{Tasks: 1}, State: interfaces.ChildFailed}}, Shards: []interfaces.Shard{{ID: "s9", Job: "j"}}}}
	views[0].Seed = 1
	for i, v := range views {
		local, err := spread{cfg: cfg}.Plan(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := remote.Plan(ctx, v)
		if err != nil {
			t.Fatalf("view %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, local) {
			t.Fatalf("view %d: remote plan differs from local:\nremote %#v\nlocal  %#v", i, got, local)
		}
	}
	if got, _ := remote.Plan(ctx, views[0]); len(got.Moves) != 2 || got.Moves[0].To != "h2" || got.Moves[0].Reason != "spread wide" {
		t.Fatalf("the config did not reach the plugin, or the moves are wrong: %#v", got.Moves)
	}
}

// Errors cross the socket as statuses and come back matching their sentinels.
func TestRemotePolicyErrors(t *testing.T) {
	cc := serve(t, func(s *grpc.Server) { wire.RegisterTierPolicyServer(s, wire.NewPolicyServer("spread", spreadFactory)) })
	ctx := testCtx(t)
	client := wire.NewTierPolicyClient(cc)

	_, err := client.Plan(ctx, &wire.PlanRequest{ContractVersion: 99, View: &wire.View{Tier: "t"}})
	if status.Code(err) != codes.FailedPrecondition || !errors.Is(wire.FromStatus(err), wire.ErrNoCommonVersion) {
		t.Errorf("version 99: %v", err)
	}
	_, err = client.Plan(ctx, &wire.PlanRequest{ContractVersion: 1, View: &wire.View{}})
	if status.Code(err) != codes.InvalidArgument || !errors.Is(wire.FromStatus(err), interfaces.ErrInvalid) ||
		!strings.Contains(err.Error(), "plan_request.view.tier: is required") {
		t.Errorf("empty view: %v", err)
	}

	bad, err := wire.DialPolicy(ctx, cc, interfaces.PolicyConfig{"mode": "bad"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Plan(ctx, testView()); !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), `mode "bad"`) {
		t.Errorf("bad config: %v", err)
	}

	remote, err := wire.DialPolicy(ctx, cc, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = remote.Plan(ctx, &interfaces.View{Tier: "region", Instance: "eu-9"})
	if !errors.Is(err, interfaces.ErrNotFound) || errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), "view region/eu-9 has no children") {
		t.Errorf("policy error: %v", err)
	}
	if _, err := remote.Plan(ctx, &interfaces.View{Tier: "r", Now: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)}); !errors.Is(err, interfaces.ErrInvalid) {
		t.Errorf("unencodable now: %v", err)
	}
}

// onlyV99 speaks a contract version this build does not.
type onlyV99 struct {
	wire.UnimplementedTierPolicyServer
}

func (onlyV99) Info(context.Context, *wire.InfoRequest) (*wire.InfoResponse, error) {
	return &wire.InfoResponse{Name: "future", ContractVersions: []uint32{99}}, nil
}

// badPlans returns a plan that does not validate.
type badPlans struct {
	wire.UnimplementedTierPolicyServer
}

func (badPlans) Info(context.Context, *wire.InfoRequest) (*wire.InfoResponse, error) {
	return &wire.InfoResponse{Name: "bad", ContractVersions: []uint32{1}}, nil
}

func (badPlans) Plan(_ context.Context, req *wire.PlanRequest) (*wire.PlanResponse, error) {
	if req.GetView().GetInstance() == "empty" {
		return &wire.PlanResponse{}, nil
	}
	return &wire.PlanResponse{Plan: &wire.Plan{Moves: []*wire.Move{{Shard: "s1", From: "h1", To: "h1"}}}}, nil
}

func TestDialPolicyNegotiationAndBadPlugins(t *testing.T) {
	ctx := testCtx(t)
	cc := serve(t, func(s *grpc.Server) { wire.RegisterTierPolicyServer(s, onlyV99{}) })
	if _, err := wire.DialPolicy(ctx, cc, nil); !errors.Is(err, wire.ErrNoCommonVersion) || !strings.Contains(err.Error(), `"future"`) {
		t.Errorf("plugin speaking only v99: %v", err)
	}

	cc = serve(t, func(s *grpc.Server) { wire.RegisterTierPolicyServer(s, badPlans{}) })
	p, err := wire.DialPolicy(ctx, cc, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Plan(ctx, &interfaces.View{Tier: "t"})
	var fe *interfaces.FieldError
	if !errors.As(err, &fe) || fe.Field != "plan_response.plan.moves[0].to" {
		t.Errorf("invalid plan from the plugin: %v", err)
	}
	_, err = p.Plan(ctx, &interfaces.View{Tier: "t", Instance: "empty"})
	if !errors.As(err, &fe) || fe.Field != "plan_response.plan" {
		t.Errorf("missing plan from the plugin: %v", err)
	}
}

// parent is a trivial Session server: it answers a Hello with a LeaseGrant at the
// negotiated version, and each Report with an Assign of the first shard it lists
// at the report's epoch + 1. It ends the stream when the child does.
type parent struct {
	wire.UnimplementedSessionServer
}

func (parent) Connect(stream grpc.BidiStreamingServer[wire.ChildMessage, wire.ParentMessage]) error {
	for {
		msg, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		switch m := msg.GetMsg().(type) {
		case *wire.ChildMessage_Hello:
			v, err := wire.Negotiate(wire.SupportedVersions(), wire.HelloVersions(m.Hello))
			if err != nil {
				return wire.ToStatus(err)
			}
			grant := &wire.LeaseGrant{LeaseId: "lease-" + m.Hello.GetChildId(), TtlNanos: int64(5 * time.Second), Term: 7, LeaderId: "p1", ProtocolVersion: v}
			if err := stream.Send(&wire.ParentMessage{Msg: &wire.ParentMessage_LeaseGrant{LeaseGrant: grant}}); err != nil {
				return err
			}
		case *wire.ChildMessage_Report:
			r, err := wire.ReportFromWire(m.Report)
			if err != nil {
				return wire.ToStatus(err)
			}
			if len(r.Shards) == 0 {
				continue
			}
			assign := &wire.Assign{Shard: wire.ShardToWire(interfaces.Shard{ID: r.Shards[0].Shard, Job: "j"}), Epoch: r.Epoch + 1}
			if err := stream.Send(&wire.ParentMessage{Msg: &wire.ParentMessage_Assign{Assign: assign}}); err != nil {
				return err
			}
		}
	}
}

func TestSessionOverSocket(t *testing.T) {
	cc := serve(t, func(s *grpc.Server) { wire.RegisterSessionServer(s, parent{}) })
	ctx := testCtx(t)
	stream, err := wire.NewSessionClient(cc).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hello := &wire.Hello{ChildId: "h1", Tier: "host", Capacity: wire.LoadToWire(interfaces.Load{CPU: 8}), ProtocolVersion: 3, MinProtocolVersion: 1, HeldEpochs: map[string]uint64{"s1": 4}}
	if err := stream.Send(&wire.ChildMessage{Msg: &wire.ChildMessage_Hello{Hello: hello}}); err != nil {
		t.Fatal(err)
	}
	got, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if g := got.GetLeaseGrant(); g.GetProtocolVersion() != 1 || g.GetLeaseId() != "lease-h1" || g.GetTerm() != 7 {
		t.Fatalf("lease grant: %v", got)
	}
	report := wire.ReportToWire(interfaces.Report{Child: "h1", Epoch: 10, Shards: []interfaces.ShardLoad{{Shard: "s7"}}})
	if err := stream.Send(&wire.ChildMessage{Msg: &wire.ChildMessage_Report{Report: report}}); err != nil {
		t.Fatal(err)
	}
	got, err = stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if a := got.GetAssign(); a.GetEpoch() != 11 || a.GetShard().GetId() != "s7" {
		t.Fatalf("assign: %v", got)
	}
	// An invalid report ends the stream with InvalidArgument naming the field.
	bad := &wire.Report{Child: "h1", Throughput: -1}
	if err := stream.Send(&wire.ChildMessage{Msg: &wire.ChildMessage_Report{Report: bad}}); err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "report.throughput: must be ≥ 0") {
		t.Fatalf("invalid report: %v", err)
	}

	// A child that speaks only a future version is refused.
	stream, err = wire.NewSessionClient(cc).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	future := &wire.Hello{ChildId: "h2", ProtocolVersion: 9, MinProtocolVersion: 5}
	if err := stream.Send(&wire.ChildMessage{Msg: &wire.ChildMessage_Hello{Hello: future}}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); !errors.Is(wire.FromStatus(err), wire.ErrNoCommonVersion) {
		t.Fatalf("future child: %v", err)
	}
}

// admin implements one Admin call; the rest answer Unimplemented.
type admin struct{ wire.UnimplementedAdminServer }

func (admin) RaftPeers(_ context.Context, req *wire.RaftPeersRequest) (*wire.RaftPeersResponse, error) {
	if req.GetTier() != "" && req.GetTier() != "global" {
		return nil, wire.ToStatus(fmt.Errorf("tier %q: %w", req.GetTier(), interfaces.ErrNotFound))
	}
	return &wire.RaftPeersResponse{Peers: []*wire.RaftPeer{{Id: "g1", Address: "127.0.0.1:7401", Leader: true, Voter: true}}, Term: 2}, nil
}

func TestAdminOverSocket(t *testing.T) {
	cc := serve(t, func(s *grpc.Server) { wire.RegisterAdminServer(s, admin{}) })
	ctx := testCtx(t)
	client := wire.NewAdminClient(cc)
	resp, err := client.RaftPeers(ctx, &wire.RaftPeersRequest{})
	if err != nil || len(resp.GetPeers()) != 1 || !resp.GetPeers()[0].GetLeader() || resp.GetTerm() != 2 {
		t.Fatalf("raft peers: %v, %v", resp, err)
	}
	_, err = client.RaftPeers(ctx, &wire.RaftPeersRequest{Tier: "rack"})
	if !errors.Is(wire.FromStatus(err), interfaces.ErrNotFound) {
		t.Fatalf("unknown tier: %v", err)
	}
	if _, err := client.Status(ctx, &wire.StatusRequest{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("status: %v", err)
	}
}
