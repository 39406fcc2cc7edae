package ledger

import (
	"fmt"
	"testing"

	"github.com/strata-sched/strata/interfaces"
)

// BenchmarkCheck100k: a clean history of 100,000 events: 1,000 shards moving
// round-robin over 10 hosts, 50 moves each.
func BenchmarkCheck100k(b *testing.B) {
	var evs []Event
	seq := map[string]uint64{}
	var ts int64
	for round := 0; round < 50; round++ {
		for s := 0; s < 1000; s++ {
			h := fmt.Sprintf("h%d", (s+round)%10)
			ts += 10
			seq[h]++
			evs = append(evs, Event{Seq: seq[h], Host: h, Shard: interfaces.ShardID(fmt.Sprintf("s%d", s)), Epoch: interfaces.Epoch(round + 1), Event: EventStart, TS: ts})
			ts += 10
			seq[h]++
			evs = append(evs, Event{Seq: seq[h], Host: h, Shard: interfaces.ShardID(fmt.Sprintf("s%d", s)), Epoch: interfaces.Epoch(round + 1), Event: EventStop, TS: ts})
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := CheckEvents(append([]Event(nil), evs...))
		if !r.OK() || r.Events != 100000 {
			b.Fatal(r.Err())
		}
	}
}
