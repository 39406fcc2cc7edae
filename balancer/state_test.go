package balancer

import (
	"math"
	"testing"

	"pgregory.net/rapid"
)

// The incremental scorer agrees with the from-scratch reference: for random
// problems, goals and sequences of moves and swaps, the predicted change of every
// goal equals the change Evaluate measures.
func TestPropIncrementalMatchesEvaluate(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := genProblem(t, genSpec{maxShards: 10, maxChildren: 4, constraints: true})
		if p.NumShards() == 0 {
			return
		}
		o := Options{Goals: genGoals(t), Latency: genLatency(t, p)}
		goals, err := o.goals(p)
		if err != nil {
			t.Fatal(err)
		}
		st := newState(p, goals, o.Latency, p.Current)
		bufA, bufB := make([]float64, st.R), make([]float64, st.R)
		steps := rapid.IntRange(1, 8).Draw(t, "steps")
		for i := 0; i < steps; i++ {
			before := evaluate(p, goals, o.Latency, st.assign)
			var ch change
			x := rapid.IntRange(0, st.N-1).Draw(t, "x")
			swap := rapid.Bool().Draw(t, "swap")
			y := rapid.IntRange(0, st.N-1).Draw(t, "y")
			if swap && st.assign[x] >= 0 && st.assign[y] >= 0 && st.assign[x] != st.assign[y] {
				pl := &placer{st: st, bufC: bufA, bufD: bufB}
				a, b := st.assign[x], st.assign[y]
				R := st.R
				for r := 0; r < R; r++ {
					d := p.Load[x*R+r] - p.Load[y*R+r]
					pl.bufC[r] = st.load[int(a)*R+r] - d
					pl.bufD[r] = st.load[int(b)*R+r] + d
				}
				ch = change{n: 2, shard: [2]int{x, y}, to: [2]int32{b, a}, a: int(a), b: int(b), na: pl.bufC, nb: pl.bufD}
				st.delta(&ch)
				pred := append([]float64(nil), st.gd...)
				st.apply(x, b)
				st.apply(y, a)
				checkPrediction(t, goals, before, evaluate(p, goals, o.Latency, st.assign), pred)
				continue
			}
			dst := int32(rapid.IntRange(-1, st.M-1).Draw(t, "dst"))
			if dst == st.assign[x] {
				continue
			}
			st.moveChange(&ch, x, dst, bufA, bufB)
			lv := st.delta(&ch)
			pred := append([]float64(nil), st.gd...)
			// The bounded variant agrees on acceptance against "no change".
			var zero levels
			_, ok := st.deltaBelow(&ch, &zero)
			if ok != better(&lv, st.nLevels) {
				t.Fatalf("deltaBelow says %v, full delta %v", ok, lv[:st.nLevels])
			}
			st.apply(x, dst)
			checkPrediction(t, goals, before, evaluate(p, goals, o.Latency, st.assign), pred)
		}
		// Loads and counters match a rebuild.
		fresh := newState(p, goals, o.Latency, st.assign)
		for i := range st.load {
			if math.Abs(st.load[i]-fresh.load[i]) > 1e-9 {
				t.Fatalf("load drifted: %v vs %v", st.load, fresh.load)
			}
		}
		if st.moves != fresh.moves || st.bytes != fresh.bytes {
			t.Fatalf("budget counters %d/%d, rebuilt %d/%d", st.moves, st.bytes, fresh.moves, fresh.bytes)
		}
		for k, v := range fresh.groupCnt {
			if st.groupCnt[k] != v {
				t.Fatalf("group count %d: %d, rebuilt %d", k, st.groupCnt[k], v)
			}
		}
	})
}

func checkPrediction(t *rapid.T, goals []Goal, before, after Objective, pred []float64) {
	for gi := range goals {
		got := after.Goals[gi].Value - before.Goals[gi].Value
		if math.Abs(got-pred[gi]) > 1e-7*math.Max(1, math.Abs(after.Goals[gi].Value)) {
			t.Fatalf("goal %s: predicted change %g, measured %g (before %g after %g)", goals[gi].Kind, pred[gi], got, before.Goals[gi].Value, after.Goals[gi].Value)
		}
	}
}

func TestIdxHeap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 30).Draw(t, "n")
		keys := make([]float64, n)
		for i := range keys {
			keys[i] = float64(rapid.IntRange(0, 10).Draw(t, "key"))
		}
		h := newIdxHeap(keys)
		for i := 0; i < 20; i++ {
			x := rapid.IntRange(0, n-1).Draw(t, "x")
			h.set(x, float64(rapid.IntRange(0, 10).Draw(t, "k")))
			a := rapid.IntRange(-1, n-1).Draw(t, "a")
			b := rapid.IntRange(-1, n-1).Draw(t, "b")
			want, found := -1.0, false
			for j, k := range h.key {
				if j != a && j != b && (!found || k > want) {
					want, found = k, true
				}
			}
			if !found {
				want = -1
			}
			if got := h.maxExcluding(a, b, -1); got != want {
				t.Fatalf("maxExcluding(%d,%d) = %g, want %g (keys %v)", a, b, got, want, h.key)
			}
			// bestFirst visits in non-increasing key order and visits all.
			var seen []int
			prev := math.Inf(1)
			h.bestFirst(&[]int32{}, func(x int) bool {
				if h.key[x] > prev {
					t.Fatalf("bestFirst out of order: %g after %g", h.key[x], prev)
				}
				prev = h.key[x]
				seen = append(seen, x)
				return true
			})
			if len(seen) != n {
				t.Fatalf("bestFirst visited %d of %d", len(seen), n)
			}
			if top := h.top(); h.key[top] != maxOf(h.key) {
				t.Fatalf("top %g, max %g", h.key[top], maxOf(h.key))
			}
		}
	})
}

func maxOf(xs []float64) float64 {
	m := math.Inf(-1)
	for _, x := range xs {
		m = math.Max(m, x)
	}
	return m
}
