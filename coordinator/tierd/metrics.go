package tierd

import (
	"net/http"
	"strings"

	"github.com/strata-sched/strata/coordinator/dashboard"
	"github.com/strata-sched/strata/coordinator/telemetry"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/internal/tlsutil"
	"github.com/strata-sched/strata/tiers/control"
)

// newMetrics makes the replica's own registry (coordinator/telemetry) and the
// metrics read from its state at scrape time: a follower exports its Raft
// state, its committed view of the children and of the shards they own, and
// whether it leads; the leader's control loop pushes the rest.
func (d *Daemon) newMetrics() {
	d.metrics = telemetry.NewMetrics(map[string]string{"tier": d.cfg.Tier, "tier_instance": d.cfg.Instance, "node": d.cfg.NodeID})
	d.scope = d.metrics.Scope
	m := d.metrics
	m.Init("tier")
	m.RaftStats(d.tier.Raft())
	m.Func("leader", func(emit telemetry.Emit) {
		v := 0.0
		if d.tier.IsLeader() {
			v = 1
		}
		emit(v)
	})
	m.Func("shards_owned", func(emit telemetry.Emit) {
		owned := 0
		for _, cu := range d.tier.FSM.Children() {
			owned += cu.Shards
		}
		emit(float64(owned))
	})
	m.Func("children", func(emit telemetry.Emit) {
		n := map[interfaces.ChildState]int{}
		for _, cu := range d.tier.FSM.Children() {
			n[cu.Child.State]++
		}
		for _, s := range []interfaces.ChildState{interfaces.ChildActive, interfaces.ChildDraining, interfaces.ChildFailed} {
			emit(float64(n[s]), s.String())
		}
	})
	m.Func("sessions", func(emit telemetry.Emit) {
		d.mu.Lock()
		n := len(d.sessions)
		d.mu.Unlock()
		emit(float64(n))
	})
	m.Func("alerts", func(emit telemetry.Emit) {
		d.mu.Lock()
		alerts := append([]string(nil), d.alerts...)
		d.mu.Unlock()
		n := map[string]int{}
		for _, a := range alerts {
			code, _, _ := strings.Cut(a, ":")
			n[code]++
		}
		// Every known code is exported, 0 when quiet, so that an alert rule
		// sees the series before the first alert.
		for _, code := range []string{control.AlertMassFailure, control.AlertNoCapacity, control.AlertSolveFailed, control.AlertStraggler} {
			emit(float64(n[code]), code)
			delete(n, code)
		}
		for code, k := range n {
			emit(float64(k), code)
		}
	})
}

// newDashboard makes the web dashboard (coordinator/dashboard) this replica
// serves at /ui/ on its HTTP port: it reads this replica's Admin API and,
// through the children's addresses, the tier instances below. With TLS it
// dials them with this replica's certificate (a replica may call the Admin
// API of any tier; the ACL token the page sends is checked as the CLI's).
func (d *Daemon) newDashboard() map[string]http.Handler {
	o := dashboard.Options{Addr: d.advertisedGRPC()}
	if d.cfg.TLS != nil {
		o.Creds = d.cfg.TLS.ClientCredentials(tlsutil.IsRole(tlsutil.RoleReplica))
	}
	d.ui = dashboard.New(o)
	return map[string]http.Handler{dashboard.Path: d.ui.Handler()}
}

// httpGuard is the HTTP server's guard: the dashboard (page and gateway) is
// let through, since every call the gateway makes carries the page's token to
// the Admin API, which checks it; everything else passes httpAuth.
func (d *Daemon) httpGuard(r *http.Request) (int, error) {
	if strings.HasPrefix(r.URL.Path, dashboard.Path) {
		return 0, nil
	}
	return d.httpAuth(r)
}
