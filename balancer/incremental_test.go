package balancer

import (
	"math"
	"math/rand/v2"
	"testing"
)

// incQuality is the worse of cpu and mem max utilization over LB for the
// loads in p under the owners in x.
func incQuality(p *Problem, x *Incremental) float64 {
	lb := lowerBound(p)
	mu := x.MaxUtil()
	q := 0.0
	for k := range lb {
		q = math.Max(q, mu[k]/lb[k])
	}
	return q
}

func newIncFrom(t *testing.T, p *Problem) *Incremental {
	t.Helper()
	R := p.NumResources()
	x := NewIncremental(R)
	x.LargestFirst = true
	x.Tolerance = 0.01
	for c := 0; c < p.NumChildren(); c++ {
		if _, err := x.AddChild(p.Capacity[c*R : (c+1)*R]); err != nil {
			t.Fatal(err)
		}
	}
	for s := 0; s < p.NumShards(); s++ {
		if _, err := x.AddShard(p.Load[s*R:(s+1)*R], -1); err != nil {
			t.Fatal(err)
		}
	}
	return x
}

// TestIncrementalAgreesWithFullSolve is the property: over generated
// instances, an incremental placement — a place round, then a load change of
// 5% of the shards and one more round — is within 0.05 of max/LB of the
// local solver's full solve of the same state (it tends to be worse by the
// tolerance: it stops at mean × 1.01), every shard is placed, no child is
// over capacity, and the sums it keeps equal the sums recomputed.
func TestIncrementalAgreesWithFullSolve(t *testing.T) {
	const tol = 0.05
	for seed := uint64(1); seed <= 6; seed++ {
		p, err := Generate(InstanceSpec{Shards: 2000 + 500*int(seed), Hosts: 20 + 5*int(seed), Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		for s := range p.Current {
			p.Current[s] = -1
		}
		R := p.NumResources()
		x := newIncFrom(t, p)
		moves, unplaced := x.Round(nil)
		if len(unplaced) > 0 || len(moves) < p.NumShards() {
			t.Fatalf("seed %d: %d moves, %d unplaced", seed, len(moves), len(unplaced))
		}
		// The load change.
		rng := rand.New(rand.NewPCG(seed, 7))
		for s := 0; s < p.NumShards(); s++ {
			if rng.Float64() < 0.05 {
				for k := 0; k < R; k++ {
					p.Load[s*R+k] *= 0.5 + 1.5*rng.Float64()
				}
				if err := x.SetLoad(int32(s), p.Load[s*R:(s+1)*R]); err != nil {
					t.Fatal(err)
				}
			}
		}
		x.Round(nil)
		got := incQuality(p, x)
		for s := range p.Current {
			p.Current[s] = x.Owner(int32(s))
		}
		res, err := Solve("local", p, Options{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		full := 0.0
		lb := lowerBound(p)
		loads := childLoads(p, res.Assignment)
		for k := range lb {
			for c := 0; c < p.NumChildren(); c++ {
				full = math.Max(full, util(loads[c*R+k], p.Capacity[c*R+k])/lb[k])
			}
		}
		if got > full+tol {
			t.Errorf("seed %d: incremental max/LB %.4f, full solve %.4f: more than %.2f apart", seed, got, full, tol)
		}
		for c := 0; c < p.NumChildren(); c++ {
			kept := append([]float64(nil), x.ChildLoad(int32(c))...)
			for k := 0; k < R; k++ {
				if kept[k] > p.Capacity[c*R+k]*(1+1e-9) {
					t.Errorf("seed %d: child %d over capacity in resource %d", seed, c, k)
				}
			}
			x.Resync()
			for k := 0; k < R; k++ {
				if math.Abs(kept[k]-x.ChildLoad(int32(c))[k]) > 1e-6*math.Max(1, kept[k]) {
					t.Errorf("seed %d: child %d resource %d: kept sum %g, recomputed %g", seed, c, k, kept[k], x.ChildLoad(int32(c))[k])
				}
			}
		}
		t.Logf("seed %d: incremental %.4f, full %.4f", seed, got, full)
	}
}

// TestIncrementalSteadyRoundIsQuiet: every rebalance move lowers the sum of
// the children's keys, so with nothing changed the rounds settle within a
// few, after which a round moves nothing; with one shard's load changed a
// little, a round moves at most a few.
func TestIncrementalSteadyRoundIsQuiet(t *testing.T) {
	p, err := Generate(InstanceSpec{Shards: 3000, Hosts: 30, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	x := newIncFrom(t, p)
	settled := false
	for i := 0; i < 10 && !settled; i++ {
		m, _ := x.Round(nil)
		settled = i > 0 && len(m) == 0
	}
	if !settled {
		t.Fatal("rounds with no change still move shards after 10 rounds")
	}
	R := p.NumResources()
	l := append([]float64(nil), x.Load(7)...)
	for k := range l {
		l[k] *= 1.01
	}
	if err := x.SetLoad(7, l); err != nil {
		t.Fatal(err)
	}
	if m, _ := x.Round(nil); len(m) > 3 {
		t.Errorf("one small load change moved %d shards", len(m))
	}
	_ = R
}

// TestIncrementalEvacuatesAndRejectsBadInput: draining and failing children
// empty them in the next round onto the others; bad input names the field.
func TestIncrementalEvacuatesAndRejectsBadInput(t *testing.T) {
	p, err := Generate(InstanceSpec{Shards: 600, Hosts: 12, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	x := newIncFrom(t, p)
	x.Round(nil)
	if err := x.SetState(0, IncDraining); err != nil {
		t.Fatal(err)
	}
	if err := x.SetState(1, IncFailed); err != nil {
		t.Fatal(err)
	}
	moves, unplaced := x.Round(nil)
	if len(unplaced) > 0 {
		t.Fatalf("%d unplaced", len(unplaced))
	}
	ev := 0
	for _, m := range moves {
		if m.Kind == IncEvacuate {
			ev++
			if m.To == 0 || m.To == 1 {
				t.Errorf("evacuated onto a child that takes none: %+v", m)
			}
		}
	}
	if len(x.members[0]) != 0 || len(x.members[1]) != 0 || ev == 0 {
		t.Errorf("after the round: %d and %d shards left on the drained and failed children (%d evacuations)", len(x.members[0]), len(x.members[1]), ev)
	}
	if err := x.SetState(0, IncRemoved); err != nil {
		t.Errorf("removing an empty child: %v", err)
	}
	for name, err := range map[string]error{
		"load: must have 2":     func() error { _, err := x.AddShard([]float64{1}, -1); return err }(),
		"load[1]: must be":      x.SetLoad(3, []float64{1, math.NaN()}),
		"shard 99999: no such":  x.RemoveShard(99999),
		"child 0: no such":      x.Assign(3, 0),
		"capacity: must have 2": func() error { _, err := x.AddChild(nil); return err }(),
	} {
		if err == nil || !contains(err.Error(), name) {
			t.Errorf("want an error containing %q, got %v", name, err)
		}
	}
}
