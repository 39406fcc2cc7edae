package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strata-sched/strata/coordinator/devcluster"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/testutil"
)

// cliJSON runs the CLI, requires exit 0 and decodes its JSON output into v.
func cliJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	code, out, errOut := runCLI(args...)
	if code != 0 {
		t.Fatalf("%v: exit %d, stderr %q", args, code, errOut)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("%v: output is not JSON: %v\n%s", args, err, out)
	}
}

// eventually retries cond until it returns nil or timeout passes.
var eventually = testutil.Eventually

// runningOn maps every shard some host agent runs to those hosts.
func runningOn(c *devcluster.Cluster) map[string][]string {
	out := map[string][]string{}
	for name, h := range c.Hosts {
		for _, s := range h.Agent().Running() {
			out[string(s)] = append(out[string(s)], name)
		}
	}
	return out
}

// checkShardsMatchHosts checks that "strata shards" lists n placed shards, each
// on the host whose agent runs it, and that no shard runs twice.
func checkShardsMatchHosts(t *testing.T, c *devcluster.Cluster, addr string, n int) error {
	var rows []shardRowJSON
	cliJSON(t, &rows, "shards", "--addr", addr, "-o", "json")
	if len(rows) != n {
		return fmt.Errorf("%d shards listed, want %d", len(rows), n)
	}
	run := runningOn(c)
	for _, r := range rows {
		if r.State != shardPlaced || len(r.Placement) != 2 || r.Host == "" {
			return fmt.Errorf("shard %s: state %s, placement %+v", r.Shard, r.State, r.Placement)
		}
		if region := c.HostRegion[r.Host]; region != r.Placement[0].Child {
			return fmt.Errorf("shard %s: host %s is in %s, but the global tier placed it on %s", r.Shard, r.Host, region, r.Placement[0].Child)
		}
		if hosts := run[r.Shard]; len(hosts) != 1 || hosts[0] != r.Host {
			return fmt.Errorf("shard %s: listed on %s, runs on %v", r.Shard, r.Host, hosts)
		}
	}
	return nil
}

func TestClientCommandsEndToEnd(t *testing.T) {
	began := time.Now()
	c, err := devcluster.Start(devcluster.Options{
		Dir: t.TempDir(), GlobalAddr: "127.0.0.1:0", Regions: 2, HostsPerRegion: 2,
		Interval: 200 * time.Millisecond, LeaseTTL: 2 * time.Second, Grace: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.Global.GRPCAddr()
	const n = 12
	start := time.Now()
	phase := func(name string) { t.Logf("%6.2fs %s", time.Since(start).Seconds(), name) }

	dir := t.TempDir()
	jobPath := filepath.Join(dir, "wc.yaml")
	job := fmt.Sprintf(`name: wc
parallelism: %d
labels: {team: test}
load: {cpu: 0.5, mem: 256Mi, tasks: 1}
input_rate: 100
state_bytes: 1Mi
latency_slo: 50ms
`, n)
	if err := os.WriteFile(jobPath, []byte(job), 0o644); err != nil {
		t.Fatal(err)
	}

	// Submit.
	code, out, errOut := runCLI("job", "submit", "--addr", addr, jobPath)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("job wc submitted: %d shards (wc/0 … wc/%d)", n, n-1)) {
		t.Fatalf("submit: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// A second submit of the same job is refused, and says why.
	code, _, errOut = runCLI("job", "submit", "--addr", addr, jobPath)
	if code != 1 || !strings.Contains(errOut, `job "wc" already exists`) {
		t.Errorf("resubmit: exit %d, stderr %q", code, errOut)
	}

	phase("submitted")
	// List.
	var jobs []jobListJSON
	cliJSON(t, &jobs, "job", "list", "--addr", addr, "-o", "json")
	if len(jobs) != 1 || jobs[0].Job != "wc" || jobs[0].Shards != n || jobs[0].Load["cpu"] != 0.5*n {
		t.Errorf("job list: %+v", jobs)
	}
	code, out, _ = runCLI("job", "list", "--addr", addr)
	if code != 0 || !strings.Contains(out, "JOB") || !strings.Contains(out, "cpu 6, mem 3Gi, tasks 12") {
		t.Errorf("job list table: exit %d\n%s", code, out)
	}

	phase("listed")
	// Shards: all placed eventually, each on the host that runs it.
	eventually(t, "all shards placed and running where listed", 25*time.Second, func() error { return checkShardsMatchHosts(t, c, addr, n) })
	code, out, _ = runCLI("shards", "--addr", addr, "--job", "wc")
	if code != 0 || !strings.Contains(out, "REGION") || !strings.Contains(out, "HOST") || !strings.Contains(out, fmt.Sprintf("%d shards: %d placed", n, n)) {
		t.Errorf("shards table: exit %d\n%s", code, out)
	}
	t.Logf("strata shards:\n%s", out)

	phase("placed")
	// Status: the tree holds both regions and each region its hosts (hosts
	// connect on their own, so wait for all four).
	eventually(t, "status shows both regions and their four hosts", 15*time.Second, func() error {
		var st statusJSON
		cliJSON(t, &st, "status", "--addr", addr, "-o", "json")
		if len(st.Tree) != 1 || st.Tree[0].Tier != interfaces.TierGlobal || len(st.Tree[0].Children) != 2 {
			return fmt.Errorf("status tree root: %+v", st.Tree)
		}
		var hostsSeen []string
		var shardsSeen int64
		for _, region := range st.Tree[0].Children {
			if region.Tier != interfaces.TierRegion || region.Instance == nil || region.Instance.Instance != region.ID || region.Instance.LeaderID == "" || region.Instance.Term == 0 {
				return fmt.Errorf("region %s: %+v (instance %+v)", region.ID, region, region.Instance)
			}
			for _, h := range region.Instance.Children {
				if c.HostRegion[h.ID] != region.ID || h.Tier != interfaces.TierHost || !h.Connected || h.State != "active" || h.LeaseRemainingSeconds <= 0 {
					return fmt.Errorf("host %s under %s: %+v", h.ID, region.ID, h)
				}
				if _, ok := h.UtilizationPct["cpu"]; !ok {
					return fmt.Errorf("host %s: no cpu utilization: %+v", h.ID, h.UtilizationPct)
				}
				hostsSeen = append(hostsSeen, h.ID)
				shardsSeen += h.Shards
			}
		}
		sort.Strings(hostsSeen)
		if want := []string{"region-1-host-1", "region-1-host-2", "region-2-host-1", "region-2-host-2"}; strings.Join(hostsSeen, ",") != strings.Join(want, ",") {
			return fmt.Errorf("hosts in the tree: %v, want %v", hostsSeen, want)
		}
		if shardsSeen != n {
			return fmt.Errorf("hosts hold %d shards in status, want %d", shardsSeen, n)
		}
		return nil
	})
	code, out, _ = runCLI("status", "--addr", addr)
	if code != 0 || !strings.Contains(out, "\n  region-1 ") || !strings.Contains(out, "\n    region-2-host-2 ") || !strings.Contains(out, "cpu ") {
		t.Errorf("status table: exit %d\n%s", code, out)
	}
	t.Logf("strata status:\n%s", out)

	phase("status")
	// Drain the busiest host: it ends empty and every shard still runs once.
	var busiest string
	most := -1
	for h, d := range c.Hosts {
		if k := len(d.Agent().Running()); k > most {
			busiest, most = h, k
		}
	}
	// A --wait too short to see the host empty: exit 1, and the message is
	// about --wait, never --timeout (a status call cut short by --wait
	// itself). The drain's round can commit within it, so exit 0 with the
	// host empty is right too.
	code, out, errOut = runCLI("host", "drain", busiest, "--addr", addr, "--wait", "1ms")
	if !(code == 1 && strings.Contains(errOut, "--wait 1ms") && !strings.Contains(errOut, "--timeout")) && !(code == 0 && strings.Contains(out, "holds no shards")) {
		t.Fatalf("drain --wait 1ms: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// Draining a draining host again is accepted, and this time waits.
	code, out, errOut = runCLI("host", "drain", busiest, "--addr", addr, "--wait", "20s")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("host %s (child of region/%s) is draining", busiest, c.HostRegion[busiest])) || !strings.Contains(out, "holds no shards") {
		t.Fatalf("drain: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	t.Logf("strata host drain:\n%s", out)
	eventually(t, "drained host runs nothing", 20*time.Second, func() error {
		if k := len(c.Hosts[busiest].Agent().Running()); k != 0 {
			return fmt.Errorf("%s still runs %d shards", busiest, k)
		}
		return checkShardsMatchHosts(t, c, addr, n)
	})
	var st statusJSON
	cliJSON(t, &st, "status", "--addr", addr, "-o", "json")
	var drained *childNode
	eachInstance(st.Tree, func(nd *tierNode, _ *childNode) {
		if ch := nd.FindChild(busiest); ch != nil {
			drained = ch
		}
	})
	if drained == nil || drained.State != "draining" || drained.Shards != 0 {
		t.Errorf("drained host in status: %+v", drained)
	}
	var undrain childStateJSON
	cliJSON(t, &undrain, "host", "undrain", busiest, "--addr", addr, "-o", "json")
	if undrain.State != "active" || undrain.Instance != c.HostRegion[busiest] || undrain.StateIndex == 0 {
		t.Errorf("undrain: %+v", undrain)
	}

	phase("drained")
	// Explain: the placement at both tiers and the history with reasons.
	// The global tier may still be balancing its regions (region-2's hosts may
	// have connected after the first placement): explain a settled placement.
	if err := c.Settle(1500*time.Millisecond, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	var ex explainJSON
	cliJSON(t, &ex, "explain", "wc/0", "--addr", addr, "-o", "json")
	if ex.Shard == nil || ex.Shard.ID != "wc/0" || ex.Shard.Job != "wc" || ex.Shard.Load["cpu"] != 0.5 || ex.Shard.LatencySLOSeconds != 0.05 {
		t.Errorf("explain shard: %+v", ex.Shard)
	}
	if len(ex.Placement) != 2 || ex.Placement[0].Tier != interfaces.TierGlobal || ex.Placement[1].Tier != interfaces.TierRegion ||
		ex.Placement[1].Instance != ex.Placement[0].Child || c.HostRegion[ex.Placement[1].Child] != ex.Placement[0].Child {
		t.Errorf("explain placement: %+v", ex.Placement)
	}
	tiers := map[string]int{}
	for _, e := range ex.History {
		tiers[e.Tier]++
		if e.Reason == "" || e.StateIndex == 0 || e.Mode == "" {
			t.Errorf("history event without reason, index or mode: %+v", e)
		}
		// When the leader appended the change: during this test.
		if at, err := time.Parse(time.RFC3339Nano, e.At); err != nil || at.Before(began) || at.After(time.Now()) {
			t.Errorf("history event time %q (%v), want between %s and now", e.At, err, began.Format(time.RFC3339Nano))
		}
	}
	if tiers[interfaces.TierGlobal] == 0 || tiers[interfaces.TierRegion] == 0 || ex.History[0].Tier != interfaces.TierGlobal {
		t.Errorf("history should hold the global then the region events: %+v", ex.History)
	}
	code, out, _ = runCLI("explain", "wc/0", "--addr", addr)
	if code != 0 || !strings.Contains(out, "PLACEMENT") || !strings.Contains(out, "REASON") || !strings.Contains(out, ex.History[0].Reason) {
		t.Errorf("explain table: exit %d\n%s", code, out)
	}
	t.Logf("strata explain wc/0:\n%s", out)

	phase("explained")
	// Move the job off the region holding wc/0 (drain it at the global tier):
	// explain then shows the global history naming both regions, the new
	// region's events, and the old region's as those of a former owner.
	ex = explainJSON{}
	cliJSON(t, &ex, "explain", "wc/0", "--addr", addr, "-o", "json")
	from, to := ex.Placement[0].Child, "region-1"
	if from == "region-1" {
		to = "region-2"
	}
	ga := adminClient(t, addr)
	if _, err := ga.Drain(context.Background(), &wire.DrainRequest{Child: from}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "every shard moved to "+to, 20*time.Second, func() error {
		if err := checkShardsMatchHosts(t, c, addr, n); err != nil {
			return err
		}
		for s, hosts := range runningOn(c) {
			if c.HostRegion[hosts[0]] != to {
				return fmt.Errorf("%s runs on %s", s, hosts[0])
			}
		}
		return nil
	})
	ex = explainJSON{}
	cliJSON(t, &ex, "explain", "wc/0", "--addr", addr, "-o", "json")
	if len(ex.Placement) != 2 || ex.Placement[0].Child != to || ex.Placement[1].Instance != to {
		t.Errorf("explain placement after the move: %+v", ex.Placement)
	}
	var globalMoved, current, former bool
	for _, e := range ex.History {
		switch {
		case e.Tier == interfaces.TierGlobal && e.From == from && e.To == to && e.Reason != "":
			globalMoved = true
		case e.Instance == to && !e.Former && e.To != "":
			current = true
		case e.Instance == from && e.Former:
			former = true
		case e.Instance == from && !e.Former:
			t.Errorf("%s event not marked former: %+v", from, e)
		}
	}
	if !globalMoved || !current || !former {
		t.Errorf("history after the move: global move %v, %s events %v, former %s events %v: %+v", globalMoved, to, current, from, former, ex.History)
	}
	code, out, _ = runCLI("explain", "wc/0", "--addr", addr)
	if code != 0 || !strings.Contains(out, "region/"+from+" (former)") {
		t.Errorf("explain table after the move: exit %d\n%s", code, out)
	}
	t.Logf("strata explain wc/0 after the move:\n%s", out)

	phase("moved to another region")
	// Errors exit non-zero and say what is wrong.
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: wc2\nparallelism: 2\nload:\n  cpu: -1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	errCases := []struct {
		args   []string
		code   int
		errHas []string
	}{
		{[]string{"job", "submit", "--addr", addr, bad}, 2, []string{"bad.yaml: line 4: load.cpu: must be a number ≥ 0"}},
		{[]string{"explain", "nope/1", "--addr", addr}, 1, []string{`shard "nope/1"`, "not found"}},
		{[]string{"host", "drain", "no-such-host", "--addr", addr}, 1, []string{`host "no-such-host"`, "not found"}},
		{[]string{"host", "drain", "region-1", "--addr", addr}, 1, []string{`"region-1" is not a host: it is a region child of global/global`}},
		{[]string{"job", "delete", "nojob", "--addr", addr}, 1, []string{`job "nojob"`, "not found"}},
		{[]string{"shards", "--job", "nojob", "--addr", addr}, 1, []string{`job "nojob"`, "not found"}},
		{[]string{"status", "--addr", "127.0.0.1:1", "--timeout", "3s"}, 1, []string{"cannot reach the Admin API at 127.0.0.1:1"}},
	}
	for _, tc := range errCases {
		code, _, errOut := runCLI(tc.args...)
		t.Logf("%v: exit %d: %s", tc.args, code, errOut)
		if code != tc.code {
			t.Errorf("%v: exit %d, want %d (stderr %q)", tc.args, code, tc.code, errOut)
		}
		for _, want := range tc.errHas {
			if !strings.Contains(errOut, want) {
				t.Errorf("%v: stderr %q lacks %q", tc.args, errOut, want)
			}
		}
	}

	phase("errors")
	// Delete: the job is gone and its shards stop.
	code, out, errOut = runCLI("job", "delete", "wc", "--addr", addr)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("job wc deleted: %d shards removed", n)) {
		t.Fatalf("delete: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, _ = runCLI("job", "list", "--addr", addr)
	if code != 0 || strings.TrimSpace(out) != "no jobs" {
		t.Errorf("job list after delete: exit %d, %q", code, out)
	}
	// The global tier keeps a deleted shard's history; explain still shows it.
	code, out, errOut = runCLI("explain", "wc/0", "--addr", addr)
	if code != 0 || !strings.Contains(out, "shard wc/0: no longer in the cluster; its history remains") || !strings.Contains(out, "global/global") {
		t.Errorf("explain of a deleted shard: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	eventually(t, "the deleted job's shards stop", 15*time.Second, func() error {
		if r := runningOn(c); len(r) != 0 {
			return fmt.Errorf("%d shards still run", len(r))
		}
		return nil
	})

	phase("deleted")
	// A region that is down shows in status as unreachable; status still works.
	if err := c.Regions["region-2"].Close(); err != nil {
		t.Logf("closing region-2: %v", err)
	}
	delete(c.Regions, "region-2")
	code, out, errOut = runCLI("status", "--addr", addr, "-o", "json", "--timeout", "5s")
	if code != 0 || !strings.Contains(errOut, "warning: unreachable tier instance region-2") {
		t.Fatalf("status with a region down: exit %d, stderr %q", code, errOut)
	}
	st = statusJSON{}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	if r2 := st.Tree[0].FindChild("region-2"); r2 == nil || r2.Error == "" || r2.Instance != nil || len(st.Unreachable) != 1 {
		t.Errorf("region-2 down: %+v, unreachable %v", r2, st.Unreachable)
	}
	code, _, errOut = runCLI("host", "drain", "region-2-host-1", "--addr", addr, "--timeout", "5s")
	if code != 1 || !strings.Contains(errOut, `host "region-2-host-1": no tier instance has it as a child`) || !strings.Contains(errOut, "may be under an unreachable one: region-2") {
		t.Errorf("drain under a region that is down: exit %d, stderr %q", code, errOut)
	}
	// Releasing a shard quarantined nowhere that answered: the region that is
	// down could hold the quarantine, and the error says so.
	code, _, errOut = runCLI("shards", "release", "wc/1", "--addr", addr, "--timeout", "5s")
	if code != 1 || !strings.Contains(errOut, "not quarantined at any tier instance that answered") || !strings.Contains(errOut, "region-2 (child of global/") {
		t.Errorf("release with a region down: exit %d, stderr %q", code, errOut)
	}
	if err := c.CloseAndCheckLedger(); err != nil {
		t.Error(err)
	}
}

func adminClient(t *testing.T, addr string) wire.AdminClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return wire.NewAdminClient(cc)
}

// There is exactly one "host" command, and it has drain and undrain.
func TestHostCommandIsOne(t *testing.T) {
	root := newRootCmd(nil, nil)
	var hosts []*cobra.Command
	for _, c := range root.Commands() {
		if c.Name() == "host" {
			hosts = append(hosts, c)
		}
	}
	if len(hosts) != 1 {
		t.Fatalf("%d commands named host", len(hosts))
	}
	for _, sub := range []string{"drain", "undrain"} {
		if c, _, err := hosts[0].Find([]string{sub}); err != nil || c.Name() != sub {
			t.Errorf("host %s: %v", sub, err)
		}
	}
}
