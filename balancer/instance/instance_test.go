package instance

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/interfaces"
)

// The JSON and CSV examples describe the same instance, and it becomes a
// valid Problem with the gpu resource and its constraints.
func TestExamplesAgree(t *testing.T) {
	a, err := Load("testdata/fleet.json")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Load("testdata/fleet-csv")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.Resources, []string{"cpu", "mem", "gpu"}) {
		t.Fatalf("resources %v", a.Resources)
	}
	va, vb := a.View(), b.View()
	if !reflect.DeepEqual(va, vb) {
		t.Fatalf("JSON and CSV differ:\n%+v\n%+v", va, vb)
	}
	if a.Hosts[0].Capacity["gpu"] != 8 || a.Hosts[0].Devices["gpu"] != (Device{Count: 8, Each: 1}) {
		t.Fatalf("devices: %+v", a.Hosts[0])
	}
	p, err := balancer.FromView(va, balancer.ViewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := balancer.Solve(balancer.SolverLocal, p, balancer.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != interfaces.StatusOK || len(balancer.CheckHard(p, res.Assignment)) > 0 {
		t.Fatalf("status %v violations %v", res.Status, balancer.CheckHard(p, res.Assignment))
	}
}

// Bad input is an error naming the file, the line and the field; nothing is
// half-loaded.
func TestStrictDecoding(t *testing.T) {
	hostsOK := "id,cap.cpu,dev.gpu\nh1,8,2x1.0\nh2,16,\n"
	shardsOK := "id,job,load.cpu,load.gpu\ns1,j,1,0.5\n"
	for _, tc := range []struct {
		name, hosts, shards, want string
	}{
		{"unknown column", "id,cap.cpu,colour\nh1,8,red\n", shardsOK, `hosts.csv:1: column "colour": unknown column`},
		{"bad number", "id,cap.cpu\nh1,eight\n", shardsOK, `hosts.csv:2: column cap.cpu: must be a number (got "eight")`},
		{"negative", hostsOK, "id,load.cpu\ns1,-1\n", "shards.csv:2: column load.cpu: must be a finite number ≥ 0"},
		{"NaN", hostsOK, "id,load.cpu\ns1,NaN\n", "shards.csv:2: column load.cpu: must be a finite number ≥ 0"},
		{"duplicate host", "id,cap.cpu\nh1,8\nh1,8\n", shardsOK, `hosts.csv:3: host "h1": id: is repeated (first on line 2)`},
		{"duplicate shard", hostsOK, "id,load.cpu\ns1,1\ns1,2\n", `shards.csv:3: shard "s1": id: is repeated (first on line 2)`},
		{"duplicate column", "id,cap.cpu,cap.cpu\nh1,8,8\n", shardsOK, `column "cap.cpu": is repeated`},
		{"bad device", "id,dev.gpu\nh1,8 gpus\n", shardsOK, "hosts.csv:2: column dev.gpu: must be count×capacity"},
		{"unknown resource", hostsOK, "id,load.fpga\ns1,1\n", `shards.csv:2: shard "s1": load.fpga: no host has this resource`},
		{"unknown host", hostsOK, "id,load.cpu,pin\ns1,1,h9\n", `shards.csv:2: shard "s1": constraints: names host "h9"`},
		{"bad group", hostsOK, "id,load.cpu,anti_affinity\ns1,1,g:0\n", "anti_affinity: limit after ':' must be an integer ≥ 1"},
		{"bad state", "id,cap.cpu,state\nh1,8,asleep\n", shardsOK, "hosts.csv:2: column state: must be active, draining or failed"},
	} {
		_, err := ReadCSV(strings.NewReader(tc.hosts), "hosts.csv", strings.NewReader(tc.shards), "shards.csv")
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, interfaces.ErrInvalid) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
	good := `{
  "hosts": [
    {"id": "h1", "capacity": {"cpu": 8}}
  ],
  "shards": [
    {"id": "s1", "load": {"cpu": 1}}
  ]
}`
	if _, err := ReadJSON(strings.NewReader(good), "f.json"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, from, to, want string }{
		{"unknown key", `"capacity": {"cpu": 8}`, `"capacity": {"cpu": 8}, "colour": "red"`, `f.json:3: hosts[0]: unknown field "colour"`},
		{"unknown top key", `"hosts"`, `"hostz"`, `f.json:2: hostz: unknown key`},
		{"bad number", `"load": {"cpu": 1}`, `"load": {"cpu": "one"}`, `f.json:6: shards[0].load: must be a number (got a JSON string)`},
		{"huge number", `"load": {"cpu": 1}`, `"load": {"cpu": 1e999}`, `f.json:6: shards[0]`},
		{"negative", `"load": {"cpu": 1}`, `"load": {"cpu": -1}`, `f.json:6: shard "s1": load.cpu: must be a finite number ≥ 0`},
		{"repeated key", `"load": {"cpu": 1}`, `"load": {"cpu": 1, "cpu": 2}`, `f.json:6: cpu: key is repeated`},
		{"duplicate id", `{"id": "s1", "load": {"cpu": 1}}`, `{"id": "s1", "load": {"cpu": 1}},
    {"id": "s1", "load": {"cpu": 1}}`, `f.json:7: shard "s1": id: is repeated (first on line 6)`},
		{"bad device", `"capacity": {"cpu": 8}`, `"capacity": {"cpu": 8}, "devices": {"gpu": {"count": 2, "each": 0}}`, `f.json:3: host "h1": devices.gpu: per-device capacity must be a finite number > 0`},
		{"syntax", `"shards"`, `"shards`, `f.json`},
	} {
		doc := strings.Replace(good, tc.from, tc.to, 1)
		_, err := ReadJSON(strings.NewReader(doc), "f.json")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
}

// Fleet gives the shape it promises: six host sizes, GPUs as devices, the
// gpu resource near its target, and the same instance for the same seed.
func TestFleet(t *testing.T) {
	a, err := Fleet(FleetSpec{Hosts: 300, Shards: 1500, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Fleet(FleetSpec{Hosts: 300, Shards: 1500, Seed: 3})
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same spec, different instances")
	}
	sizes := map[[2]float64]bool{}
	var gcap, gload float64
	for _, h := range a.Hosts {
		sizes[[2]float64{h.Capacity["cpu"], h.Capacity["gpu"]}] = true
		gcap += h.Capacity["gpu"]
	}
	for _, s := range a.Shards {
		gload += s.Load["gpu"]
	}
	if len(sizes) != 6 || gload/gcap < 0.95 || gload/gcap > 0.97+1e-9 {
		t.Fatalf("%d sizes, gpu at %.3f", len(sizes), gload/gcap)
	}
}

// Light load on a heterogeneous fleet: a 32-core shard does not land alone
// on a small host while large ones are empty (ties between equally cold
// hosts go to the larger), within 1.05 of the LB for local and greedy.
func TestLightLoadHeterogeneous(t *testing.T) {
	in, err := Load("testdata/light-load.json")
	if err != nil {
		t.Fatal(err)
	}
	p, err := balancer.FromView(in.View(), balancer.ViewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{balancer.SolverLocal, balancer.SolverGreedy} {
		res, err := balancer.Solve(name, p, balancer.Options{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		for r, v := range res.Summary.MaxOverLB {
			if v > 1.05 {
				t.Errorf("%s: %s max/LB %.3f > 1.05", name, r, v)
			}
		}
	}
}
