// Package dashboard is Strata's web UI: one page (assets/, compiled into the
// binary with embed; no CDN) and a JSON gateway of the Admin API behind it,
// read through coordinator/adminview like the CLI. It shows the hierarchy
// with leaders, health and leases; a host × time utilization heat map per
// resource; the live feed of moves (with their reasons), failures, leader
// changes and alerts; shard search with explain; plan preview and apply; the
// alerts of every tier instance.
//
// Every tier daemon mounts it at /ui/ on its HTTP port (listen.http), reading
// its own Admin API; strata dev serves the global tier's. The page sends the
// ACL token typed into it (if any) as the Authorization of each call; the API
// answers only when the Admin API accepts that token (Server.authorize; the
// writes are checked again by the calls they make). The recorder that builds
// the feed and the heat map uses the last token a page sent.
package dashboard
