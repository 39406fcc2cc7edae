package balancer

import (
	"testing"

	"pgregory.net/rapid"
)

// bruteBest enumerates every assignment of a tiny problem and returns the best
// feasible objective (lexicographic), or false when none is feasible.
func bruteBest(p *Problem, o Options) (Objective, bool) {
	goals, _ := o.goals(p)
	N, M := p.NumShards(), p.NumChildren()
	assign := make([]int32, N)
	var best Objective
	found := false
	var rec func(i int)
	rec = func(i int) {
		if i == N {
			if len(CheckHard(p, assign)) > 0 {
				return
			}
			obj := evaluate(p, goals, o.Latency, assign)
			if !found || Compare(obj, best, 1e-12) < 0 {
				best, found = obj, true
			}
			return
		}
		for c := 0; c < M; c++ {
			assign[i] = int32(c)
			rec(i + 1)
		}
	}
	rec(0)
	return best, found
}

// On tiny instances with constraints and a feasible start, local search's
// min-max objective is within 2% of the brute-force optimum.
func TestPropLocalWithin2PercentOfBruteForce(t *testing.T) {
	compared := 0
	rapid.Check(t, func(t *rapid.T) {
		p := genProblem(t, genSpec{maxShards: 7, maxChildren: 3, constraints: true})
		// Make the start feasible: place unplaced shards where they are allowed
		// and skip instances whose start still breaks a constraint (local
		// repairs those greedily; that is not what this compares).
		for s := range p.Current {
			if p.Current[s] < 0 {
				for c := 0; c < p.NumChildren(); c++ {
					if p.AllowedOn(s, c) && !p.Drained(c) {
						p.Current[s] = int32(c)
						break
					}
				}
			}
		}
		if len(CheckHard(p, p.Current)) > 0 {
			return
		}
		compared++
		o := Options{Goals: []Goal{{Kind: GoalBalanceMinMax}}, Seed: 1}
		best, ok := bruteBest(p, o)
		if !ok {
			t.Fatalf("feasible start but brute force found nothing feasible")
		}
		res, err := Solve(SolverLocal, p, o)
		if err != nil {
			t.Fatal(err)
		}
		got, opt := res.Objective.Levels[0], best.Levels[0]
		if got > opt*1.02+1e-12 {
			t.Fatalf("local %g, optimum %g (ratio %.4f); assignment %v", got, opt, got/opt, res.Assignment)
		}
	})
	t.Logf("compared %d instances with a feasible start", compared)
	if compared == 0 {
		t.Fatal("no instance had a feasible start")
	}
}
