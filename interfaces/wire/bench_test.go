package wire_test

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

// benchView builds a region-sized view: children hosts, shards shards (all
// placed), one report per child with its heaviest shards and a hint.
func benchView(children, shards int) *interfaces.View {
	v := &interfaces.View{Tier: "region", Instance: "eu-1", Now: time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC), Seed: 1,
		Reports: map[interfaces.ChildID]interfaces.Report{}}
	for c := 0; c < children; c++ {
		id := interfaces.ChildID(fmt.Sprintf("host-%d", c))
		v.Children = append(v.Children, interfaces.Child{ID: id, Tier: "host", Capacity: interfaces.Load{CPU: 32, Mem: 128e9, Net: 1e10, Tasks: 64}, Labels: map[string]string{"zone": "a"}})
		r := interfaces.Report{Child: id, Capacity: v.Children[c].Capacity, Used: interfaces.Load{CPU: 20, Mem: 60e9}, Headroom: interfaces.Load{CPU: 12, Mem: 68e9},
			LatencyP50: time.Millisecond, LatencyP99: 20 * time.Millisecond, Throughput: 1e5,
			Hints: []interfaces.Hint{{Kind: interfaces.HintHeadroom, Amount: interfaces.Load{CPU: 12}}}}
		for i := 0; i < 10; i++ {
			r.Shards = append(r.Shards, interfaces.ShardLoad{Shard: interfaces.ShardID(fmt.Sprintf("s-%d", c*10+i)), Load: interfaces.Load{CPU: 1}, Rate: 1000, InputRate: 1000, LatencyP99: 5 * time.Millisecond})
		}
		v.Reports[id] = r
	}
	for s := 0; s < shards; s++ {
		id := interfaces.ShardID(fmt.Sprintf("s-%d", s))
		v.Shards = append(v.Shards, interfaces.Shard{ID: id, Job: "job-1", Load: interfaces.Load{CPU: 0.5, Mem: 2e9, Net: 1e6, Tasks: 1}, InputRate: 1000, StateBytes: 1 << 28})
		v.Assignments = append(v.Assignments, interfaces.Assignment{Shard: id, Child: v.Children[s%children].ID, Epoch: 1})
	}
	return v
}

// BenchmarkViewRoundTrip measures what a plugin call adds on both ends, apart from
// the network: ViewToWire, Marshal, Unmarshal, ViewFromWire (with validation).
func BenchmarkViewRoundTrip(b *testing.B) {
	for _, size := range []struct{ children, shards int }{{10, 100}, {100, 1000}, {500, 10000}} {
		v := benchView(size.children, size.shards)
		b.Run(fmt.Sprintf("children=%d/shards=%d", size.children, size.shards), func(b *testing.B) {
			m, err := wire.ViewToWire(v)
			if err != nil {
				b.Fatal(err)
			}
			raw, err := proto.Marshal(m)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				m, err := wire.ViewToWire(v)
				if err != nil {
					b.Fatal(err)
				}
				raw, err := proto.Marshal(m)
				if err != nil {
					b.Fatal(err)
				}
				var back wire.View
				if err := proto.Unmarshal(raw, &back); err != nil {
					b.Fatal(err)
				}
				if _, err := wire.ViewFromWire(&back); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(raw)), "wire-bytes")
		})
	}
}
