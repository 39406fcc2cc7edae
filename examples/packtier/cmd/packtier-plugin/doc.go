// Command packtier-plugin serves the tutorial's "pack" policy as an
// out-of-process tier policy (the gRPC TierPolicy service). A tier uses it with
//
//	policy: {name: plugin, config: {address: "127.0.0.1:7610", fallback: local}}
package main
