package telemetry

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServer(t *testing.T) {
	m := NewMetrics(map[string]string{"tier": "region", "instance": "eu-1"})
	defer m.Close()
	m.Scope.Counter("moves_committed_total").Inc(3)
	m.Scope.Gauge("shards_owned").Update(42)
	var notReady error = errors.New("no leader")
	s, err := Listen("127.0.0.1:0", func() error { return notReady }, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	base := "http://" + s.Addr()
	if code, body := get(t, base+"/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("healthz: %d %q", code, body)
	}
	if code, body := get(t, base+"/readyz"); code != 503 || !strings.Contains(body, "no leader") {
		t.Errorf("readyz not ready: %d %q", code, body)
	}
	notReady = nil
	if code, _ := get(t, base+"/readyz"); code != 200 {
		t.Errorf("readyz ready: %d", code)
	}
	// Values are exported at once (no flush interval); "instance" is
	// Prometheus' own label, so the daemon's is renamed.
	_, body := get(t, base+"/metrics")
	for _, want := range []string{
		`# HELP strata_moves_committed_total Moves (and first placements) this tier committed through Raft.`,
		`# TYPE strata_moves_committed_total counter`,
		`strata_moves_committed_total{exported_instance="eu-1",tier="region"} 3`,
		`strata_shards_owned{exported_instance="eu-1",tier="region"} 42`,
		`# TYPE strata_build_info gauge`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
}

func TestGRPCHealthAndReflection(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	var notReady error = errors.New("no leader")
	RegisterGRPC(s, func() error { return notReady })
	go func() { _ = s.Serve(lis) }()
	defer s.Stop()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	h := healthpb.NewHealthClient(cc)
	ctx := context.Background()
	if r, err := h.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("not ready: %v %v", r, err)
	}
	notReady = nil
	if r, err := h.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("ready: %v %v", r, err)
	}
	stream, err := reflectionpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sv := range resp.GetListServicesResponse().GetService() {
		names = append(names, sv.GetName())
	}
	if !strings.Contains(strings.Join(names, " "), "grpc.health.v1.Health") {
		t.Errorf("reflection lists %v", names)
	}
}
