package tierd

import "github.com/strata-sched/strata/interfaces"

// cooperate returns the constraints this tier adds to its own solve from its
// children's hints (the integration mode decides which). Called from observe
// with d.decide held.
func (d *Daemon) cooperate(v *interfaces.View) []interfaces.Constraint {
	return nil
}
