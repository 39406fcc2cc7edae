package wire

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	"github.com/strata-sched/strata/interfaces"
)

// PolicyServer serves a tier policy as a TierPolicy plugin: every Plan call checks
// the contract version, converts and validates the view, builds the policy from the
// request's config with the factory, and returns its plan. Errors travel as gRPC
// statuses (ToStatus): a bad view is InvalidArgument, an unsupported version
// FailedPrecondition.
type PolicyServer struct {
	UnimplementedTierPolicyServer
	name    string
	factory interfaces.Factory
}

var _ TierPolicyServer = (*PolicyServer)(nil)

// NewPolicyServer returns a server for the policy that factory builds, announced
// under name. To serve one fixed policy, pass a factory that returns it.
func NewPolicyServer(name string, factory interfaces.Factory) *PolicyServer {
	return &PolicyServer{name: name, factory: factory}
}

// Info names the plugin and lists the contract versions it speaks.
func (s *PolicyServer) Info(context.Context, *InfoRequest) (*InfoResponse, error) {
	return &InfoResponse{Name: s.name, ContractVersions: SupportedVersions()}, nil
}

// Plan runs the policy on the request's view.
func (s *PolicyServer) Plan(ctx context.Context, req *PlanRequest) (*PlanResponse, error) {
	if _, err := Negotiate(SupportedVersions(), []uint32{req.GetContractVersion()}); err != nil {
		return nil, ToStatus(fmt.Errorf("plan_request.contract_version %d: %w", req.GetContractVersion(), err))
	}
	v, err := ViewFromWire(req.GetView())
	if err != nil {
		return nil, ToStatus(reroot(err, "view", "plan_request.view"))
	}
	if s.factory == nil {
		return nil, ToStatus(fmt.Errorf("policy %q: no factory", s.name))
	}
	p, err := s.factory(interfaces.PolicyConfig(copyMap[string](req.GetConfig())))
	if err != nil {
		return nil, ToStatus(fmt.Errorf("policy %q: config: %w", s.name, err))
	}
	plan, err := p.Plan(ctx, v)
	if err != nil {
		return nil, ToStatus(fmt.Errorf("policy %q: %w", s.name, err))
	}
	return &PlanResponse{Plan: PlanToWire(plan)}, nil
}

// RemotePolicy is an interfaces.Policy that runs in a plugin process behind a
// TierPolicy service.
type RemotePolicy struct {
	client  TierPolicyClient
	name    string
	version uint32
	config  map[string]string
}

var _ interfaces.Policy = (*RemotePolicy)(nil)

// DialPolicy asks the plugin behind cc for its name and versions, negotiates the
// contract version, and returns the policy. cfg is sent with every Plan call.
func DialPolicy(ctx context.Context, cc grpc.ClientConnInterface, cfg interfaces.PolicyConfig) (*RemotePolicy, error) {
	client := NewTierPolicyClient(cc)
	info, err := client.Info(ctx, &InfoRequest{})
	if err != nil {
		return nil, fmt.Errorf("tier policy plugin: info: %w", FromStatus(err))
	}
	v, err := Negotiate(SupportedVersions(), info.GetContractVersions())
	if err != nil {
		return nil, fmt.Errorf("tier policy plugin %q: %w", info.GetName(), err)
	}
	return &RemotePolicy{client: client, name: info.GetName(), version: v, config: copyMap[string](cfg)}, nil
}

// Name is the name the plugin announced.
func (r *RemotePolicy) Name() string { return r.name }

// Version is the negotiated contract version.
func (r *RemotePolicy) Version() uint32 { return r.version }

// Plan sends the view to the plugin and returns its plan, validated. A status
// error from the plugin comes back as FromStatus makes it.
func (r *RemotePolicy) Plan(ctx context.Context, v *interfaces.View) (interfaces.Plan, error) {
	mv, err := ViewToWire(v)
	if err != nil {
		return interfaces.Plan{}, err
	}
	resp, err := r.client.Plan(ctx, &PlanRequest{ContractVersion: r.version, View: mv, Config: r.config})
	if err != nil {
		return interfaces.Plan{}, fmt.Errorf("tier policy plugin %q: %w", r.name, FromStatus(err))
	}
	if resp.GetPlan() == nil {
		return interfaces.Plan{}, fmt.Errorf("tier policy plugin %q: %w", r.name, fieldErr("plan_response.plan", "is required", nil))
	}
	p, err := PlanFromWire(resp.GetPlan())
	if err != nil {
		err = reroot(err, "plan", "plan_response.plan")
		return interfaces.Plan{}, fmt.Errorf("tier policy plugin %q returned an invalid plan: %w", r.name, err)
	}
	return p, nil
}
