// Package adminview is the operator's view of a running hierarchy, read
// through the Admin API: the tree of tier instances with their leaders,
// children, leases and utilization (Walk), and the stream of events derived
// from successive views (moves with their reasons, failures, leader changes,
// alerts: Watch). The CLI (strata status, shards, events) and the web
// dashboard both read the cluster through it, so they show the same thing.
package adminview
