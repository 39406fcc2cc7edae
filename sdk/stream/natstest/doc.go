// Package natstest starts a real nats-server with JetStream for tests and
// benchmarks: Debian's nats-server package (.ci/packages; `sudo make deps`
// installs it). A missing binary is an error naming that command, so a test
// fails instead of skipping.
package natstest
