package sim

import (
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/tiers"
)

// The simulator builds every tier policy by name from tiers.Default, the same
// registry the daemons select from ("greedy", "local", "exact" and any custom
// policy), so a scenario runs exactly the code a tier would run.

// PolicyKnown reports whether a policy name can be built.
func PolicyKnown(name string) bool { return tiers.Default.Has(name) }

// PolicyNames lists the policy names a scenario may use, sorted.
func PolicyNames() []string { return tiers.Default.Names() }

// newPolicy builds the named policy with its parameters.
func newPolicy(name string, params map[string]string) (interfaces.Policy, error) {
	cfg := interfaces.PolicyConfig{}
	for k, v := range params {
		cfg[k] = v
	}
	return tiers.New(name, cfg)
}
