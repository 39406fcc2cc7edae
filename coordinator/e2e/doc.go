// Package e2e holds the end-to-end tests that run Strata as real processes on
// 127.0.0.1: the strata binary is built once, every tier replica and every host
// is its own process with its own YAML config, and faults are real (kill -9).
//
// The harness (cluster.go) is shipped as code so other tests can reuse it:
// coordinator/chaos runs the same clusters with each process in its own
// network namespace (Spec.Net).
package e2e
