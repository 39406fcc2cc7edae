// Command tierplugin is an example out-of-process tier policy: it serves the
// gRPC TierPolicy service (interfaces/wire/plugin.proto) with a policy built from
// the tiers registry, so a tier configured with policy "plugin" plans through it.
//
// With --misbehave it returns plans a tier must refuse — to show (and test) that
// a plugin's plans go through the same verification as built-in ones:
//
//	over-capacity  every shard moved onto the first child
//	stale-epoch    the policy's plan with every epoch off by one
package main
