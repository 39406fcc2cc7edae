package balancer

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// The two O(N) ends of a solve at a million shards, as the global tier of
// `strata bench hierarchy` meets them: FromView on a view listing every shard
// in ID order (one job) with a random current placement, and Finish on a
// placement of every shard (renumbered, as the local solver places) and on a
// rebalance that moves one shard in a hundred.

func benchView(b *testing.B, shards, hosts int) *interfaces.View {
	b.Helper()
	p, err := Generate(InstanceSpec{Shards: shards, Hosts: hosts, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	R := p.NumResources()
	v := &interfaces.View{Tier: "global"}
	for c := range p.ChildIDs {
		v.Children = append(v.Children, interfaces.Child{ID: p.ChildIDs[c], Tier: interfaces.TierHost,
			Capacity: interfaces.Load{CPU: p.Capacity[c*R], Mem: p.Capacity[c*R+1]}})
	}
	width := len(strconv.Itoa(shards - 1))
	v.Shards = make([]interfaces.Shard, shards)
	v.Assignments = make([]interfaces.Assignment, shards)
	for s := range v.Shards {
		id := interfaces.ShardID(fmt.Sprintf("shard-%0*d", width, s))
		v.Shards[s] = interfaces.Shard{ID: id, Job: "bench", Load: interfaces.Load{CPU: p.Load[s*R], Mem: p.Load[s*R+1]}, StateBytes: p.StateBytes[s]}
		v.Assignments[s] = interfaces.Assignment{Shard: id, Child: p.ChildIDs[p.Current[s]], Epoch: 1}
	}
	return v
}

// BenchmarkFromView/global converts the whole view; /regions converts it cut
// into 100 views of the shards of random regions (in ID order, sharing the ID
// strings, as the region tier of the hierarchy benchmark does) and the
// hosts of each region, all 100 per op.
func BenchmarkFromView(b *testing.B) {
	v := benchView(b, 1000000, 10000)
	b.Run("global", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := FromView(v, ViewOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("regions", func(b *testing.B) {
		const regions = 100
		rng := rand.New(rand.NewPCG(1, 2))
		views := make([]interfaces.View, regions)
		for c, ch := range v.Children {
			views[c%regions].Children = append(views[c%regions].Children, ch)
		}
		for s, sh := range v.Shards {
			r := rng.IntN(regions)
			a := v.Assignments[s]
			a.Child = views[r].Children[rng.IntN(len(views[r].Children))].ID
			views[r].Shards = append(views[r].Shards, sh)
			views[r].Assignments = append(views[r].Assignments, a)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			for r := range views {
				if _, err := FromView(&views[r], ViewOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

func BenchmarkFinish(b *testing.B) {
	p, err := Generate(InstanceSpec{Shards: 1000000, Hosts: 10000, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	// IDs in index order, as views list them: the plan needs no sort.
	width := len(strconv.Itoa(p.NumShards() - 1))
	for s := range p.ShardIDs {
		p.ShardIDs[s] = interfaces.ShardID(fmt.Sprintf("shard-%0*d", width, s))
	}
	b.Run("place", func(b *testing.B) {
		q := *p
		q.Current = make([]int32, len(p.Current))
		for s := range q.Current {
			q.Current[s] = -1
		}
		o := Options{}
		goals, err := prepare(&q, &o)
		if err != nil {
			b.Fatal(err)
		}
		ord, w := placementOrder(&q, goals)
		if ord == nil {
			b.Fatal("not renumbered")
		}
		r := q.renumbered(ord, w)
		assign := make([]int32, len(ord))
		for i, s := range ord {
			assign[i] = p.Current[s]
		}
		benchFinish(b, r, assign)
	})
	b.Run("rebalance", func(b *testing.B) {
		assign := append([]int32(nil), p.Current...)
		for s := 0; s < len(assign); s += 100 {
			assign[s] = (assign[s] + 1) % int32(p.NumChildren())
		}
		benchFinish(b, p, assign)
	})
}

func benchFinish(b *testing.B, p *Problem, assign []int32) {
	b.ResetTimer()
	var res Result
	var err error
	for i := 0; i < b.N; i++ {
		if res, err = Finish(p, Options{}, SolverLocal, assign, time.Time{}, false, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(res.Moves)), "moves")
}
