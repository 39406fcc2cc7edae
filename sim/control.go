package sim

import (
	"time"

	"github.com/strata-sched/strata/interfaces"
)

const nres = 4 // the built-in resources, in interfaces.BuiltinResources order

func vec(l interfaces.Load) [nres]float64 { return [nres]float64{l.CPU, l.Mem, l.Net, l.Tasks} }

// FailoverAfter is how long after a host fails (or a region is lost) its tier
// instance first re-places its shards, unless the mass-failure guard holds:
// the lease expires detect_after after the failure and the controller declares
// the child failed its grace later.
func (sc *Scenario) FailoverAfter(p PolicySpec) time.Duration {
	return sc.Model.DetectAfter.D() + sc.ControlConfig(p).Grace
}
