package sim

// liveState is a live cluster's hosts, shards and assignment, for a plan
// scenario that starts from the cluster's current state.
type liveState struct{}

// buildShards adds the live cluster's shards to w in place of generated jobs.
func (l *liveState) buildShards(w *world) {}

// place starts the run from the live cluster's assignment.
func (l *liveState) place(e *engine) {}
