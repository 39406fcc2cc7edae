package sim

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

func TestParseReplay(t *testing.T) {
	src := "time,shard,cpu,mem,net,input_rate\n60,b,2,10,5,200\n0,a,1,10,5,100\n0,b,3,10,5,300\n"
	s, err := parseReplay(strings.NewReader(src), "x.csv", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.shards) != 2 || s.shards[0] != "b" || s.shards[1] != "a" {
		t.Fatalf("shards %v", s.shards)
	}
	if s.rows[0].t != 0 || s.rows[2].t != time.Minute {
		t.Errorf("rows not sorted by time: %+v", s.rows)
	}
	if s.rows[2].load[0] != 4 || s.rows[2].rate != 400 {
		t.Errorf("scale not applied: %+v", s.rows[2])
	}
	for _, bad := range []struct{ src, want string }{
		{"t,shard,cpu,mem,net,input_rate\n", `column 1 must be "time"`},
		{"time,shard,cpu,mem,net,input_rate\n0,a,-1,0,0,0\n", "x.csv:2: cpu must be a finite number ≥ 0"},
		{"time,shard,cpu,mem,net,input_rate\n0,a,1,0,0\n", "x.csv:2: want 6 columns"},
		{"time,shard,cpu,mem,net,input_rate\n", "no rows"},
	} {
		_, err := parseReplay(strings.NewReader(bad.src), "x.csv", 1)
		if err == nil || !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: got %v, want an ErrInvalid mentioning %q", bad.src, err, bad.want)
		}
	}
}

func TestParseArrivalsAzure(t *testing.T) {
	src := "TIMESTAMP,ContextTokens,GeneratedTokens\n" +
		"2023-11-16 18:17:03.0000000,100,10\n" +
		"2023-11-16 18:17:03.5000000,100,10\n" +
		"2023-11-16 18:17:04.2000000,100,10\n" +
		"2023-11-16 18:17:06.9000000,300,30\n"
	spec := &ArrivalsSpec{Format: "azure", Bin: Duration(time.Second), Weight: "requests", Scale: 1}
	a, err := parseArrivals(strings.NewReader(src), "az.csv", spec)
	if err != nil {
		t.Fatal(err)
	}
	// Bins of 1s from 18:17:03: [2, 1, 0, 1]; mean 1.
	want := []float64{2, 1, 0, 1}
	if len(a.bins) != len(want) {
		t.Fatalf("bins %v", a.bins)
	}
	for i := range want {
		if math.Abs(a.bins[i]-want[i]) > 1e-12 {
			t.Fatalf("bins %v, want %v", a.bins, want)
		}
	}
	if a.at(0) != 2 || a.at(3*time.Second) != 1 || a.at(4*time.Second) != 2 {
		t.Errorf("at(): %v %v %v (the series loops)", a.at(0), a.at(3*time.Second), a.at(4*time.Second))
	}
	spec.Weight = "tokens"
	a, err = parseArrivals(strings.NewReader(src), "az.csv", spec)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(a.bins[3]-330/(660.0/4)) > 1e-12 {
		t.Errorf("token-weighted bins %v", a.bins)
	}
	_, err = parseArrivals(strings.NewReader("TIMESTAMP,a,b\nyesterday,1,1\n"), "az.csv", spec)
	if err == nil || !strings.Contains(err.Error(), "az.csv:2") {
		t.Errorf("bad timestamp: %v", err)
	}
}

// TestAzureTraceShipped: the real arrival series in the library parses into
// about 57 one-minute bins with the burstiness the docs describe.
func TestAzureTraceShipped(t *testing.T) {
	a, err := readArrivals("scenarios/data/azure-llm-code.csv", &ArrivalsSpec{Format: "azure", Bin: Duration(time.Minute), Weight: "requests", Scale: 1})
	if err != nil {
		t.Fatal(err)
	}
	peak, empty := 0.0, 0
	for _, b := range a.bins {
		peak = math.Max(peak, b)
		if b == 0 {
			empty++
		}
	}
	if len(a.bins) < 55 || len(a.bins) > 60 || peak < 3 || empty == 0 {
		t.Errorf("%d bins, peak %.2f, %d empty", len(a.bins), peak, empty)
	}
}

func TestReplayShardCollision(t *testing.T) {
	dir := t.TempDir()
	csv := "time,shard,cpu,mem,net,input_rate\n0,j-00001,1,0,0,10\n"
	if err := os.WriteFile(filepath.Join(dir, "r.csv"), []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(goodScenario, "events:", "  replay: {file: r.csv}\nevents:", 1)
	if err := os.WriteFile(filepath.Join(dir, "s.yaml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := LoadScenario(filepath.Join(dir, "s.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), sc, Options{})
	if err == nil || !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), `"j-00001"`) {
		t.Fatalf("a replayed shard named like a generated one: %v", err)
	}
}
