package balancer

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/strata-sched/strata/interfaces"
)

// The running per-child sums drift by a rounding error at every move in and
// out; a shard is never reported as breaking capacity (stillForced, hence
// explained) where CheckHard finds no violation.
func TestRunningSumsDoNotDriftIntoViolations(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	const M, N = 3, 30
	p := &Problem{Resources: []interfaces.Resource{"gpu"}}
	for c := 0; c < M; c++ {
		p.ChildIDs = append(p.ChildIDs, interfaces.ChildID(fmt.Sprintf("c%d", c)))
		p.Capacity = append(p.Capacity, 1.0)
	}
	fracs := []float64{0.1, 0.2, 0.3, 0.7, 0.05, 0.15}
	for s := 0; s < N; s++ {
		p.ShardIDs = append(p.ShardIDs, interfaces.ShardID(fmt.Sprintf("s%02d", s)))
		p.Load = append(p.Load, fracs[rng.IntN(len(fracs))])
		p.Current = append(p.Current, -1)
	}
	goals, err := prepare(p, &Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := newState(p, goals, LatencyModel{}, p.Current)
	pl := newPlacer(st)
	drifted := 0
	for i := 0; i < 20000; i++ {
		s := rng.IntN(N)
		pl.move(s, int32(rng.IntN(M+1)-1))
		// Keep every child within its exact capacity: undo a move that
		// breaks it.
		if v := CheckHard(p, st.assign); hasCapacity(v) {
			pl.move(s, -1)
			continue
		}
		for c := 0; c < M; c++ {
			sum := 0.0
			for _, x := range pl.members[c] {
				sum += p.Load[x]
			}
			if st.load[c] > st.limit[c] && sum <= st.limit[c] {
				drifted++
			}
		}
		for x := 0; x < N; x++ {
			if st.assign[x] >= 0 && pl.stillForced(x) {
				t.Fatalf("step %d: shard %d reported over capacity on %d (running sum %.17g), CheckHard finds nothing", i, x, st.assign[x], st.load[st.assign[x]])
			}
		}
	}
	if drifted == 0 {
		t.Fatal("the running sums never drifted above a limit the exact sums kept: the test checks nothing")
	}
}

func hasCapacity(vs []Violation) bool {
	for _, v := range vs {
		if v.Constraint == ConstraintCapacity {
			return true
		}
	}
	return false
}
