// Package telemetry gives every daemon its metrics scope (github.com/uber-go/tally/v4
// with the Prometheus reporter) and its small HTTP server: /healthz (the process is
// alive), /readyz (the daemon can do its job: it has a leader, a session, …) and
// /metrics (Prometheus text format).
//
// Metric names follow Prometheus conventions: the "strata_" prefix, snake_case, units
// in the name (_seconds, _bytes, _total for counters).
package telemetry
