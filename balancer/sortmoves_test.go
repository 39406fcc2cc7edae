package balancer

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"

	"github.com/strata-sched/strata/interfaces"
)

// TestSortMovesByShardIsStableSort: the index sort gives what sort.SliceStable
// gives, duplicate shard IDs included.
func TestSortMovesByShardIsStableSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 1; n < 200; n += 7 {
		moves := make([]interfaces.Move, n)
		for i := range moves {
			moves[i] = interfaces.Move{Shard: interfaces.ShardID(fmt.Sprintf("s%d", rng.IntN(n/2+1))), To: interfaces.ChildID(fmt.Sprint(i))}
		}
		want := append([]interfaces.Move(nil), moves...)
		sort.SliceStable(want, func(i, j int) bool { return want[i].Shard < want[j].Shard })
		sortMovesByShard(moves)
		if !reflect.DeepEqual(moves, want) {
			t.Fatalf("n=%d: got %v, want %v", n, moves, want)
		}
	}
}
