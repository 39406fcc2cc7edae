package sim

import (
	"fmt"
	"slices"
	"strings"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/tiers"
)

// The simulator builds every tier policy by name from tiers.Default, the same
// registry the daemons select from ("greedy", "local", "exact" and any custom
// policy), so a scenario runs exactly the code a tier would run.

// Plugin is the name of coordinator/plugin's policy, which calls a policy in
// another process: its plans depend on that process and on time, so it is not
// deterministic, and a simulation cannot run it (a run would not replay).
const Plugin = "plugin"

// PluginRule is why a scenario may not name the plugin policy, for messages.
const PluginRule = `the "plugin" policy calls another process and is not deterministic: a simulation cannot run it; simulate the policy the plugin serves, registered in-process (tiers.MustRegister), or its fallback`

// PolicyKnown reports whether a policy name can be built and simulated (not
// the plugin policy).
func PolicyKnown(name string) bool { return name != Plugin && tiers.Default.Has(name) }

// PolicyNames lists the policy names a scenario may use, sorted.
func PolicyNames() []string {
	return slices.DeleteFunc(tiers.Default.Names(), func(n string) bool { return n == Plugin })
}

// policyProblem says why a scenario cannot run the policy name (the plugin
// policy, or an unknown name, listing the known ones), or "".
func policyProblem(name string) string {
	switch {
	case name == Plugin:
		return PluginRule
	case !PolicyKnown(name):
		return fmt.Sprintf("unknown policy %q (known: %s)", name, strings.Join(PolicyNames(), ", "))
	}
	return ""
}

// newPolicy builds the named policy with its parameters.
func newPolicy(name string, params map[string]string) (interfaces.Policy, error) {
	cfg := interfaces.PolicyConfig{}
	for k, v := range params {
		cfg[k] = v
	}
	return tiers.New(name, cfg)
}

// IntegrationPair turns sc into the comparison of its first policy's setup in
// decoupled and in collaborative mode with one solver (the daemons' default
// is tiers.DefaultPolicy): two policies named "decoupled" and
// "collaborative", everything else of the first policy kept (its chain,
// control settings and policies, reserve) except operator constraints, and
// of the assertions only no_loss, which then holds for both. The result is
// validated like a scenario file; an unknown solver is an error naming it.
func IntegrationPair(sc *Scenario, solver string) error {
	if len(sc.Policies) == 0 {
		return fmt.Errorf("scenario %s: no policy to compare", sc.Name)
	}
	if p := policyProblem(solver); p != "" {
		return fmt.Errorf("solver: %s: %w", p, interfaces.ErrInvalid)
	}
	base := sc.Policies[0]
	base.Solver, base.GlobalSolver, base.Tiers, base.Constraints = solver, solver, nil, nil
	dec, col := base, base
	dec.Name, dec.Integration = Decoupled, Decoupled
	col.Name, col.Integration = Collaborative, Collaborative
	sc.Policies = []PolicySpec{dec, col}
	var keep []Assertion
	for _, a := range sc.Assertions {
		if a.Kind == "no_loss" {
			a.Policies = nil
			keep = append(keep, a)
		}
	}
	if len(keep) == 0 {
		keep = []Assertion{{Kind: "no_loss"}}
	}
	sc.Assertions = keep
	return sc.validate()
}
