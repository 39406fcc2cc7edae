// Package promtest runs a real Prometheus server (Debian's prometheus package,
// installed by `make deps`) for tests: it scrapes the given targets and
// answers instant queries through its HTTP API.
package promtest
