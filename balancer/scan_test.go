package balancer

import (
	"fmt"
	"slices"
	"testing"

	"github.com/strata-sched/strata/interfaces"
	"pgregory.net/rapid"
)

// The move scorer answers exactly as feasibleMove and deltaBelow do (and, below
// the unbounded bound, as delta does), and
// the cold order lists the children exactly as the cold heap visits them, on
// random problems with every kind of constraint and goal (goals restricted to a
// resource, non-integer weights, a kind twice), as shards move. Up
// to 24 children, so the heap is deeper than the seven positions
// topTwoExcept reads; loads scaled by non-round factors, so rounding shows
// (run it with GOAMD64=v3 too: fused multiply-adds must not make the two
// paths differ). bestDestination gives the same child with and without the
// kept order.
func TestPropMoveScorerAndColdOrderMatchTheHeap(t *testing.T) {
	fastSeen := false
	defer func() {
		if !t.Failed() && !fastSeen {
			t.Error("no generated problem had the default goals' shape (state.fast): the written-out levels went unchecked")
		}
	}()
	rapid.Check(t, func(t *rapid.T) {
		p := genProblem(t, genSpec{maxShards: 14, maxChildren: 24, constraints: true})
		for i := range p.Load {
			p.Load[i] *= 1 + float64(rapid.IntRange(0, 1000).Draw(t, "scale"))/997
		}
		o := Options{Goals: genGoals(t), Latency: genLatency(t, p)}
		// Beyond genGoals: goals restricted to one resource, non-integer
		// weights, and a kind twice (possibly on one level).
		for i := range o.Goals {
			g := &o.Goals[i]
			g.Weight *= 1 + float64(rapid.IntRange(0, 6).Draw(t, "weight scale"))/7
			if rapid.IntRange(0, 2).Draw(t, "restrict") == 0 {
				g.Resources = []interfaces.Resource{p.Resources[rapid.IntRange(0, len(p.Resources)-1).Draw(t, "resource")]}
			}
		}
		if len(o.Goals) > 0 && rapid.Bool().Draw(t, "a kind twice") {
			g := o.Goals[rapid.IntRange(0, len(o.Goals)-1).Draw(t, "twice")]
			g.Weight = 0.5 + float64(rapid.IntRange(0, 5).Draw(t, "second weight"))/3
			g.Priority = rapid.IntRange(0, 3).Draw(t, "second prio")
			g.Resources = nil
			o.Goals = append(o.Goals, g)
		}
		goals, err := prepare(p, &o)
		if err != nil {
			t.Fatalf("generated problem: %v", err)
		}
		st := newState(p, goals, LatencyModel{}, p.Current)
		pl := newPlacer(st)
		pl.keepOrder(st.M)
		m := newMoveScorer(st)
		var ch change
		for round := 0; round < 4; round++ {
			var heapOrder []int32
			pl.cold.bestFirst(&pl.front, func(c int) bool { heapOrder = append(heapOrder, int32(c)); return true })
			if !slices.Equal(heapOrder, pl.order.ord) {
				t.Fatalf("round %d: cold order %v, heap visits %v (keys %v)", round, pl.order.ord, heapOrder, pl.cold.key)
			}
			for s := 0; s < st.N; s++ {
				m.reset(s)
				full := make([]*levels, st.M)
				for c := 0; c < st.M; c++ {
					f1 := pl.feasibleMove(&ch, s, c)
					if f2 := m.feasible(c); f1 != f2 {
						t.Fatalf("shard %d → child %d: feasibleMove %v, scorer %v", s, c, f1, f2)
					}
					if !f1 {
						continue
					}
					// Below the unbounded bound, both paths give the full delta.
					d1 := st.delta(&ch)
					if g, ok := st.deltaBelow(&ch, &unbounded); !ok || g != d1 {
						t.Fatalf("shard %d (on %d) → child %d: delta %v, deltaBelow(unbounded) %v %v", s, st.assign[s], c, d1[:st.nLevels], ok, g[:st.nLevels])
					}
					var d2 levels
					if ok := m.below(c, &unbounded, &d2); !ok || d1 != d2 {
						t.Fatalf("shard %d (on %d) → child %d: delta %v, scorer %v %v", s, st.assign[s], c, d1[:st.nLevels], ok, d2[:st.nLevels])
					}
					full[c] = &d1
				}
				for c := 0; c < st.M; c++ {
					for _, bound := range full {
						if full[c] == nil || bound == nil {
							continue
						}
						pl.feasibleMove(&ch, s, c)
						want, ok1 := st.deltaBelow(&ch, bound)
						m.feasible(c)
						var got levels
						if ok2 := m.below(c, bound, &got); ok1 != ok2 || ok1 && want != got {
							t.Fatalf("shard %d → child %d below %v: deltaBelow %v %v, scorer %v %v", s, c, bound[:st.nLevels], ok1, want[:st.nLevels], ok2, got[:st.nLevels])
						}
						if st.fast {
							// The written-out levels (fastLevelDelta,
							// belowFast) against the generic paths.
							st.fast, m.fast = false, false
							gen, ok3 := st.deltaBelow(&ch, bound)
							var sc levels
							ok4 := m.below(c, bound, &sc)
							st.fast, m.fast = true, true
							if ok3 != ok1 || ok1 && gen != want || ok4 != ok1 || ok1 && sc != want {
								t.Fatalf("shard %d → child %d below %v: fast %v %v, generic deltaBelow %v %v, generic scorer %v %v", s, c, bound[:st.nLevels], ok1, want[:st.nLevels], ok3, gen[:st.nLevels], ok4, sc[:st.nLevels])
							}
							fastSeen = true
						}
					}
				}
			}
			// bestDestination's plain loop over the kept order (used with at
			// least scorerMin candidates) picks what the heap walk through
			// shardMoves picks, for few and many candidates.
			for s := 0; s < st.N; s++ {
				for _, k := range []int{1, scorerMin - 1, scorerMin, scorerMin + 1, st.M} {
					kept := pl.bestDestination(s, k)
					order := pl.order
					pl.order = nil
					walked := pl.bestDestination(s, k)
					pl.order = order
					if kept != walked {
						t.Fatalf("shard %d, %d candidates: bestDestination %d with the kept order, %d walking the heap", s, k, kept, walked)
					}
				}
			}
			// Move a few shards anywhere (capacity ignored) to change the loads.
			for i := 0; i < 3 && st.N > 0; i++ {
				s := rapid.IntRange(0, st.N-1).Draw(t, "move shard")
				pl.move(s, int32(rapid.IntRange(-1, st.M-1).Draw(t, "to")))
			}
		}
	})
}

// BenchmarkDestinationScan: bestDestination scoring every child (a full
// scan) for unplaced shards, half of 20,000 shards placed, the cold heap
// walked one pop at a time (heap) or the kept cold order (order). ns/op / M is
// the time per candidate.
func BenchmarkDestinationScan(b *testing.B) {
	for _, M := range []int{100, 1000} {
		for _, kept := range []bool{false, true} {
			name := map[bool]string{false: "heap", true: "order"}[kept]
			b.Run(fmt.Sprintf("%s/M=%d", name, M), func(b *testing.B) {
				p, err := Generate(InstanceSpec{Shards: 20000, Hosts: M, Seed: 1})
				if err != nil {
					b.Fatal(err)
				}
				for s := 0; s < len(p.Current); s += 2 {
					p.Current[s] = -1
				}
				pl := newPlacer(newState(p, DefaultGoals(), LatencyModel{}, p.Current))
				if kept {
					pl.keepOrder(M)
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					pl.bestDestination(i%10000*2, M)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*M), "ns/candidate")
			})
		}
	}
}
