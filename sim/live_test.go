package sim

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// testLive is 2 regions × 3 hosts with two shards of job "etl" on each host of
// region a and on two hosts of region b, one shard left unplaced, and host b-2
// draining.
func testLive() *LiveState {
	l := &LiveState{GlobalPolicy: "local", RegionPolicy: "local"}
	capacity := interfaces.Load{CPU: 8, Mem: 32 << 30, Tasks: 100}
	for _, r := range []string{"a", "b"} {
		for k := 0; k < 3; k++ {
			l.Hosts = append(l.Hosts, LiveHost{Name: fmt.Sprintf("%s-%d", r, k), Region: r, Capacity: capacity, Labels: map[string]string{"zone": r}})
		}
	}
	l.Hosts[5].State = interfaces.ChildDraining
	n := 0
	for _, h := range l.Hosts[:5] {
		for k := 0; k < 2; k++ {
			l.Shards = append(l.Shards, LiveShard{Region: h.Region, Host: h.Name, Shard: interfaces.Shard{
				ID: interfaces.ShardID(fmt.Sprintf("etl/%d", n)), Job: "etl", Load: interfaces.Load{CPU: 2, Mem: 4 << 30, Tasks: 1},
				InputRate: 1000, StateBytes: 64 << 20}})
			n++
		}
	}
	l.Shards[0].Measured = interfaces.Load{CPU: 3, Net: 1e6}
	l.Shards = append(l.Shards, LiveShard{Shard: interfaces.Shard{ID: "etl/10", Job: "etl", Load: interfaces.Load{CPU: 2, Mem: 4 << 30, Tasks: 1}, InputRate: 1000, StateBytes: 64 << 20}})
	return l
}

const quietPlan = `
duration: 2m
control_interval: 30s
model:
  trigger: 1.5
`

// TestLiveStartsFromAssignment: the engine starts with exactly the live
// assignment and host states, before any tick runs.
func TestLiveStartsFromAssignment(t *testing.T) {
	live := testLive()
	sc, err := ParsePlan([]byte(quietPlan), "plan.yaml", live)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Policies[0].Name != LivePolicy || sc.Policies[0].Solver != "local" || sc.Policies[0].Integration != Collaborative {
		t.Fatalf("default policy: %+v", sc.Policies[0])
	}
	e, err := newEngine(sc, sc.Policies[0], sc.Seed, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := e.w
	if len(w.hostName) != len(live.Hosts) || len(w.shardID) != len(live.Shards) {
		t.Fatalf("world has %d hosts, %d shards; live %d, %d", len(w.hostName), len(w.shardID), len(live.Hosts), len(live.Shards))
	}
	for i, h := range live.Hosts {
		if w.hostName[i] != h.Name || w.regionName[w.hostRegion[i]] != h.Region || w.hostState[i] != h.State || w.hostCap[i*nres] != h.Capacity.CPU || w.hostLabels[i]["zone"] != h.Labels["zone"] {
			t.Errorf("host %d: %s/%s %v cap %v, want %+v", i, w.hostName[i], w.regionName[w.hostRegion[i]], w.hostState[i], w.hostCap[i*nres], h)
		}
	}
	for i, s := range live.Shards {
		region, host := "", ""
		if e.region_[i] >= 0 {
			region = w.regionName[e.region_[i]]
		}
		if e.host[i] >= 0 {
			host = w.hostName[e.host[i]]
		}
		if w.shardID[i] != s.Shard.ID || region != s.Region || host != s.Host || !w.active[i] || e.moveKind[i] != moveNone {
			t.Errorf("shard %d: %s on %q/%q (active %v), want %s on %q/%q", i, w.shardID[i], region, host, w.active[i], s.Shard.ID, s.Region, s.Host)
		}
		want := s.Shard.Load
		if i == 0 {
			// Measured dimensions replace the declared ones; the others stay.
			want = interfaces.Load{CPU: 3, Mem: s.Shard.Load.Mem, Net: 1e6, Tasks: s.Shard.Load.Tasks}
		}
		if got := w.baseLoad[i*nres : i*nres+nres]; got[0] != want.CPU || got[1] != want.Mem || got[2] != want.Net || got[3] != want.Tasks ||
			w.stateBytes[i] != s.Shard.StateBytes || w.baseRate[i] != s.Shard.InputRate {
			t.Errorf("shard %s: load %v state %d rate %v", s.Shard.ID, w.baseLoad[i*nres:i*nres+nres], w.stateBytes[i], w.baseRate[i])
		}
	}
}

// TestLiveFirstMoves: with nothing changing, the first window only places the
// unplaced shard and empties the draining host; failing a host at t=0 moves
// exactly its shards (after detect_after), onto live hosts.
func TestLiveFirstMoves(t *testing.T) {
	live := testLive()
	live.Hosts[5].State = interfaces.ChildActive
	ctx := context.Background()
	sc, err := ParsePlan([]byte(quietPlan), "plan.yaml", live)
	if err != nil {
		t.Fatal(err)
	}
	moves, bytes, err := FirstMoves(ctx, sc, LivePolicy, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(moves) != 1 || moves[0].Shard != "etl/10" || moves[0].From != "" || moves[0].To == "" || bytes != 0 {
		t.Fatalf("quiet cluster: moves %+v (%d bytes), want only etl/10 placed", moves, bytes)
	}

	fail := quietPlan + `
events:
  - {at: 0, kind: host_fail, host: a-1}
workload:
  steps:
    - {at: 60s, job: etl, factor: 1.2}
assertions:
  - {kind: no_loss}
`
	sc, err = ParsePlan([]byte(fail), "plan.yaml", live)
	if err != nil {
		t.Fatal(err)
	}
	if got := sc.FirstWindow(); got != 30*time.Second {
		t.Errorf("first window %v, want 30s (detect_after 10s + grace 5s + tick < control_interval 30s)", got)
	}
	moves, bytes, err = FirstMoves(ctx, sc, LivePolicy, 0)
	if err != nil {
		t.Fatal(err)
	}
	off := 0
	for _, m := range moves {
		switch {
		case m.From == "a-1":
			off++
			if m.To == "a-1" || (m.To == "" && m.ToRegion == "") {
				t.Errorf("%s stays on the failed host: %+v", m.Shard, m)
			}
		case m.Shard == "etl/10":
		default:
			t.Errorf("unexpected move %+v", m)
		}
	}
	if off != 2 || bytes != 2*64<<20 {
		t.Errorf("host_fail a-1: %d shards moved off it (%d bytes), want 2 (%d): %+v", off, bytes, 2*64<<20, moves)
	}
	res, err := Run(ctx, sc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Hosts != 6 || res.Shards != 11 || res.Policies[0].Summary.Moves < 2 || len(res.Failed()) != 0 {
		t.Errorf("run: %d hosts %d shards, summary %+v, failed %+v", res.Hosts, res.Shards, res.Policies[0].Summary, res.Failed())
	}
	exp, other := sc.StartChanges()
	if len(exp) != 1 || exp[0].Host != "a-1" || len(other) != 0 {
		t.Errorf("start changes %+v / %+v", exp, other)
	}
}

// TestParsePlanErrors: what the live state provides, unknown keys and unknown
// names are errors naming the file, line and key.
func TestParsePlanErrors(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"duration: 1m\nbogus: 1\n", "plan.yaml:2: bogus: unknown key"},
		{"duration: 1m\ntopology:\n  hosts: []\n", "plan.yaml:2: topology: not allowed in a plan file"},
		{"duration: 1m\nworkload:\n  steps: []\n  jobs: []\n", "plan.yaml:4: workload.jobs: not allowed"},
		{"duration: 1m\nworkload:\n  replay: {file: x.csv}\n", "plan.yaml:3: workload.replay: not allowed"},
		{"duration: 1m\nevents:\n  - at: 0\n    kind: host_fail\n    host: nope\n", `plan.yaml:5: events[0].host: host "nope" is not a host of the live cluster (hosts: a-0, a-1`},
		{"duration: 1m\nevents:\n  - {at: 0, kind: host_slow, host: nope, factor: 0.5}\n", `plan.yaml:3: events[0].host: host "nope" is not a host of the live cluster`},
		{"duration: 1m\nevents:\n  - {at: 0, kind: host_slow, host: a-0, factor: 0}\n", `plan.yaml:3: events[0].factor: must be in (0, 1]`},
		{"duration: 1m\nevents:\n  - {at: 0, kind: region_loss, region: mars}\n", `plan.yaml:3: events[0].region: region "mars" is not a region of the live cluster (regions: a, b)`},
		{"duration: 1m\nworkload:\n  steps:\n    - {at: 0, job: nojob, factor: 2}\n", `plan.yaml:4: workload.steps[0].job: job "nojob" is not in the workload`},
		{"duration: 1m\npolicies:\n  - {name: x, solver: nope}\n", `plan.yaml:3: policies[0].solver: unknown policy "nope"`},
		{"", "the file is empty"},
	} {
		_, err := ParsePlan([]byte(c.file), "plan.yaml", testLive())
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, interfaces.ErrInvalid) {
			t.Errorf("%q: got %v, want an ErrInvalid containing %q", c.file, err, c.want)
		}
	}
	// A live state the plan cannot start from.
	bad := testLive()
	bad.Shards[0].Host = "ghost"
	if _, err := ParsePlan([]byte(quietPlan), "plan.yaml", bad); err == nil || !strings.Contains(err.Error(), `host "ghost" is not a host of the cluster`) {
		t.Errorf("shard on an unknown host: %v", err)
	}
	plugin := testLive()
	plugin.RegionPolicy = "plugin"
	if _, err := ParsePlan([]byte(quietPlan), "plan.yaml", plugin); err == nil || !strings.Contains(err.Error(), `region policy "plugin"`) || !strings.Contains(err.Error(), "not deterministic") {
		t.Errorf("unknown live policy: %v", err)
	}
	if _, err := ParsePlan([]byte(quietPlan+"policies:\n  - {name: g, solver: greedy}\n"), "plan.yaml", plugin); err != nil {
		t.Errorf("a file with its own policies does not need the live one: %v", err)
	}
}

func TestFirstWindowCoversDetection(t *testing.T) {
	sc, err := ParsePlan([]byte("duration: 5m\ncontrol_interval: 5s\nmodel: {detect_after: 12s}\nevents:\n  - {at: 0, kind: region_loss, region: b}\n"), "plan.yaml", testLive())
	if err != nil {
		t.Fatal(err)
	}
	if got := sc.FirstWindow(); got != 18*time.Second {
		t.Errorf("first window %v, want 18s (detect_after 12s + grace 5s + tick 1s)", got)
	}
	// The largest grace of the file's policies.
	sc, err = ParsePlan([]byte("duration: 5m\ncontrol_interval: 5s\nevents:\n  - {at: 0, kind: host_fail, host: a-0}\npolicies:\n  - {name: p, solver: greedy}\n  - {name: q, solver: greedy, control: {grace: 20s}}\n"), "plan.yaml", testLive())
	if err != nil {
		t.Fatal(err)
	}
	if got := sc.FirstWindow(); got != 31*time.Second {
		t.Errorf("first window %v, want 31s (detect_after 10s + grace 20s + tick 1s)", got)
	}
}

// TestFirstWindowCoversGrace: a host failing at t=0 is declared failed
// detect_after + grace later; with a control interval shorter than that, the
// first window still reaches the round that re-places its shards.
func TestFirstWindowCoversGrace(t *testing.T) {
	l := liveWithFailed()
	l.Hosts[0].State, l.Hosts[1].State = interfaces.ChildActive, interfaces.ChildActive
	plan := "duration: 2m\ncontrol_interval: 10s\nevents:\n  - {at: 0s, kind: host_fail, host: a-0}\n"
	sc, err := ParsePlan([]byte(plan), "plan.yaml", l)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := sc.FirstWindow(), sc.FailoverAfter(sc.Policies[0])+sc.Tick.D(); got != want {
		t.Errorf("first window %v, want %v (failover after %v + a tick)", got, want, sc.FailoverAfter(sc.Policies[0]))
	}
	moves, _, err := FirstMoves(context.Background(), sc, LivePolicy, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(moves) != 2 || moves[0].From != "a-0" || moves[1].From != "a-0" {
		t.Fatalf("first moves %+v (window %v): want a-0's 2 shards re-placed", moves, sc.FirstWindow())
	}
}

// devLive is the live state of "strata dev" (2 regions × 4 hosts of 16 cores)
// running deploy/examples/job.yaml (wordcount, 16 shards), two per host.
func devLive() *LiveState {
	l := &LiveState{GlobalPolicy: "local", RegionPolicy: "local"}
	n := 0
	for r := 1; r <= 2; r++ {
		for h := 1; h <= 4; h++ {
			region, host := fmt.Sprintf("region-%d", r), fmt.Sprintf("region-%d-host-%d", r, h)
			l.Hosts = append(l.Hosts, LiveHost{Name: host, Region: region, Capacity: interfaces.Load{CPU: 16, Mem: 64 << 30, Net: 10 << 30, Tasks: 200}})
			for k := 0; k < 2; k++ {
				l.Shards = append(l.Shards, LiveShard{Region: region, Host: host, Shard: interfaces.Shard{
					ID: interfaces.ShardID(fmt.Sprintf("wordcount/%d", n)), Job: "wordcount",
					Load:      interfaces.Load{CPU: 0.5, Mem: 512 << 20, Net: 8 << 20, Tasks: 2},
					InputRate: 5000, StateBytes: 64 << 20, LatencySLO: 50 * time.Millisecond}})
				n++
			}
		}
	}
	return l
}

// TestPlanExamples runs every example plan of sim/plans against the dev
// cluster's live state; their assertions must hold.
func TestPlanExamples(t *testing.T) {
	files, err := filepath.Glob("plans/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example plans: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			sc, err := LoadPlan(f, devLive())
			if err != nil {
				t.Fatal(err)
			}
			res, err := Run(context.Background(), sc, Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range res.Failed() {
				t.Errorf("%s: %s (line %d)", a.Policy, a.Message, a.Line)
			}
			// Every shard of a host failing at t=0 is predicted to leave it, for
			// another host, in the first window.
			live := devLive()
			failed := map[string]int{}
			for _, e := range sc.Events {
				if e.At == 0 && e.Kind == EventHostFail {
					for _, sh := range live.Shards {
						if sh.Host == e.Host {
							failed[e.Host]++
						}
					}
				}
			}
			for _, p := range sc.Policies {
				moves, _, err := FirstMoves(context.Background(), sc, p.Name, 0)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s: first %v: %d moves", p.Name, sc.FirstWindow(), len(moves))
				off := map[string]int{}
				for _, m := range moves {
					if _, ok := failed[m.From]; ok {
						if m.To == "" || m.To == m.From {
							t.Errorf("%s: %s leaves failed %s for %q", p.Name, m.Shard, m.From, m.To)
						}
						off[m.From]++
					}
				}
				for h, n := range failed {
					if off[h] != n {
						t.Errorf("%s: %d of failed %s's %d shards predicted to move off it", p.Name, off[h], h, n)
					}
				}
			}
		})
	}
}

// liveWithFailed: region a with 4 hosts; a-0 and a-1 are already failed in
// the live cluster (declared by the region tier) and still hold 2 shards
// each, as a-2 and a-3 do.
func liveWithFailed() *LiveState {
	l := &LiveState{GlobalPolicy: "greedy", RegionPolicy: "greedy"}
	capacity := interfaces.Load{CPU: 16, Mem: 64 << 30, Tasks: 100}
	for k := 0; k < 4; k++ {
		l.Hosts = append(l.Hosts, LiveHost{Name: fmt.Sprintf("a-%d", k), Region: "a", Capacity: capacity})
	}
	l.Hosts[0].State = interfaces.ChildFailed
	l.Hosts[1].State = interfaces.ChildFailed
	n := 0
	for _, h := range l.Hosts {
		for k := 0; k < 2; k++ {
			l.Shards = append(l.Shards, LiveShard{Region: "a", Host: h.Name, Shard: interfaces.Shard{
				ID: interfaces.ShardID(fmt.Sprintf("etl/%d", n)), Job: "etl", Load: interfaces.Load{CPU: 1, Mem: 1 << 30, Tasks: 1},
				InputRate: 100, StateBytes: 1 << 20}})
			n++
		}
	}
	return l
}

// TestPlanStartsFromDeclaredFailures: hosts the live cluster has already
// declared failed start the run declared, not as hosts that have just failed
// (silent for detect_after, then within their grace, and — half the region
// at once — held by the mass-failure guard): the region's first round
// re-places their 4 shards, as the live region tier's next round would.
func TestPlanStartsFromDeclaredFailures(t *testing.T) {
	sc, err := ParsePlan([]byte("duration: 2m\ncontrol_interval: 30s\n"), "plan.yaml", liveWithFailed())
	if err != nil {
		t.Fatal(err)
	}
	moves, _, err := FirstMoves(context.Background(), sc, LivePolicy, 0)
	if err != nil {
		t.Fatal(err)
	}
	off := 0
	for _, m := range moves {
		if (m.From == "a-0" || m.From == "a-1") && (m.To == "a-2" || m.To == "a-3") {
			off++
		}
	}
	if len(moves) != 4 || off != 4 {
		t.Fatalf("first moves %+v: want the 4 shards of the already-failed hosts re-placed on a-2 and a-3", moves)
	}
}
