package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/devcluster"
	"github.com/strata-sched/strata/interfaces/wire"
)

func TestPlanCommand(t *testing.T) {
	c, err := devcluster.Start(devcluster.Options{Dir: t.TempDir(), Regions: 2, HostsPerRegion: 2,
		Interval: 200 * time.Millisecond, LeaseTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.Global.GRPCAddr()
	if code, _, errOut := runCLI("job", "submit", "--addr", addr, "../../deploy/examples/job.yaml"); code != 0 {
		t.Fatalf("submit: %s", errOut)
	}
	// Wait until every shard is placed on a host.
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, out, _ := runCLI("shards", "--addr", addr, "-o", "json")
		if code == 0 && !strings.Contains(out, `"pending"`) && strings.Contains(out, `"placed"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("shards not placed: %s", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Let the periodic rounds settle before asking what a drain would do.
	if err := c.Settle(1500*time.Millisecond, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	host := ""
	for name, h := range c.Hosts {
		if len(h.Agent().Running()) > 0 {
			host = name
			break
		}
	}
	// Wait until what the host runs is what its region has committed for it, so
	// the plan and the host agree on the shards to move.
	region := c.Regions[c.HostRegion[host]]
	before := 0
	deadline = time.Now().Add(20 * time.Second)
	for {
		st, err := adminClient(t, region.GRPCAddr()).Status(context.Background(), &wire.StatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		committed := int64(-1)
		for _, ch := range st.Tiers[0].Instances[0].Children {
			if ch.Child.GetId() == host {
				committed = ch.Shards
			}
		}
		before = len(c.Hosts[host].Agent().Running())
		if committed == int64(before) && before > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s runs %d shards, its region committed %d", host, before, committed)
		}
		time.Sleep(100 * time.Millisecond)
	}
	code, out, errOut := runCLI("plan", "--addr", addr, "--drain", host, "-o", "json")
	if code != 0 {
		t.Fatalf("plan: %d %s", code, errOut)
	}
	var p planJSON
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("plan -o json: %v\n%s", err, out)
	}
	off := 0
	for _, m := range p.Moves {
		if m.From == host {
			off++
		}
	}
	if off != before || p.Tier != "region" || !strings.Contains(p.Token, "@") {
		t.Fatalf("plan for draining %s (%d shards): %+v", host, before, p)
	}
	time.Sleep(300 * time.Millisecond)
	if now := len(c.Hosts[host].Agent().Running()); now != before {
		t.Fatalf("plan moved shards: %d → %d", before, now)
	}
	// Bad input.
	for _, args := range [][]string{
		{"plan", "--addr", addr, "--drain", "nope"},
		{"plan", "--addr", addr, "--fail", "nope"},
		{"plan", "--addr", addr, "--policy", "nope"},
		{"plan", "apply", "--addr", addr, "not-a-token"},
	} {
		if code, _, errOut := runCLI(args...); code == 0 || errOut == "" {
			t.Errorf("%v: exit %d, stderr %q: want a failure with a message", args, code, errOut)
		}
	}
	// Apply: the host ends empty; applying again is refused.
	deadline = time.Now().Add(20 * time.Second)
	for {
		code, _, errOut = runCLI("plan", "apply", "--addr", addr, p.Token)
		if code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("apply: %s", errOut)
		}
		// The state moved on (a report, a round): plan again.
		_, out, _ = runCLI("plan", "--addr", addr, "--drain", host, "-o", "json")
		_ = json.Unmarshal([]byte(out), &p)
	}
	deadline = time.Now().Add(30 * time.Second)
	for len(c.Hosts[host].Agent().Running()) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s still runs shards after the plan was applied", host)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, _, _ := runCLI("plan", "apply", "--addr", addr, p.Token); code == 0 {
		t.Error("a used token was accepted again")
	}
	if err := c.CloseAndCheckLedger(); err != nil {
		t.Error(err)
	}
}
