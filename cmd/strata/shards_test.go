package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

// fakeAdmin is a tier instance's Admin API with canned answers, for the cases
// a live cluster does not show on demand (moves in flight, regions down,
// ambiguous hosts, cycles).
type fakeAdmin struct {
	wire.UnimplementedAdminServer
	addr     string
	tier     string
	instance string
	children []*wire.ChildStatus
	shards   []*wire.ShardInfo
	drainErr error

	mu      sync.Mutex
	drained []*wire.DrainRequest
}

func startFake(t *testing.T, tier, instance string) *fakeAdmin {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeAdmin{addr: lis.Addr().String(), tier: tier, instance: instance}
	srv := grpc.NewServer()
	wire.RegisterAdminServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return f
}

func (f *fakeAdmin) Status(context.Context, *wire.StatusRequest) (*wire.StatusResponse, error) {
	return &wire.StatusResponse{Tiers: []*wire.TierStatus{{Tier: f.tier, Instances: []*wire.InstanceStatus{{
		Instance: f.instance, LeaderId: f.instance + "-1", LeaderAddress: f.addr, Term: 4, StateIndex: 40, Policy: "fake",
		Children: f.children,
	}}}}}, nil
}

func (f *fakeAdmin) ListShards(_ context.Context, req *wire.ListShardsRequest) (*wire.ListShardsResponse, error) {
	return &wire.ListShardsResponse{Shards: f.shards}, nil
}

func (f *fakeAdmin) Drain(_ context.Context, req *wire.DrainRequest) (*wire.DrainResponse, error) {
	f.mu.Lock()
	f.drained = append(f.drained, req)
	f.mu.Unlock()
	if f.drainErr != nil {
		return nil, wire.ToStatus(f.drainErr)
	}
	return &wire.DrainResponse{State: wire.ChildState_CHILD_STATE_DRAINING, ShardsToMove: 7, StateIndex: 41}, nil
}

func child(id, tier, addr string, shards int64) *wire.ChildStatus {
	return &wire.ChildStatus{
		Child: &wire.Child{Id: id, Tier: tier, Capacity: &wire.Load{Cpu: 8}}, Shards: shards, Connected: true,
		Utilization: map[string]float64{"cpu": 0.125}, LeaseRemainingNanos: 1.5e9, Address: addr,
	}
}

func shardInfo(id string, p *wire.Placement) *wire.ShardInfo {
	s := &wire.ShardInfo{Shard: &wire.Shard{Id: id, Job: "j"}}
	if p != nil {
		s.Placement = []*wire.Placement{p}
	}
	return s
}

// closedAddr returns an address nothing listens on.
func closedAddr(t *testing.T) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// fakeTree is global → region-a (up: hosts h1, h2), region-b (down),
// region-c (up: host h1 again, and h3).
func fakeTree(t *testing.T) (global, a, c *fakeAdmin) {
	global = startFake(t, interfaces.TierGlobal, "global")
	a = startFake(t, interfaces.TierRegion, "region-a")
	c = startFake(t, interfaces.TierRegion, "region-c")
	global.children = []*wire.ChildStatus{
		child("region-a", interfaces.TierRegion, a.addr, 2),
		child("region-b", interfaces.TierRegion, closedAddr(t), 1),
		child("region-c", interfaces.TierRegion, c.addr, 0),
	}
	a.children = []*wire.ChildStatus{child("h1", interfaces.TierHost, "", 1), child("h2", interfaces.TierHost, "", 0)}
	c.children = []*wire.ChildStatus{child("h1", interfaces.TierHost, "", 0), child("h3", interfaces.TierHost, "", 0)}
	global.shards = []*wire.ShardInfo{
		shardInfo("j/0", &wire.Placement{Tier: "global", Instance: "global", Child: "region-a", Epoch: 3}),
		shardInfo("j/1", &wire.Placement{Tier: "global", Instance: "global", Child: "region-a", Epoch: 5, InFlight: true}),
		shardInfo("j/2", nil),
		shardInfo("j/3", &wire.Placement{Tier: "global", Instance: "global", Child: "region-b", Epoch: 1}),
		shardInfo("j/10", &wire.Placement{Tier: "global", Instance: "global", Child: "region-a", Epoch: 2}),
	}
	a.shards = []*wire.ShardInfo{
		shardInfo("j/0", &wire.Placement{Tier: "region", Instance: "region-a", Child: "h1", Epoch: 2}),
		shardInfo("j/10", nil),
	}
	return global, a, c
}

func TestShardsStatesFromFakeTree(t *testing.T) {
	global, _, _ := fakeTree(t)
	var rows []shardRowJSON
	code, out, errOut := runCLI("shards", "--addr", global.addr, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	got := map[string]shardRowJSON{}
	var order []string
	for _, r := range rows {
		got[r.Shard] = r
		order = append(order, r.Shard)
	}
	if strings.Join(order, ",") != "j/0,j/1,j/2,j/3,j/10" {
		t.Errorf("order %v (want natural order)", order)
	}
	want := map[string]struct {
		state, host string
		levels      int
	}{
		"j/0":  {shardPlaced, "h1", 2},
		"j/1":  {shardInFlight, "", 1},
		"j/2":  {shardPending, "", 0},
		"j/3":  {shardUnknown, "", 1},
		"j/10": {shardPending, "", 1},
	}
	for id, w := range want {
		r := got[id]
		if r.State != w.state || r.Host != w.host || len(r.Placement) != w.levels {
			t.Errorf("%s: %+v, want state %s host %q levels %d", id, r, w.state, w.host, w.levels)
		}
	}
	if p := got["j/0"].Placement; len(p) == 2 && (p[0].Epoch != 3 || p[1].Epoch != 2 || p[1].Instance != "region-a") {
		t.Errorf("j/0 placement %+v", p)
	}
	if !strings.Contains(errOut, "warning: unreachable tier instance region-b") {
		t.Errorf("stderr lacks the warning about region-b: %q", errOut)
	}

	code, out, _ = runCLI("shards", "--addr", global.addr)
	for _, s := range []string{"SHARD  JOB  REGION     HOST  EPOCHS  STATE", "j/0    j    region-a   h1    3/2     placed", "j/1    j    region-a*  -     5       in-flight", "region-a*", "5 shards: 1 placed, 1 in flight, 2 pending, 1 unknown"} {
		if code != 0 || !strings.Contains(out, s) {
			t.Errorf("table lacks %q:\n%s", s, out)
		}
	}
}

func TestHostDrainFindsTheRegion(t *testing.T) {
	global, a, c := fakeTree(t)
	var res childStateJSON
	cliJSON(t, &res, "host", "drain", "h2", "--addr", global.addr, "-o", "json")
	if res.Instance != "region-a" || res.Tier != interfaces.TierRegion || res.State != "draining" || res.ShardsToMove != 7 || res.StateIndex != 41 {
		t.Errorf("drain h2: %+v", res)
	}
	a.mu.Lock()
	if len(a.drained) != 1 || a.drained[0].GetChild() != "h2" || a.drained[0].GetInstance() != "region-a" {
		t.Errorf("region-a got %v", a.drained)
	}
	a.mu.Unlock()

	// h1 is under two regions: refuse to guess, drain nothing.
	code, _, errOut := runCLI("host", "drain", "h1", "--addr", global.addr)
	if code != 1 || !strings.Contains(errOut, `host "h1" is a child of 2 tier instances (region/region-a, region/region-c); refusing to guess`) {
		t.Errorf("ambiguous: exit %d, %q", code, errOut)
	}
	// The region's own refusal comes back with its message.
	c.drainErr = fmt.Errorf("child %q is failed: %w", "h3", interfaces.ErrConflict)
	code, _, errOut = runCLI("host", "drain", "h3", "--addr", global.addr)
	if code != 1 || !strings.Contains(errOut, `child "h3" is failed`) {
		t.Errorf("refused: exit %d, %q", code, errOut)
	}
	a.mu.Lock()
	c.mu.Lock()
	if len(a.drained) != 1 || len(c.drained) != 1 {
		t.Errorf("drain calls: region-a %d, region-c %d; want 1 and 1", len(a.drained), len(c.drained))
	}
	c.mu.Unlock()
	a.mu.Unlock()
}

func TestStatusCycleAndUnreachable(t *testing.T) {
	global, a, _ := fakeTree(t)
	// region-a claims the global tier as a child: the walk must not loop.
	a.children = append(a.children, child("loop", interfaces.TierRegion, global.addr, 0))
	var st statusJSON
	cliJSON(t, &st, "status", "--addr", global.addr, "-o", "json")
	ra := st.Tree[0].FindChild("region-a")
	if ra == nil || ra.Instance == nil {
		t.Fatalf("region-a: %+v", ra)
	}
	if l := ra.Instance.FindChild("loop"); l == nil || l.Instance != nil || !strings.Contains(l.Error, "already visited") {
		t.Errorf("loop child: %+v", l)
	}
	if rb := st.Tree[0].FindChild("region-b"); rb == nil || !strings.Contains(rb.Error, "cannot reach the Admin API") {
		t.Errorf("region-b: %+v", rb)
	}
	if len(st.Unreachable) != 2 {
		t.Errorf("unreachable: %v", st.Unreachable)
	}
	code, out, _ := runCLI("status", "--addr", global.addr)
	for _, s := range []string{"global      global  -       -     3", "  region-b  region  active  yes   1       cpu 12.5%    1.5s   unreachable ", "    loop    region  active  yes   0       cpu 12.5%    1.5s   not followed", "    h1 ", "region-a-1@" + a.addr} {
		if code != 0 || !strings.Contains(out, s) {
			t.Errorf("status table lacks %q:\n%s", s, out)
		}
	}
}

func TestNaturalLess(t *testing.T) {
	sorted := []string{"", "a", "a/1", "a/2", "a/10", "a/10b", "a/11", "b", "b01x", "b1", "b2"}
	for i := range sorted {
		for k := range sorted {
			if got, want := naturalLess(sorted[i], sorted[k]), i < k; got != want {
				t.Errorf("naturalLess(%q, %q) = %v, want %v", sorted[i], sorted[k], got, want)
			}
		}
	}
}

func TestFormatQuantity(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 800: "800", 1024: "1Ki", 1536: "1.5Ki", 512 << 20: "512Mi", 3 << 30: "3Gi", 1 << 40: "1Ti"} {
		if got := formatQuantity(v); got != want {
			t.Errorf("formatQuantity(%v) = %q, want %q", v, got, want)
		}
	}
}
