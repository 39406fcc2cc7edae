// Package telemetry gives every daemon its own Prometheus registry and its
// small HTTP server: /healthz (the process is alive), /readyz (the daemon can
// do its job: it has a leader, a session, …) and /metrics (Prometheus text
// format), plus the standard gRPC health and reflection services.
//
// # One registry per daemon
//
// NewMetrics makes a registry for one daemon, with the daemon's constant
// labels (tier, tier_instance, node; or tier and host) on every series, so the
// eleven daemons of strata dev serve eleven different /metrics. Every metric is
// defined once in the catalogue (catalogue.go: name, kind, HELP text, labels,
// buckets); docs/operations.md lists them and a test keeps the two in step.
// Scope hands them out by name with the method names the daemons used with
// tally (Counter(name).Inc, Gauge(name).Update, Timer(name).Record), so call
// sites did not change. A replica's own state (leader, shards owned, children,
// sessions, alerts, Raft state) is read at scrape time (Metrics.Func,
// RaftStats), so followers export theirs. hashicorp/raft's own metrics arrive
// through the process-wide go-metrics sink and are bridged to the registry of
// the one daemon of a process that runs only one (OneDaemonProcess).
//
// # Why client_golang and not tally
//
// The design card named github.com/uber-go/tally/v4 with its Prometheus
// reporter. It was replaced by github.com/prometheus/client_golang used
// directly, because tally could not do cleanly what the metrics need: it has
// no HELP text (the reporter writes the metric's name), its reporter
// registers with one registry per reporter but its scopes are flushed on a
// timer (values lag up to a second, and a scrape-time gauge read from a
// follower's state has no place in it), its Prometheus timers default to
// summaries (which cannot be aggregated across replicas) with one bucket
// layout per reporter rather than per metric, and it cannot export a running
// total as a counter. With client_golang each of these is one field of a
// catalogue entry, and the registry is the one Prometheus' own tooling
// (promtool, testutil) checks.
//
// Metric names follow Prometheus conventions: the "strata_" prefix, snake_case,
// base units in the name (_seconds, _bytes), _total for counters; no label is
// named instance or job (Prometheus' own target labels).
package telemetry
