package main

import (
	"testing"

	"github.com/strata-sched/strata/coordinator/plugin"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/tiers"
)

// A plugin tier's InstanceStatus.policy is "plugin(ADDRESS, fallback F): health";
// policyName cut it at the first ':', inside the address ("plugin(127.0.0.1").
func TestPolicyName(t *testing.T) {
	pol, err := tiers.New(plugin.Name, interfaces.PolicyConfig{"address": "127.0.0.1:7610"})
	if err != nil {
		t.Fatal(err)
	}
	p := pol.(*plugin.Policy)
	defer p.Close()
	for in, want := range map[string]string{
		p.Name() + ": " + p.Status().Describe():                      plugin.Name, // as tierd.policyStatus builds it
		"plugin(127.0.0.1:7610, fallback local): unhealthy: dial: x": plugin.Name,
		"plugin: healthy": plugin.Name,
		"local":           "local",
		" spread ":        "spread",
	} {
		if got := policyName(in); got != want {
			t.Errorf("policyName(%q) = %q, want %q", in, got, want)
		}
	}
}
