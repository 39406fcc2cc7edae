package promtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Need returns the path of command, failing the test (not skipping it) when
// it is missing: the real component is part of the test.
func Need(t testing.TB, command string) string {
	t.Helper()
	p, err := exec.LookPath(command)
	if err != nil {
		t.Fatalf("%s not found on PATH: this test runs the real one; install it with `sudo make deps` (.ci/packages)", command)
	}
	return p
}

// Server is a running Prometheus.
type Server struct {
	URL string
	cmd *exec.Cmd
	log *os.File
}

// Start runs Prometheus scraping targets (host:port of /metrics) every
// interval, with its data in a temporary directory. It stops at the test's end.
func Start(t testing.TB, targets []string, interval time.Duration) *Server {
	t.Helper()
	bin := Need(t, "prometheus")
	dir := t.TempDir()
	var b strings.Builder
	fmt.Fprintf(&b, "global:\n  scrape_interval: %s\n  scrape_timeout: %s\nscrape_configs:\n  - job_name: strata\n    static_configs:\n      - targets:\n", interval, interval)
	for _, tg := range targets {
		fmt.Fprintf(&b, "          - %q\n", tg)
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	s := &Server{URL: "http://" + addr, cmd: cmd, log: logf}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			out, _ := os.ReadFile(logf.Name())
			t.Logf("prometheus log:\n%s", out)
		}
		logf.Close()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.URL + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready after 30s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func freeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Sample is one series of a query's answer.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Query runs an instant PromQL query.
func (s *Server) Query(ctx context.Context, q string) ([]Sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/api/v1/query?query="+url.QueryEscape(q), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("query %q: %w", q, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", q, body.Error)
	}
	out := make([]Sample, 0, len(body.Data.Result))
	for _, r := range body.Data.Result {
		str, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			return nil, fmt.Errorf("query %q: value %q: %w", q, str, err)
		}
		out = append(out, Sample{Labels: r.Metric, Value: v})
	}
	return out, nil
}

// By runs q and returns its values keyed by the value of label (a query
// aggregated "by (label)").
func (s *Server) By(ctx context.Context, q, label string) (map[string]float64, error) {
	res, err := s.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, r := range res {
		out[r.Labels[label]] = r.Value
	}
	return out, nil
}

// Format prints a map of values in a stable order, for messages.
func Format(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%g", k, m[k])
	}
	return "{" + strings.Join(parts, " ") + "}"
}
