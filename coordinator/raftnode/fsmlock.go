package raftnode

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
	"github.com/strata-sched/strata/coordinator/fsm"
)

// lockedFSM serialises Apply, Snapshot and Restore against readers. Reads take the
// read lock, so a reader sees the state between two applied entries, never inside
// one. Snapshot only takes the FSM's immutable view under the lock; Persist runs
// outside it, concurrently with later Applies, as raft intends.
type lockedFSM struct {
	mu      sync.RWMutex
	inner   raft.FSM
	batcher raft.BatchingFSM // inner, when it batches; nil otherwise
	running atomic.Bool      // set once raft has started (its startup restores are done)
}

var _ raft.BatchingFSM = (*lockedFSM)(nil)

func newLockedFSM(f raft.FSM) *lockedFSM {
	l := &lockedFSM{inner: f}
	if b, ok := f.(raft.BatchingFSM); ok {
		l.batcher = b
	}
	return l
}

func (l *lockedFSM) Apply(log *raft.Log) any {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inner.Apply(log)
}

// ApplyBatch applies a run of committed entries under one lock.
func (l *lockedFSM) ApplyBatch(logs []*raft.Log) []any {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.batcher != nil {
		return l.batcher.ApplyBatch(logs)
	}
	out := make([]any, len(logs))
	for i, lg := range logs {
		// raft hands non-command entries (configuration changes) to a batching
		// FSM too; a plain FSM must only see commands.
		if lg.Type == raft.LogCommand {
			out[i] = l.inner.Apply(lg)
		}
	}
	return out
}

func (l *lockedFSM) Snapshot() (raft.FSMSnapshot, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inner.Snapshot()
}

// Restore restores the inner FSM. A restore that failed after emptying the FSM
// (fsm.ErrRestoreEmptied, with fsm.Options.LeanRestore) is fatal once raft runs:
// raft would go on with an FSM that no longer matches the index it believes
// applied (it answers a failed InstallSnapshot and carries on), so the replica
// would diverge or serve an empty state. Like an undecodable entry, that panics
// on raft's FSM goroutine; on restart raft restores from the replica's own
// snapshots (the newest that reads back) and log. At startup the error is
// returned: raft then tries the next older snapshot.
func (l *lockedFSM) Restore(r io.ReadCloser) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.inner.Restore(r)
	if err != nil && l.running.Load() && errors.Is(err, fsm.ErrRestoreEmptied) {
		panic(fmt.Sprintf("raftnode: %v; stopping this replica: restart it to restore from its own snapshots and log", err))
	}
	return err
}

// read runs fn on the inner FSM under the read lock.
func (l *lockedFSM) read(fn func(raft.FSM) error) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return fn(l.inner)
}
