// Package plugin runs a tier policy that lives in another process, behind the
// gRPC TierPolicy service (interfaces/wire/plugin.proto), so a policy can be
// written in any language.
//
// Policy is an interfaces.Policy that calls the plugin with a time-out and falls
// back to a built-in policy whenever the plugin is unreachable, slow, crashed or
// answers with an error. After a failure the plugin is marked unhealthy and is
// not called again until a back-off has passed; the first call after it that
// succeeds marks it healthy again. With a logger (SetLogger; a tier daemon
// passes its own) these transitions are logged, not each call. The plugin's plans are not trusted: the tier
// verifies them exactly like a built-in policy's (balancer.VerifyRules at commit
// time, with the tier-level rules the view carried), and a move that names
// unknown shards or children, or breaks a hard constraint, is rejected with the
// reason.
//
// It registers the policy name "plugin" in the tiers registry, with the keys
// address (required), fallback (a built-in policy name, default "local"),
// timeout (default 1s) and retry (default 5s); every other key is passed to the
// plugin as its configuration. A call gets at most timeout, and at most half of
// what is left of its caller's deadline (a tier's solve_timeout): a plugin that
// hangs leaves the fallback the other half.
package plugin
