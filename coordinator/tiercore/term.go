package tiercore

import (
	"fmt"

	"github.com/strata-sched/strata/interfaces"
)

// AdmitHello decides whether a child's Hello that states group term term may
// open a session, given last, the newest term accepted from that child so far
// (0: none). It returns the term to remember from now on.
//
// A term of 0 (a host, or a child tier of an older version) is not checked and
// changes nothing. An older term than last is refused with an error that wraps
// interfaces.ErrStaleEpoch: the replica sending it was deposed after a newer
// leader of its group had spoken to us. The same term is the same leader
// (Raft elects at most one per term) reconnecting.
func AdmitHello(child interfaces.ChildID, last, term uint64) (uint64, error) {
	if term == 0 {
		return last, nil
	}
	if term < last {
		return last, fmt.Errorf("hello.group_term: must be at least %d, the term of the last accepted Hello from %s (got %d): this replica no longer leads its group: %w", last, child, term, interfaces.ErrStaleEpoch)
	}
	return term, nil
}
