// Package tlsutil is Strata's one copy of mutual TLS: the identities a
// certificate names (a URI SAN such as strata://host/h-7 or
// strata://region/eu-1/n1), loading a CA, certificate and key from files and
// reloading them when they change on disk (rotation without downtime), the gRPC
// transport credentials and the Raft connection wrapper built from them, the
// identity checks the daemons apply (a child is who its Hello claims, a parent
// is the instance a child is configured for, a Raft peer is of the same group),
// and issuing a CA and certificates ("strata tls").
//
// Every certificate is checked against the configured CA on every handshake;
// the identity checks run in the handshake too, so a refused peer never gets
// past it. docs/security.md describes the threat model and the setup.
package tlsutil
