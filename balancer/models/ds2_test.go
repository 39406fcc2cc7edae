package models

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-sched/strata/interfaces"
)

func loadDS2(t *testing.T) (*Topology, []Window) {
	t.Helper()
	dir := filepath.Join("testdata", "ds2")
	tf, err := os.Open(filepath.Join(dir, "flink_wordcount_topology.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer tf.Close()
	topo, err := ParseTopology(tf, "flink_wordcount_topology.csv")
	if err != nil {
		t.Fatal(err)
	}
	rf, err := os.Open(filepath.Join(dir, "flink_rates.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	wins, err := ParseRates(rf, "flink_rates.log")
	if err != nil {
		t.Fatal(err)
	}
	return topo, wins
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// TestDS2PublishedExample checks the advisor on DS2's own offline example
// (testdata/ds2, copied from strymon-system/ds2 controller/examples/offline):
// a Flink word count, source (1 instance) → Splitter FlatMap (2) → Count ->
// Latency Sink (1), two measurement windows. DS2's model gives, by hand from
// the log (true rates are per unit of busy time, records/s):
//
// Window 1
//
//	source target output = its true output          = 109705.37486387165
//	flat map true processing = 122512.72886314773 + 122613.65236651529 = 245126.38122966303
//	  per instance           = 245126.38122966303 / 2                  = 122563.19061483152
//	  target input           = the source's target output             = 109705.37486387165
//	  parallelism            = ceil(109705.37486387165 / 122563.19061483152) = ceil(0.8950923545115027) = 1
//	  selectivity            = (1244599.9522210688 + 1246045.8737637822) / 245126.38122966303
//	                         = 2490645.825984851 / 245126.38122966303  = 10.160660037857463
//	  target output          = 109705.37486387165 × 10.160660037857463 = 1114679.0183175134
//	sink true processing per instance = 1845391.0738689527 (1 instance)
//	  parallelism            = ceil(1114679.0183175134 / 1845391.0738689527) = ceil(0.6040340359837844) = 1
//
// Window 2
//
//	source target output     = 116939.79408939973
//	flat map true processing = 131386.98088770403 + 123157.48746087115 = 254544.46834857517
//	  per instance           = 127272.23417428759
//	  parallelism            = ceil(116939.79408939973 / 127272.23417428759) = ceil(0.9188162276562338) = 1
//	  selectivity            = (1334954.8320903534 + 1251393.4697232046) / 254544.46834857517
//	                         = 2586348.3018135577 / 254544.46834857517 = 10.160693408869495
//	  target output          = 116939.79408939973 × 10.160693408869495 = 1188189.3950387198
//	sink                     = ceil(1188189.3950387198 / 1663458.7635021766) = ceil(0.714288457945994) = 1
//
// So DS2 scales the flat map from 2 instances down to 1 and keeps the sink at
// 1, in both windows: one flat-map instance busy all the time would process
// ~122.6k records/s, more than the source's ~110k–117k.
func TestDS2PublishedExample(t *testing.T) {
	topo, wins := loadDS2(t)
	if len(topo.Operators) != 3 || topo.Operators[0].ID != "Source: Custom Source" ||
		topo.Operators[1].ID != "Splitter FlatMap" || topo.Operators[2].ID != "Count -> Latency Sink" {
		t.Fatalf("topology %+v", topo.Operators)
	}
	if len(wins) != 2 || len(wins[0].Rates) != 4 || len(wins[1].Rates) != 4 {
		t.Fatalf("windows: %d (%v)", len(wins), wins)
	}
	type opWant struct {
		current, advised                    int
		exact, targetIn, targetOut, select_ float64
	}
	want := [][3]opWant{
		{ // window 1
			{1, 1, 1, 0, 109705.37486387165, 0},
			{2, 1, 0.8950923545115027, 109705.37486387165, 1114679.0183175134, 10.160660037857463},
			{1, 1, 0.6040340359837844, 1114679.0183175134, 0, 0},
		},
		{ // window 2
			{1, 1, 1, 0, 116939.79408939973, 0},
			{2, 1, 0.9188162276562338, 116939.79408939973, 1188189.3950387198, 10.160693408869495},
			{1, 1, 0.714288457945994, 1188189.3950387198, 0, 0},
		},
	}
	advice, err := AdviseAll(topo, wins)
	if err != nil {
		t.Fatal(err)
	}
	for w, a := range advice {
		if a.Window != w+1 {
			t.Errorf("window number %d, want %d", a.Window, w+1)
		}
		for i, oa := range a.Operators {
			x := want[w][i]
			if oa.Current != x.current || oa.Advised != x.advised || !near(oa.Exact, x.exact) ||
				!near(oa.TargetInput, x.targetIn) || !near(oa.TargetOutput, x.targetOut) {
				t.Errorf("window %d %s: current %d advised %d exact %.16g in %.17g out %.17g; DS2 gives %d %d %.16g %.17g %.17g",
					w+1, oa.Operator, oa.Current, oa.Advised, oa.Exact, oa.TargetInput, oa.TargetOutput,
					x.current, x.advised, x.exact, x.targetIn, x.targetOut)
			}
			if i > 0 && oa.Selectivity != 0 && !near(oa.Selectivity, x.select_) {
				t.Errorf("window %d %s: selectivity %.16g, DS2 %.16g", w+1, oa.Operator, oa.Selectivity, x.select_)
			}
			if (i == 0) != oa.Source {
				t.Errorf("window %d %s: source %v", w+1, oa.Operator, oa.Source)
			}
		}
	}
	if advice[0].Timestamp != 115963235065655 || advice[1].Timestamp != 115983240052103 {
		t.Errorf("timestamps %d %d", advice[0].Timestamp, advice[1].Timestamp)
	}
}

// TestDS2OneStep: DS2's claim is that one decision suffices. Deploy the advice
// — each operator at its advised parallelism, every instance with the same
// true rates per instance as measured (DS2's assumption: rates per instance do
// not depend on the parallelism) — and ask again: the advice is the same, so
// no second step is needed. Shown on the published example and on a larger
// dataflow that needs scaling up.
func TestDS2OneStep(t *testing.T) {
	topo, wins := loadDS2(t)
	check := func(name string, topo *Topology, w Window) {
		a1, err := Advise(topo, w, 1)
		if err != nil {
			t.Fatal(err)
		}
		// Redeploy: per operator, advised instances with the average per-instance rates.
		var next Window
		for i, oa := range a1.Operators {
			per := oa.TrueRatePerInstance
			outPer := oa.TrueOutput / float64(oa.Current)
			for k := 1; k <= oa.Advised; k++ {
				next.Rates = append(next.Rates, InstanceRate{Operator: topo.Operators[i].ID, Instance: k, Instances: oa.Advised,
					TrueProcessing: per, TrueOutput: outPer})
			}
		}
		a2, err := Advise(topo, next, 2)
		if err != nil {
			t.Fatal(err)
		}
		for i := range a1.Operators {
			o1, o2 := a1.Operators[i], a2.Operators[i]
			if o2.Current != o1.Advised || o2.Advised != o1.Advised || !near(o2.TargetInput, o1.TargetInput) {
				t.Errorf("%s %s: after deploying %d instances the advice is %d (target in %g vs %g): not one step",
					name, o1.Operator, o1.Advised, o2.Advised, o2.TargetInput, o1.TargetInput)
			}
		}
	}
	check("flink window 1", topo, wins[0])
	check("flink window 2", topo, wins[1])
	big, bigWin := diamond(t)
	check("diamond", big, bigWin)
}

// diamond is src → {a, b} → join → sink with rates that need scaling up:
//
//	src: 2 instances, true output 600 + 400                = 1000 records/s
//	a:   1 instance, true processing 300, true output 600   → selectivity 2
//	     target input 1000 → ceil(1000/300) = ceil(3.33) = 4;  target output 2000
//	b:   2 instances, true processing 250 + 150 = 400 → 200 per instance, output 40 → selectivity 0.1
//	     target input 1000 → ceil(1000/200) = 5;             target output 100
//	join: 3 instances, true processing 3 × 210 = 630 → 210 per instance, output 315 → selectivity 0.5
//	     target input 2000 + 100 = 2100 → ceil(2100/210) = 10 exactly (not 11); target output 1050
//	sink: 1 instance, true processing 5000, output 0 → target input 1050 → 1
func diamond(t testing.TB) (*Topology, Window) {
	t.Helper()
	topo, err := NewTopology(
		[]Operator{{ID: "sink", Instances: 1}, {ID: "join", Instances: 3}, {ID: "a", Instances: 1}, {ID: "b", Instances: 2}, {ID: "src", Instances: 2}},
		[][2]string{{"join", "sink"}, {"a", "join"}, {"b", "join"}, {"src", "a"}, {"src", "b"}, {"src", "a"}})
	if err != nil {
		t.Fatal(err)
	}
	w := Window{Rates: []InstanceRate{
		{Operator: "src", Instance: 1, Instances: 2, TrueOutput: 600},
		{Operator: "src", Instance: 2, Instances: 2, TrueOutput: 400},
		{Operator: "a", Instance: 1, Instances: 1, TrueProcessing: 300, TrueOutput: 600},
		{Operator: "b", Instance: 2, Instances: 2, TrueProcessing: 150, TrueOutput: 15},
		{Operator: "b", Instance: 1, Instances: 2, TrueProcessing: 250, TrueOutput: 25},
		{Operator: "join", Instance: 1, Instances: 3, TrueProcessing: 210, TrueOutput: 105},
		{Operator: "join", Instance: 2, Instances: 3, TrueProcessing: 210, TrueOutput: 105},
		{Operator: "join", Instance: 3, Instances: 3, TrueProcessing: 210, TrueOutput: 105},
		{Operator: "sink", Instance: 1, Instances: 1, TrueProcessing: 5000},
	}}
	return topo, w
}

func TestDS2Diamond(t *testing.T) {
	topo, w := diamond(t)
	// Topological order: src first, sink last, ties in the given order (a before b).
	var order []string
	for _, o := range topo.Operators {
		order = append(order, o.ID)
	}
	if strings.Join(order, ",") != "src,a,b,join,sink" {
		t.Errorf("order %v", order)
	}
	a, err := Advise(topo, w, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][3]float64{ // advised, target input, target output
		"src": {2, 0, 1000}, "a": {4, 1000, 2000}, "b": {5, 1000, 100}, "join": {10, 2100, 1050}, "sink": {1, 1050, 0},
	}
	for _, oa := range a.Operators {
		x := want[oa.Operator]
		if float64(oa.Advised) != x[0] || !near(oa.TargetInput, x[1]) || !near(oa.TargetOutput, x[2]) {
			t.Errorf("%s: advised %d in %g out %g, want %v", oa.Operator, oa.Advised, oa.TargetInput, oa.TargetOutput, x)
		}
	}
}

func TestParallelismAndAdviseJob(t *testing.T) {
	cases := []struct {
		target, per float64
		n           int
	}{
		{0, 10, 1}, {5, 10, 1}, {10, 10, 1}, {10.0000001, 10, 2}, {0.3 * 3, 0.3, 3}, {2100, 210, 10},
	}
	for _, tc := range cases {
		n, _, err := Parallelism(tc.target, tc.per)
		if err != nil || n != tc.n {
			t.Errorf("Parallelism(%v, %v) = %d, %v; want %d", tc.target, tc.per, n, err, tc.n)
		}
	}
	for _, bad := range [][2]float64{{1, 0}, {1, -1}, {1, math.NaN()}, {-1, 1}, {math.Inf(1), 1}, {1e9, 1e-3}} {
		if _, _, err := Parallelism(bad[0], bad[1]); !errors.Is(err, interfaces.ErrInvalid) {
			t.Errorf("Parallelism(%v, %v): %v, want ErrInvalid", bad[0], bad[1], err)
		}
	}
	// A job of 4 shards receiving 300+500+200+1000 = 2000 records/s, each shard
	// processing 450 records/s of busy time: ceil(2000/450) = ceil(4.44) = 5;
	// the 4 current shards are 2000/(4×450) = 111% busy.
	a, err := AdviseJob([]float64{300, 500, 200, 1000}, 450)
	if err != nil {
		t.Fatal(err)
	}
	if a.Current != 4 || a.Advised != 5 || a.TargetInput != 2000 || !near(a.Utilization, 2000.0/1800) || !near(a.Exact, 2000.0/450) {
		t.Errorf("advice %+v", a)
	}
	if _, err := AdviseJob(nil, 1); !errors.Is(err, interfaces.ErrInvalid) {
		t.Errorf("no shards: %v", err)
	}
	if _, err := AdviseJob([]float64{1, -2}, 1); !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), "shards[1].input_rate") {
		t.Errorf("negative rate: %v", err)
	}
	if _, err := AdviseJob([]float64{1}, 0); !errors.Is(err, interfaces.ErrInvalid) {
		t.Errorf("zero rate per shard: %v", err)
	}
}

func TestParseTopologyErrors(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"bad instances", "# header\na,A,x,b,B,1\n", "topo.csv:2:5: field 3 (total_number_of_operator_instances1): must be an integer >= 1"},
		{"zero instances", "a,A,1,b,B,0\n", "topo.csv:1:11: field 6 (total_number_of_operator_instances2)"},
		{"too few fields", "a,A,1,b,B,1\na,A,1,b\n", "topo.csv:2:7: has 4 fields, want 6"},
		{"too many fields", "a,A,1,b,B,1,z\n", "topo.csv:1:13: has 7 fields, want 6"},
		{"empty id", "a,A,1,,B,1\n", "topo.csv:1:7: field 4 (operator_id2): must not be empty"},
		{"inconsistent instances", "a,A,1,b,B,2\nb,B,3,c,C,1\n", "topo.csv:2:5: field 3 (total_number_of_operator_instances1): operator \"b\" has 3 instances here but 2"},
		{"cycle", "a,A,1,b,B,1\nb,B,1,a,A,1\n", "cycle through a, b"},
		{"self loop", "a,A,1,a,A,1\n", "feeds itself"},
		{"empty", "# only a comment\n", "no edges"},
		{"quote", "a,\"A,1,b,B,1\n", "topo.csv:1:"},
	}
	for _, tc := range cases {
		_, err := ParseTopology(strings.NewReader(tc.in), "topo.csv")
		if !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want ErrInvalid containing %q", tc.name, err, tc.want)
		}
	}
}

func TestParseRatesErrors(t *testing.T) {
	ok := "a,1,1,10,5,5,1,1\n"
	cases := []struct {
		name, in, want string
	}{
		{"instance out of range", "a,3,2,10,5,5,1,1\n", "rates.log:1:3: field 2 (operator_instance_id): must be an integer in [1, 2]"},
		{"bad timestamp", ok + "b,1,1,ten,5,5,1,1\n", "rates.log:2:7: field 4 (epoch_timestamp)"},
		{"negative rate", "a,1,1,10,5,-5,1,1\n", "rates.log:1:12: field 6 (true_output_rate): must be a finite number >= 0"},
		{"NaN rate", "a,1,1,10,NaN,5,1,1\n", "field 5 (true_processing_rate)"},
		{"short line", ok + "a,1,1\n", "rates.log:2:5: has 3 fields, want 8"},
		{"empty", "", "no rates"},
	}
	for _, tc := range cases {
		_, err := ParseRates(strings.NewReader(tc.in), "rates.log")
		if !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want ErrInvalid containing %q", tc.name, err, tc.want)
		}
	}
}

func TestAdviseErrors(t *testing.T) {
	topo, err := ParseTopology(strings.NewReader("a,A,1,b,B,2\n"), "t")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, rates, want string
		sentinel          error
	}{
		{"unknown operator", "a,1,1,1,0,10,0,1\nb,1,2,1,5,5,1,1\nb,2,2,1,5,5,1,1\nz,1,1,1,1,1,1,1\n", "window 1, line 4: operator \"z\" is not in the topology", interfaces.ErrNotFound},
		{"missing instance", "a,1,1,1,0,10,0,1\nb,1,2,1,5,5,1,1\n", "window 1: operator \"b\" has rates for 1 of its 2 instances", interfaces.ErrInvalid},
		{"missing operator", "b,1,2,1,5,5,1,1\nb,2,2,1,5,5,1,1\n", "window 1: operator \"a\" has rates for 0 of its 1 instances", interfaces.ErrInvalid},
		{"instance counts differ", "a,1,1,1,0,10,0,1\nb,1,2,1,5,5,1,1\nb,3,3,1,5,5,1,1\n", "line 3: operator \"b\" has 3 instances here but 2", interfaces.ErrInvalid},
		{"partial second window", "a,1,1,1,0,10,0,1\nb,1,2,1,5,5,1,1\nb,2,2,1,5,5,1,1\na,1,1,2,0,10,0,1\n", "window 2: operator \"b\" has rates for 0 of its 2 instances", interfaces.ErrInvalid},
	}
	for _, tc := range cases {
		wins, err := ParseRates(strings.NewReader(tc.rates), "r")
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		_, err = AdviseAll(topo, wins)
		if !errors.Is(err, tc.sentinel) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %v containing %q", tc.name, err, tc.sentinel, tc.want)
		}
	}
	// An operator that processed nothing keeps its parallelism, with a note.
	wins, err := ParseRates(strings.NewReader("a,1,1,1,0,10,0,1\nb,1,2,1,0,0,0,0\nb,2,2,1,0,0,0,0\n"), "r")
	if err != nil {
		t.Fatal(err)
	}
	a, err := Advise(topo, wins[0], 1)
	if err != nil {
		t.Fatal(err)
	}
	if b := a.Operators[1]; b.Advised != 2 || b.Note == "" || b.TargetInput != 10 {
		t.Errorf("idle operator: %+v", b)
	}
	if _, err := Advise(nil, Window{}, 1); !errors.Is(err, interfaces.ErrInvalid) {
		t.Errorf("nil topology: %v", err)
	}
}
