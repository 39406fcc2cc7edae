// Package logx holds small helpers for the daemons' logs. Dedup rate-limits
// repeated lines: hashicorp/raft logs an ERROR every heartbeat backoff (about
// every 250 ms at first) for as long as a peer is down, which buried
// everything else in a replica's log.
package logx
