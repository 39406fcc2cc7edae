package telemetry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
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
	m := NewMetrics(map[string]string{"tier": "region"}, 10*time.Millisecond)
	defer m.Close()
	m.Scope.Tagged(map[string]string{"instance": "eu-1"}).Counter("moves_committed_total").Inc(3)
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
	// The reporter flushes on its interval; wait for the values to appear.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, body := get(t, base+"/metrics")
		if strings.Contains(body, `strata_moves_committed_total{instance="eu-1",tier="region"} 3`) &&
			strings.Contains(body, `strata_shards_owned{tier="region"} 42`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics missing:\n%s", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
