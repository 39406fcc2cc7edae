package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Kind is how a metric is exported.
type Kind int

// Kinds.
const (
	KindCounter Kind = iota
	KindGauge
	KindHistogram
	// KindTotal is a counter whose caller knows the running total and sets it
	// (Scope.Gauge(name).Update(total)), e.g. a plugin's own failure count.
	// It is exported as a counter named Name.
	KindTotal
)

func (k Kind) String() string {
	switch k {
	case KindCounter, KindTotal:
		return "counter"
	case KindGauge:
		return "gauge"
	case KindHistogram:
		return "histogram"
	}
	return "unknown"
}

// Def describes one metric: its exported name (without the "strata_" prefix),
// kind, HELP text, variable labels and, for histograms, buckets. The daemon's
// constant labels (tier, tier_instance, node or host) are added to every series.
type Def struct {
	Name    string
	Kind    Kind
	Help    string
	Labels  []string
	Buckets []float64
	// OneDaemon marks hashicorp/raft's own metrics, exported only by a daemon
	// that runs alone in its process (OneDaemonProcess), not by strata dev.
	OneDaemon bool
	// Daemon is who pushes the metric ("tier", "host"; "" for scrape-time and
	// raft metrics): Metrics.Init makes its series, at zero, when the daemon
	// starts, so that rate() and alert rules see it before the first event.
	Daemon string
}

// Bucket layouts, in seconds. A control round is a solve plus a few Raft
// commits: from a millisecond (nothing to do) to seconds (a large local search
// on a slow disk). Raft commits on loopback take under a millisecond, on a
// WAN a hundred or more; last-contact is bounded by the heartbeat timeout (1 s
// by default) until the leader is lost.
var (
	roundBuckets  = prometheus.ExponentialBuckets(0.001, 2.5, 10)  // 1 ms … 3.8 s
	solveBuckets  = prometheus.ExponentialBuckets(0.0005, 2.5, 11) // 0.5 ms … 4.8 s
	commitBuckets = prometheus.ExponentialBuckets(0.00025, 2, 14)  // 0.25 ms … 2 s
)

// catalogue lists every metric Strata exports. A name used through a Scope but
// missing here is still exported, with a HELP text saying so (a test of the dev
// cluster fails on it).
var catalogue = func() map[string]Def {
	defs := []Def{
		// Tier replicas: pushed by the control loop and the sessions.
		{Name: "moves_committed_total", Daemon: "tier", Kind: KindCounter, Help: "Moves (and first placements) this tier committed through Raft."},
		{Name: "moves_rejected_total", Daemon: "tier", Kind: KindCounter, Help: "Planned moves the commit-time verification refused."},
		{Name: "moves_failed_total", Daemon: "tier", Kind: KindCounter, Help: "Moves whose commit failed (Raft error, lost leadership)."},
		{Name: "moves_backed_off_total", Daemon: "tier", Kind: KindCounter, Help: "Moves put on hold after being rejected several rounds in a row."},
		{Name: "moves_held", Daemon: "tier", Kind: KindGauge, Help: "Moves on hold (backoff) after the last control round."},
		{Name: "lease_expiries_total", Daemon: "tier", Kind: KindCounter, Help: "Children declared failed because their lease expired and the grace passed."},
		{Name: "leader_cut_off_total", Daemon: "tier", Kind: KindCounter, Help: "Times this leader handed its leadership over because most of its children went silent (control.step_down_after)."},
		{Name: "moves_dropped_unreachable_total", Daemon: "tier", Kind: KindCounter, Help: "Planned moves to or off a child silent for control.step_down_after (but not yet failed) that the round dropped."},
		{Name: "sessions_opened_total", Daemon: "tier", Kind: KindCounter, Help: "Child sessions accepted (a Hello admitted) by this replica."},
		{Name: "sessions_refused_total", Daemon: "tier", Kind: KindCounter, Help: "Child sessions refused (not leader, bad identity, admission)."},
		{Name: "children_refused_total", Daemon: "tier", Kind: KindCounter, Help: "Children refused by the admission policy."},
		{Name: "children_forgotten_total", Daemon: "tier", Kind: KindCounter, Help: "Failed children removed after children.gc_after."},
		{Name: "acks_failed_total", Daemon: "tier", Kind: KindCounter, Help: "Assign or revoke acks that reported an error from the child."},
		{Name: "shard_failures_total", Daemon: "tier", Kind: KindCounter, Help: "Shard failures reported by children (the doctor policy's input)."},
		{Name: "shards_quarantined_total", Daemon: "tier", Kind: KindCounter, Help: "Shards quarantined after failing on too many children."},
		{Name: "shards_infeasible", Daemon: "tier", Kind: KindGauge, Help: "Shards the last control round could not place anywhere (no capacity or constraints)."},
		{Name: "control_findings", Daemon: "tier", Kind: KindGauge, Help: "Findings of the control policies (stragglers, doctor, autoscale) in the last round."},
		{Name: "control_round_seconds", Daemon: "tier", Kind: KindHistogram, Help: "Duration of one control round (observe, decide, commit) on the leader.", Buckets: roundBuckets},
		{Name: "solve_seconds", Daemon: "tier", Kind: KindHistogram, Help: "Duration of the tier policy's solve within a control round.", Buckets: solveBuckets},
		{Name: "plugin_healthy", Kind: KindGauge, Help: "1 when the tier's out-of-process policy plugin answers, else 0."},
		{Name: "plugin_failures_total", Daemon: "tier", Kind: KindTotal, Help: "Calls to the tier's policy plugin that failed, as counted by its client."},

		// Tier replicas: read from the replica's state at scrape time, so that
		// followers export theirs too.
		{Name: "leader", Kind: KindGauge, Help: "1 when this replica leads its tier instance's Raft group, else 0."},
		{Name: "shards_owned", Kind: KindGauge, Help: "Shards assigned to this tier instance's children in this replica's committed state."},
		{Name: "children", Kind: KindGauge, Help: "Children known to this replica's committed state, by state (active, draining, failed).", Labels: []string{"state"}},
		{Name: "sessions", Kind: KindGauge, Help: "Child sessions this replica holds open (only a leader holds any)."},
		{Name: "alerts", Kind: KindGauge, Help: "Alerts raised by the last control round, by code (mass_failure, no_capacity, solve_failed, straggler).", Labels: []string{"code"}},

		// Raft, per replica, from raft.Stats() at scrape time.
		{Name: "raft_state", Kind: KindGauge, Help: "1 for this replica's current Raft state (Leader, Follower, Candidate, Shutdown).", Labels: []string{"state"}},
		{Name: "raft_term", Kind: KindGauge, Help: "This replica's current Raft term."},
		{Name: "raft_commit_index", Kind: KindGauge, Help: "Index of the last Raft log entry this replica knows committed."},
		{Name: "raft_applied_index", Kind: KindGauge, Help: "Index of the last Raft log entry applied to this replica's FSM."},
		{Name: "raft_last_log_index", Kind: KindGauge, Help: "Index of the last entry in this replica's Raft log."},
		{Name: "raft_fsm_pending", Kind: KindGauge, Help: "Committed Raft entries waiting to be applied to the FSM."},
		{Name: "raft_peers", Kind: KindGauge, Help: "Voters in this replica's latest Raft configuration."},
		{Name: "raft_last_contact_seconds", Kind: KindGauge, Help: "Seconds since this follower last heard from its leader (0 on the leader)."},

		// Raft, from hashicorp/raft's own go-metrics (BridgeRaftMetrics: only
		// in a process that runs one Raft replica).
		{Name: "raft_commit_seconds", Kind: KindHistogram, OneDaemon: true, Help: "Time from a leader's append to its commit (raft.commitTime).", Buckets: commitBuckets},
		{Name: "raft_fsm_apply_seconds", Kind: KindHistogram, OneDaemon: true, Help: "Time to apply one committed entry to the FSM (raft.fsm.apply).", Buckets: commitBuckets},
		{Name: "raft_leader_last_contact_seconds", Kind: KindHistogram, OneDaemon: true, Help: "On the leader: time since each follower last answered (raft.leader.lastContact).", Buckets: commitBuckets},
		{Name: "raft_apply_total", Kind: KindCounter, OneDaemon: true, Help: "Commands submitted to Raft on this replica (raft.apply)."},
		{Name: "raft_transitions_total", Kind: KindCounter, OneDaemon: true, Help: "Raft state changes of this replica, by the state entered.", Labels: []string{"state"}},
		{Name: "raft_heartbeat_timeouts_total", Kind: KindCounter, OneDaemon: true, Help: "Times this follower's heartbeat timeout fired (it lost its leader)."},

		// Hosts: pushed on every report.
		{Name: "host_shards_running", Daemon: "host", Kind: KindGauge, Help: "Shards running on this host."},
		{Name: "host_cpu_cores", Daemon: "host", Kind: KindGauge, Help: "CPU used by this host's shards, in cores."},
		{Name: "host_mem_bytes", Daemon: "host", Kind: KindGauge, Help: "Memory used by this host's shards, in bytes."},
		{Name: "host_net_bytes_per_second", Daemon: "host", Kind: KindGauge, Help: "Network used by this host's shards, in bytes per second."},
		{Name: "host_tasks", Daemon: "host", Kind: KindGauge, Help: "Tasks run by this host's shards."},
		{Name: "host_extra_load", Daemon: "host", Kind: KindGauge, Help: "Load of this host's shards in a named extra resource.", Labels: []string{"resource"}},
		{Name: "host_capacity", Daemon: "host", Kind: KindGauge, Help: "This host's capacity per resource (cpu in cores, mem in bytes, net in bytes/s, tasks).", Labels: []string{"resource"}},
		{Name: "host_input_records_per_second", Daemon: "host", Kind: KindGauge, Help: "Records arriving for this host's shards per second."},
		{Name: "host_processed_records_per_second", Daemon: "host", Kind: KindGauge, Help: "Records this host's shards processed per second."},
		{Name: "host_lag_growth_records_per_second", Daemon: "host", Kind: KindGauge, Help: "How fast this host's shards fall behind: the sum over shards of input minus processed records per second, where positive."},
		{Name: "host_latency_p99_seconds", Daemon: "host", Kind: KindGauge, Help: "The worst p99 processing latency among this host's shards."},
		{Name: "host_rate_records_per_second", Daemon: "host", Kind: KindGauge, Help: "The shards' processing rates summed, as their workers report them (sdk/stream: records per busy second, the true processing rate)."},
		{Name: "host_lag_records", Daemon: "host", Kind: KindGauge, Help: "Records waiting in the broker for this host's shards (sdk/stream workers report it)."},

		// Every daemon.
		{Name: "build_info", Kind: KindGauge, Help: "Always 1; the labels say which build of Strata this daemon runs.", Labels: []string{"version", "revision", "goversion"}},
	}
	m := make(map[string]Def, len(defs))
	for _, d := range defs {
		m[d.Name] = d
	}
	// The tier daemons push this one as plugin_failures (a running total).
	m["plugin_failures"] = m["plugin_failures_total"]
	return m
}()

// Catalogue returns every metric definition, by exported name (without the
// "strata_" prefix), for docs and tests.
func Catalogue() map[string]Def {
	out := make(map[string]Def, len(catalogue))
	for _, d := range catalogue {
		out[d.Name] = d
	}
	return out
}

// lookup returns the definition of a metric used under name, or one for an
// unlisted name, of kind k (a histogram's buckets: DefBuckets).
func lookup(name string, labels []string, k Kind) Def {
	if d, ok := catalogue[name]; ok {
		return d
	}
	d := Def{Name: name, Kind: k, Labels: labels, Help: Undocumented}
	if k == KindHistogram {
		d.Buckets = prometheus.DefBuckets
	}
	return d
}

// Undocumented is the HELP text of a metric missing from the catalogue.
const Undocumented = "undocumented: add this metric to coordinator/telemetry/catalogue.go"
