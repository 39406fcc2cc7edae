// Package examples holds the example configuration files of the Strata daemons
// (global-1..3.yaml, region-eu-1-1..3.yaml, rack-a-1.yaml — a replica of the
// custom tier "rack", run with "strata tier" —, host-synthetic.yaml,
// host-exec.yaml, host-callback.yaml) and a test that checks them, together
// with the configs of the compose cluster (deploy/compose/config) and the
// ConfigMaps and container arguments of the Kubernetes manifests (deploy/k8s),
// against the real binary.
//
// The test does not copy the configuration schema (a copy would drift). It builds
// cmd/strata once, rewrites only what cannot work on a test machine (listen
// addresses become 127.0.0.1:0, data_dir a temporary directory) and starts each
// daemon with its file: a config the binary rejects makes it exit at once with an
// error naming the key, a valid one keeps it running until SIGTERM. A control
// case adds an unknown key to every file and expects exactly that early exit.
//
// job.yaml (for 'strata job submit') is checked by cmd/strata's job tests.
package examples
