// Package acl holds the vocabulary of the Admin API's authorization: the three
// policies (read < operate < admin), tokens as a tier stores them (an ID, a
// policy and the SHA-256 of the secret, never the secret), how secrets are made
// and read from an "authorization: Bearer …" header, and the table that says
// which policy each Admin RPC needs.
//
// It is pure: no gRPC, Raft or storage. coordinator/fsm stores tokens as
// replicated state; coordinator/tierd checks every Admin call against them in
// a gRPC interceptor; cmd/strata sends the caller's token. docs/security.md
// ("Authorization (ACL tokens)") is the operator's view.
package acl
