package main

import (
	"strings"
	"testing"
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
	if c, err := f.tierConfig(); err != nil || c.ControlPolicies == nil || len(c.ControlPolicies) != 0 {
		t.Errorf("control_policies: [] gave %v (%v)", c.ControlPolicies, err)
	}
	f = tierFile{}
	_ = decodeStrict("x.yaml", []byte(regionYAML), &f)
	if c, _ := f.tierConfig(); strings.Join(c.ControlPolicies, ",") != "straggler,doctor,autoscale" {
		t.Errorf("default control policies %v", c.ControlPolicies)
	}
}
