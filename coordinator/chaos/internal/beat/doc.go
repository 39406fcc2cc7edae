// Command beat is the chaos suite's worker: the exec driver starts one per
// shard, and it appends "<unix nanos> <shard> <epoch> <pid>" to
// <dir>/<host>.beats every 100 ms until it is killed, so the checker sees when
// each shard's process really ran, whatever its host agent believed.
package main
