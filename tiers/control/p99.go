package control

import (
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// WorstP99 is the highest p99 latency the view's children report: the tier's
// p99 that RoundResult.P99 carries for the AIMD move concurrency. The daemons
// and the simulator both measure it this way.
func WorstP99(v *interfaces.View) time.Duration {
	var w time.Duration
	for _, r := range v.Reports {
		if r.LatencyP99 > w {
			w = r.LatencyP99
		}
	}
	return w
}
