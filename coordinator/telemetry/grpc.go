package telemetry

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
)

// RegisterGRPC adds the standard gRPC health service (grpc.health.v1: SERVING
// when ready says so, NOT_SERVING with the reason in the log otherwise; the
// same answer as /readyz) and server reflection (grpcurl, grpc_cli) to s.
func RegisterGRPC(s *grpc.Server, ready ReadyFunc) {
	healthpb.RegisterHealthServer(s, health{ready: ready})
	reflection.Register(s)
}

type health struct {
	healthpb.UnimplementedHealthServer
	ready ReadyFunc
}

// Check answers for the whole server ("") and any service it serves.
func (h health) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	st := healthpb.HealthCheckResponse_SERVING
	if h.ready != nil && h.ready() != nil {
		st = healthpb.HealthCheckResponse_NOT_SERVING
	}
	return &healthpb.HealthCheckResponse{Status: st}, nil
}

// Watch is not offered: clients poll Check.
func (h health) Watch(*healthpb.HealthCheckRequest, healthpb.Health_WatchServer) error {
	return status.Error(codes.Unimplemented, "health: Watch is not offered; poll Check")
}
