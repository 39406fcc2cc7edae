package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/devcluster"
	"github.com/strata-sched/strata/internal/testutil"
)

// TestRegionDrainAndUndrain: the token of "plan --fail REGION" drains the
// region, and "strata region undrain REGION" undoes it ("host undrain" refused
// it as not a host, and there was no other command); "strata tier
// drain|undrain" acts on a child of any tier; a wrong-tier name says which
// command fits.
func TestRegionDrainAndUndrain(t *testing.T) {
	c, err := devcluster.Start(devcluster.Options{Dir: t.TempDir(), GlobalAddr: "127.0.0.1:0", Regions: 2, HostsPerRegion: 1,
		Interval: 200 * time.Millisecond, LeaseTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	addr := c.Global.GRPCAddr()
	testutil.Eventually(t, "both regions connected", 20*time.Second, func() error {
		code, out, errOut := runCLI("status", "--addr", addr)
		if code != 0 || strings.Count(out, "host    active  yes") != 2 {
			return fmt.Errorf("status: exit %d %s\n%s", code, errOut, out)
		}
		return nil
	})
	regionState := func() string {
		var st statusJSON
		cliJSON(t, &st, "status", "--addr", addr, "-o", "json")
		if r := st.Tree[0].FindChild("region-2"); r != nil {
			return r.State
		}
		return "missing"
	}

	// Apply a --fail token: region-2 ends draining.
	testutil.Eventually(t, "a --fail region-2 plan applied", 20*time.Second, func() error {
		var p planJSON
		cliJSON(t, &p, "plan", "--addr", addr, "--fail", "region-2", "-o", "json")
		if code, _, errOut := runCLI("plan", "apply", "--addr", addr, p.Token); code != 0 {
			return fmt.Errorf("apply: exit %d: %s", code, errOut)
		}
		return nil
	})
	if s := regionState(); s != "draining" {
		t.Fatalf("region-2 is %s after applying a --fail token, want draining", s)
	}
	// "host undrain" refuses a region, and says what to use.
	code, _, errOut := runCLI("host", "undrain", "region-2", "--addr", addr)
	if code != 1 || !strings.Contains(errOut, `"region-2" is not a host: it is a region child of global/global (use 'strata region drain|undrain region-2')`) {
		t.Errorf("host undrain region-2: exit %d, stderr %q", code, errOut)
	}
	var res childStateJSON
	code, out, errOut := runCLI("region", "undrain", "region-2", "--addr", addr, "-o", "json")
	if code != 0 {
		t.Fatalf("region undrain region-2: exit %d, stderr %q", code, errOut)
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Child != "region-2" || res.State != "active" || res.Tier != "global" || res.StateIndex == 0 {
		t.Fatalf("region undrain -o json: %q (%v)", out, err)
	}
	if s := regionState(); s != "active" {
		t.Fatalf("region-2 is %s after region undrain, want active", s)
	}
	// Drain and undrain through the commands for any tier.
	code, out, errOut = runCLI("region", "drain", "region-2", "--addr", addr)
	if code != 0 || !strings.Contains(out, "region region-2 (child of global/global) is draining: 0 shards to move") {
		t.Fatalf("region drain: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, out, errOut = runCLI("tier", "undrain", "region-2", "--addr", addr); code != 0 || !strings.Contains(out, "child region-2 (child of global/global) is active") {
		t.Fatalf("tier undrain: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if s := regionState(); s != "active" {
		t.Fatalf("region-2 is %s after tier undrain, want active", s)
	}
	code, _, errOut = runCLI("region", "drain", "region-1-host-1", "--addr", addr)
	if code != 1 || !strings.Contains(errOut, `"region-1-host-1" is not a region: it is a host child of region/region-1 (use 'strata host drain|undrain region-1-host-1')`) {
		t.Errorf("region drain of a host: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut = runCLI("region", "undrain", "", "--addr", addr); code != 2 || !strings.Contains(errOut, "REGION") {
		t.Errorf(`region undrain "": exit %d, stderr %q; want a usage error naming REGION`, code, errOut)
	}
}
