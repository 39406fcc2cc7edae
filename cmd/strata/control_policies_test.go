package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/devcluster"
)

// control_policies and control_policy_config: checked as start-up would,
// errors naming the key.
func TestCheckConfigControlPolicies(t *testing.T) {
	tests := []struct {
		name, body string
		code       int
		want       string
	}{
		{"defaults", regionYAML, 0, "config ok"},
		{"none", regionYAML + "control_policies: []\n", 0, "config ok"},
		{"configured", regionYAML + "control_policies: [straggler, doctor]\ncontrol_policy_config: {straggler: {factor: \"3\", window: 30s}, doctor: {hosts: \"2\"}}\n", 0, "config ok"},
		{"unknown policy", regionYAML + "control_policies: [healer]\n", 2, "control_policies[0]: must be a known control policy (autoscale, doctor, straggler)"},
		{"bad value", regionYAML + "control_policy_config: {straggler: {factor: \"0.5\"}}\n", 2, "control_policy_config.straggler.factor: must be a number > 1"},
		{"unknown key", regionYAML + "control_policy_config: {doctor: {retries: \"3\"}}\n", 2, "control_policy_config.doctor.retries: is not a setting of doctor"},
		{"not selected", regionYAML + "control_policies: [doctor]\ncontrol_policy_config: {autoscale: {mode: apply}}\n", 2, "control_policy_config.autoscale: configures a policy that is not in control_policies"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI("region", "--config", writeFile(t, tt.body), "--check-config")
			if code != tt.code || !strings.Contains(out+errOut, tt.want) {
				t.Errorf("exit %d (want %d), output %q, want it to contain %q", code, tt.code, out+errOut, tt.want)
			}
		})
	}
	// [] really means none, and an absent key the default.
	f := tierFile{}
	if err := decodeStrict("x.yaml", []byte(regionYAML+"control_policies: []\n"), &f); err != nil {
		t.Fatal(err)
	}
	if c, err := f.tierConfig(io.Discard); err != nil || c.ControlPolicies == nil || len(c.ControlPolicies) != 0 {
		t.Errorf("control_policies: [] gave %v (%v)", c.ControlPolicies, err)
	}
	f = tierFile{}
	_ = decodeStrict("x.yaml", []byte(regionYAML), &f)
	if c, _ := f.tierConfig(io.Discard); strings.Join(c.ControlPolicies, ",") != "straggler,doctor,autoscale" {
		t.Errorf("default control policies %v", c.ControlPolicies)
	}
}

// The CLI on a dev cluster where a shard fails on every host: strata shards
// and strata explain show it quarantined with the doctor's reason; strata
// shards release lets it run again; a second release is an error.
func TestCLIQuarantineAndRelease(t *testing.T) {
	c, err := devcluster.Start(devcluster.Options{Dir: t.TempDir(), Regions: 1, HostsPerRegion: 3, Interval: 200 * time.Millisecond, LeaseTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for h, drv := range c.Drivers {
		drv.FailNextStart(fmt.Errorf("exit status 70 on %s", h))
	}
	addr := c.Global.GRPCAddr()
	if code, _, errOut := runCLI("job", "submit", writeFile(t, "name: poison\nparallelism: 1\nload: {cpu: 1}\n"), "--addr", addr); code != 0 {
		t.Fatalf("submit: exit %d: %s", code, errOut)
	}
	var out string
	eventually(t, "quarantined in strata shards", 30*time.Second, func() error {
		code, o, errOut := runCLI("shards", "--addr", addr)
		if code != 0 {
			return fmt.Errorf("exit %d: %s", code, errOut)
		}
		if !strings.Contains(o, "QUARANTINED poison/0 at region/region-1: doctor: shard poison/0 failed on 3 distinct children") {
			return fmt.Errorf("not quarantined yet:\n%s", o)
		}
		out = o
		return nil
	})
	if !strings.Contains(out, "1 quarantined") || !strings.Contains(out, "quarantined\n") {
		t.Errorf("strata shards:\n%s", out)
	}
	// The evidence names every host it failed on and the process's exit (how
	// each host's failure is worded depends on timing: a start that failed, or
	// a start refused because the region had already revoked it).
	code, ex, errOut := runCLI("explain", "poison/0", "--addr", addr)
	// The quarantine's reason only (the history names every host anyway: the
	// shard was placed on each).
	reason, _, _ := strings.Cut(ex[strings.Index(ex, "QUARANTINED")+1:], "\nHISTORY")
	if code != 0 || !strings.Contains(ex, "QUARANTINED at region/region-1 (not placed until released: strata shards release poison/0)") ||
		!strings.Contains(reason, "exit status 70 on region-1-host-") || !strings.Contains(ex, "quarantine") ||
		!strings.Contains(reason, "region-1-host-1") || !strings.Contains(reason, "region-1-host-2") || !strings.Contains(reason, "region-1-host-3") {
		t.Errorf("strata explain: exit %d %s\n%s", code, errOut, ex)
	}
	eventually(t, "the quarantine alert in strata status", 10*time.Second, func() error {
		_, st, _ := runCLI("status", "--addr", addr)
		if !strings.Contains(st, "ALERT region region-1: quarantine: 1 shards quarantined at region/region-1") {
			return fmt.Errorf("status:\n%s", st)
		}
		return nil
	})
	code, rel, errOut := runCLI("shards", "release", "poison/0", "--reason", "fixed the worker", "--addr", addr, "-o", "json")
	var res releaseJSON
	if code != 0 {
		t.Fatalf("release: exit %d %s\n%s", code, errOut, rel)
	}
	if err := json.Unmarshal([]byte(rel), &res); err != nil || res.Shard != "poison/0" || len(res.Released) != 1 || res.Released[0].Tier != "region" || res.Released[0].Instance != "region-1" || !strings.Contains(res.Released[0].Quarantined, "poison/0") {
		t.Fatalf("release -o json: %v\n%s", err, rel)
	}
	eventually(t, "running after the release", 30*time.Second, func() error {
		if r := runningOn(c)["poison/0"]; len(r) != 1 {
			return fmt.Errorf("runs on %v", r)
		}
		return nil
	})
	if code, _, errOut := runCLI("shards", "release", "poison/0", "--addr", addr); code != 1 || !strings.Contains(errOut, "is not quarantined at any tier instance") {
		t.Errorf("second release: exit %d, %q", code, errOut)
	}
}
