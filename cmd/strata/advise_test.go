package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/strata-sched/strata/balancer/models"
	"github.com/strata-sched/strata/interfaces/wire"
)

// runAdvise runs "strata job advise ARGS" and returns the exit code, stdout and
// the error text.
func runAdvise(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	root := newRootCmd(&stdout, &stderr)
	if sub, _, err := root.Find([]string{"job", "advise"}); err != nil || sub.Name() != "advise" {
		t.Fatalf("strata job advise is not a command: %v", err)
	}
	root.SetArgs(append([]string{"job", "advise"}, args...))
	err := root.Execute()
	if err == nil {
		return 0, stdout.String(), ""
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code, stdout.String(), err.Error()
	}
	return 2, stdout.String(), err.Error()
}

var ds2Dir = filepath.Join("..", "..", "balancer", "models", "testdata", "ds2")

func TestAdviseOfflineTable(t *testing.T) {
	code, out, msg := runAdvise(t, "--topology", filepath.Join(ds2Dir, "flink_wordcount_topology.csv"), "--rates", filepath.Join(ds2Dir, "flink_rates.log"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, msg)
	}
	t.Logf("strata job advise --topology ... --rates ...:\n%s", out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 7 || !strings.HasPrefix(lines[0], "WINDOW") {
		t.Fatalf("want a header and 6 rows (2 windows × 3 operators):\n%s", out)
	}
	// DS2's numbers for the Flink example (see balancer/models/ds2_test.go):
	// flat map 2 → 1 (exact 0.895, then 0.919), sink 1 → 1 (0.604, 0.714).
	for _, want := range [][]string{
		{"1", "Source: Custom Source", "1", "1", "-", "-", "109705"},
		{"1", "Splitter FlatMap", "2", "1", "0.895", "109705", "1114679", "122563"},
		{"1", "Count -> Latency Sink", "1", "1", "0.604", "1114679", "0"},
		{"2", "Splitter FlatMap", "2", "1", "0.919", "116940", "1188189", "127272"},
		{"2", "Count -> Latency Sink", "1", "1", "0.714", "1188189", "0"},
	} {
		found := false
		for _, l := range lines[1:] {
			if strings.HasPrefix(l, want[0]+" ") && strings.Contains(l, want[1]) && fieldsAfter(l, want[1], want[2:]) {
				found = true
			}
		}
		if !found {
			t.Errorf("no row %v in\n%s", want, out)
		}
	}
}

// fieldsAfter reports whether the whitespace-separated fields of line after
// name start with want.
func fieldsAfter(line, name string, want []string) bool {
	i := strings.Index(line, name)
	if i < 0 {
		return false
	}
	f := strings.Fields(line[i+len(name):])
	if len(f) < len(want) {
		return false
	}
	for k := range want {
		if f[k] != want[k] {
			return false
		}
	}
	return true
}

func TestAdviseOfflineJSON(t *testing.T) {
	code, out, msg := runAdvise(t, "-o", "json", "--topology", filepath.Join(ds2Dir, "flink_wordcount_topology.csv"), "--rates", filepath.Join(ds2Dir, "flink_rates.log"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, msg)
	}
	var adv []models.Advice
	if err := json.Unmarshal([]byte(out), &adv); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(adv) != 2 || len(adv[0].Operators) != 3 {
		t.Fatalf("advice %+v", adv)
	}
	fm := adv[0].Operators[1]
	if fm.Operator != "Splitter FlatMap" || fm.Current != 2 || fm.Advised != 1 || math.Abs(fm.TargetOutput-1114679.0183175134) > 1e-6 {
		t.Errorf("flat map window 1: %+v", fm)
	}
	if s := adv[1].Operators[2]; s.Advised != 1 || math.Abs(s.Exact-0.714288457945994) > 1e-12 {
		t.Errorf("sink window 2: %+v", s)
	}
}

func TestAdviseOfflineBadFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	goodTopo := filepath.Join(ds2Dir, "flink_wordcount_topology.csv")
	goodRates := filepath.Join(ds2Dir, "flink_rates.log")
	badTopo := write("topo.csv", "# header\nsrc,S,1,op,O,two\n")
	badRates := write("rates.log", "# header\nSource: Custom Source,1,1,5,0,100,0,100\nSplitter FlatMap,1,2,5,fast,10,1,1\n")
	shortRates := write("short.log", "Source: Custom Source,1,1,5,0,100,0,100\nSplitter FlatMap,1,2\n")
	partial := write("partial.log", "Source: Custom Source,1,1,5,0,100,0,100\nSplitter FlatMap,1,2,5,10,10,1,1\n")
	cases := []struct {
		name        string
		topo, rates string
		want        []string
	}{
		{"topology field", badTopo, goodRates, []string{badTopo + ":2:14:", "field 6 (total_number_of_operator_instances2)", "got \"two\""}},
		{"rates field", goodTopo, badRates, []string{badRates + ":3:24:", "field 5 (true_processing_rate)", "\"fast\""}},
		{"rates short line", goodTopo, shortRates, []string{shortRates + ":2:", "has 3 fields, want 8"}},
		{"incomplete window", goodTopo, partial, []string{"window 1: operator \"Splitter FlatMap\" has rates for 1 of its 2 instances"}},
		{"missing file", filepath.Join(dir, "nope.csv"), goodRates, []string{"--topology:", "nope.csv"}},
	}
	for _, tc := range cases {
		code, _, msg := runAdvise(t, "--topology", tc.topo, "--rates", tc.rates)
		if code != 2 {
			t.Errorf("%s: exit %d, want 2 (%s)", tc.name, code, msg)
		}
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: error %q does not contain %q", tc.name, msg, w)
			}
		}
	}
}

func TestAdviseFlagErrors(t *testing.T) {
	topo := filepath.Join(ds2Dir, "flink_wordcount_topology.csv")
	rates := filepath.Join(ds2Dir, "flink_rates.log")
	cases := []struct {
		args []string
		want string
	}{
		{nil, "give a JOB (live advice) or --topology and --rates"},
		{[]string{"--topology", topo}, "offline advice needs both files"},
		{[]string{"wc", "--topology", topo, "--rates", rates}, "not both"},
		{[]string{"--topology", topo, "--rates", rates, "--rate-per-shard", "5"}, "--rate-per-shard: only for live advice"},
		{[]string{"wc"}, "--rate-per-shard: required for live advice"},
		{[]string{"wc", "--rate-per-shard", "0"}, "--rate-per-shard: must be a finite number > 0"},
		{[]string{"wc", "--rate-per-shard", "-3"}, "--rate-per-shard: must be a finite number > 0"},
		{[]string{"wc", "--rate-per-shard", "ten"}, "invalid argument \"ten\" for \"--rate-per-shard\""},
		{[]string{"wc", "--rate-per-shard", "5", "--addr", "nohostport"}, "--addr \"nohostport\": must be host:port"},
		{[]string{"--topology", topo, "--rates", rates, "-o", "yaml"}, "--output: must be one of table, json"},
		{[]string{"a", "b", "--rate-per-shard", "5"}, "accepts at most 1 arg"},
	}
	for _, tc := range cases {
		code, _, msg := runAdvise(t, tc.args...)
		if code != 2 || !strings.Contains(msg, tc.want) {
			t.Errorf("%v: exit %d %q, want exit 2 containing %q", tc.args, code, msg, tc.want)
		}
	}
}

// adviseFake is a global tier's Admin API that only lists shards.
type adviseFake struct {
	wire.UnimplementedAdminServer
	shards []*wire.ShardInfo
	asked  []string
}

func (f *adviseFake) ListShards(_ context.Context, req *wire.ListShardsRequest) (*wire.ListShardsResponse, error) {
	f.asked = append(f.asked, req.GetJob())
	return &wire.ListShardsResponse{Shards: f.shards}, nil
}

func TestAdviseLive(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	shard := func(id, job string, rate float64) *wire.ShardInfo {
		return &wire.ShardInfo{Shard: &wire.Shard{Id: id, Job: job, InputRate: rate}}
	}
	f := &adviseFake{shards: []*wire.ShardInfo{
		shard("wc/0", "wc", 300), shard("wc/1", "wc", 500), shard("wc/2", "wc", 200), shard("wc/3", "wc", 1000),
		shard("other/0", "other", 1e6), // another job's shard, if the server sends it, is not counted
	}}
	srv := grpc.NewServer()
	wire.RegisterAdminServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	addr := lis.Addr().String()

	// 300+500+200+1000 = 2000 records/s over shards of 450 records/s each:
	// ceil(2000/450) = ceil(4.444) = 5 shards; now 2000/(4×450) = 111% busy.
	code, out, msg := runAdvise(t, "wc", "--rate-per-shard", "450", "--addr", addr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, msg)
	}
	t.Logf("strata job advise wc --rate-per-shard 450:\n%s", out)
	if !strings.Contains(out, "CURRENT SHARDS") || !fieldsAfter(out, "\nwc", []string{"4", "5", "4.444", "2000", "450", "111%"}) {
		t.Errorf("table:\n%s", out)
	}
	if len(f.asked) != 1 || f.asked[0] != "wc" {
		t.Errorf("ListShards asked for %v, want [wc]", f.asked)
	}
	code, out, msg = runAdvise(t, "wc", "--rate-per-shard", "1000", "--addr", addr, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, msg)
	}
	var res jobAdviseJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if res.Job != "wc" || res.Current != 4 || res.Advised != 2 || res.TargetInput != 2000 || res.Utilization != 0.5 || !strings.Contains(res.RateSource, "--rate-per-shard") {
		t.Errorf("json %+v", res)
	}
	code, _, msg = runAdvise(t, "ghost", "--rate-per-shard", "10", "--addr", addr)
	if code != 1 || !strings.Contains(msg, `job "ghost": no shards`) {
		t.Errorf("unknown job: exit %d %q", code, msg)
	}
}
