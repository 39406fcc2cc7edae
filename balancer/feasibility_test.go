package balancer

import (
	"cmp"
	"fmt"
	"slices"
	"testing"

	"github.com/strata-sched/strata/interfaces"
	"pgregory.net/rapid"
)

// genTight draws a tight heterogeneous instance: children of up to three
// sizes (×1, ×2, ×4), integer loads of skewed sizes, one resource filled to
// 85–100% of the fleet, every shard unplaced (or, sometimes, on a random
// child), sometimes an anti-affinity group.
func genTight(t *rapid.T, maxM int) *Problem {
	R := rapid.IntRange(1, 3).Draw(t, "R")
	M := rapid.IntRange(2, maxM).Draw(t, "M")
	p := &Problem{}
	for r := 0; r < R; r++ {
		p.Resources = append(p.Resources, fmt.Sprintf("r%d", r))
	}
	total := make([]float64, R)
	for c := 0; c < M; c++ {
		p.ChildIDs = append(p.ChildIDs, interfaces.ChildID(fmt.Sprintf("c%d", c)))
		size := []float64{1, 2, 4}[rapid.IntRange(0, 2).Draw(t, "size")]
		for r := 0; r < R; r++ {
			v := 8 * size
			p.Capacity = append(p.Capacity, v)
			total[r] += v
		}
	}
	fill := rapid.Float64Range(0.85, 1.0).Draw(t, "fill")
	sum := 0.0
	for s := 0; sum < fill*total[0] && s < 40*M; s++ {
		big := rapid.IntRange(0, 9).Draw(t, "big") == 0
		hi := 4
		if big {
			hi = 20
		}
		l0 := float64(rapid.IntRange(1, hi).Draw(t, "l0"))
		if sum+l0 > fill*total[0] {
			break
		}
		sum += l0
		p.ShardIDs = append(p.ShardIDs, interfaces.ShardID(fmt.Sprintf("s%03d", s)))
		p.Load = append(p.Load, l0)
		for r := 1; r < R; r++ {
			p.Load = append(p.Load, float64(rapid.IntRange(0, 6).Draw(t, "lr")))
		}
		p.Current = append(p.Current, -1)
	}
	if len(p.ShardIDs) == 0 {
		p.ShardIDs = []interfaces.ShardID{"s000"}
		p.Load = make([]float64, R)
		p.Load[0] = 1
		p.Current = []int32{-1}
	}
	N := len(p.ShardIDs)
	if rapid.Bool().Draw(t, "started") {
		for s := range p.Current {
			p.Current[s] = int32(rapid.IntRange(-1, M-1).Draw(t, "current"))
		}
	}
	if rapid.IntRange(0, 3).Draw(t, "groups") == 0 {
		p.Groups = make([][]int32, N)
		p.GroupLimit = []int32{int32(rapid.IntRange(1, 3).Draw(t, "limit"))}
		for s := range p.Groups {
			if rapid.IntRange(0, 2).Draw(t, "member") == 0 {
				p.Groups[s] = []int32{0}
			}
		}
	}
	return p
}

// refFFD is first-fit decreasing written from its definition, independently
// of the solvers: shards by decreasing max_r load/Σcapacity (ties by index),
// each on the first child in index order where capacity and anti-affinity
// allow; it ignores the start. It returns the number of shards placed.
func refFFD(p *Problem) int {
	R, M, N := p.NumResources(), p.NumChildren(), p.NumShards()
	capSum := make([]float64, R)
	for c := 0; c < M; c++ {
		for r := 0; r < R; r++ {
			capSum[r] += p.Capacity[c*R+r]
		}
	}
	size := func(s int) float64 {
		v := 0.0
		for r := 0; r < R; r++ {
			v = max(v, p.Load[s*R+r]/capSum[r])
		}
		return v
	}
	order := make([]int, N)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(size(b), size(a)) })
	load := make([]float64, M*R)
	groups := map[[2]int]int32{}
	placed := 0
	for _, s := range order {
		for c := 0; c < M; c++ {
			ok := true
			for r := 0; r < R && ok; r++ {
				ok = load[c*R+r]+p.Load[s*R+r] <= p.Limit(c, r)
			}
			if ok && p.Groups != nil {
				for _, g := range p.Groups[s] {
					ok = ok && groups[[2]int{int(g), c}]+1 <= p.GroupLimit[g]
				}
			}
			if !ok {
				continue
			}
			for r := 0; r < R; r++ {
				load[c*R+r] += p.Load[s*R+r]
			}
			if p.Groups != nil {
				for _, g := range p.Groups[s] {
					groups[[2]int{int(g), c}]++
				}
			}
			placed++
			break
		}
	}
	return placed
}

// checkStatus checks a result's status and explanations against CheckHard:
// OK ⇔ no violation; otherwise every violation is a shard that is unplaced
// or explained, every explained shard breaks a constraint, Infeasible comes
// with a proof, and with maxPlaced (≥ 0: the most shards any feasible
// assignment places, by brute force) Infeasible only when not all fit.
func checkStatus(t interface {
	Fatalf(string, ...any)
}, name string, p *Problem, res Result, maxPlaced int) {
	viol := CheckHard(p, res.Assignment)
	bad := map[int]bool{}
	for _, v := range viol {
		switch {
		case v.Shard >= 0:
			bad[v.Shard] = true
		case v.Child >= 0: // capacity or anti-affinity: every shard there
			for s, c := range res.Assignment {
				if int(c) == v.Child {
					bad[s] = true
				}
			}
		}
	}
	explained := map[interfaces.ShardID]bool{}
	for _, inf := range res.Infeasible {
		explained[inf.Shard] = true
	}
	switch res.Status {
	case interfaces.StatusOK:
		if len(viol) > 0 || len(res.Infeasible) > 0 {
			t.Fatalf("%s: status ok but CheckHard says %v, explanations %v", name, viol, res.Infeasible)
		}
	case interfaces.StatusInfeasible:
		if res.Proof == "" {
			t.Fatalf("%s: infeasible without a proof", name)
		}
		if maxPlaced >= 0 && maxPlaced == p.NumShards() {
			t.Fatalf("%s: infeasible (%s) but brute force places all %d shards", name, res.Proof, maxPlaced)
		}
		fallthrough
	case interfaces.StatusPartial:
		for s := range bad {
			if res.Assignment[s] >= 0 && !explained[p.ShardIDs[s]] && !bad[s] {
				t.Fatalf("%s: shard %s breaks a constraint and is not explained", name, p.ShardIDs[s])
			}
		}
		for id := range explained {
			s := slices.Index(p.ShardIDs, id)
			if s < 0 || (!bad[s] && res.Assignment[s] >= 0) {
				t.Fatalf("%s: shard %s is explained as infeasible but CheckHard finds it placed and fine", name, id)
			}
		}
		for s, c := range res.Assignment {
			if c < 0 && !explained[p.ShardIDs[s]] && res.Status == interfaces.StatusInfeasible {
				t.Fatalf("%s: shard %s unplaced without explanation", name, p.ShardIDs[s])
			}
		}
	}
}

// bruteMaxPlaced is the most shards any assignment meeting every hard
// constraint (unplaced shards allowed) places: (M+1)^N assignments.
func bruteMaxPlaced(p *Problem) int {
	N, M := p.NumShards(), p.NumChildren()
	a := make([]int32, N)
	for i := range a {
		a[i] = -1
	}
	best := 0
	for {
		n := 0
		for _, c := range a {
			if c >= 0 {
				n++
			}
		}
		if n > best {
			ok := true
			for _, v := range CheckHard(p, a) {
				if v.Constraint != ConstraintUnplaced {
					ok = false
					break
				}
			}
			if ok {
				best = n
			}
		}
		i := 0
		for ; i < N; i++ {
			a[i]++
			if int(a[i]) < M {
				break
			}
			a[i] = -1
		}
		if i == N {
			return best
		}
	}
}

// With the daemons' default settings (local search, 8 candidates), a solve
// places at least as many shards as first-fit decreasing on tight
// heterogeneous instances, and its status agrees with CheckHard.
func TestPropPlacesWhatFFDPlaces(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := genTight(t, 40)
		ref := refFFD(p)
		for _, name := range []string{SolverLocal, SolverFFD, SolverGreedy} {
			res, err := Solve(name, p, Options{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			checkStatus(t, name, p, res, -1)
			if name == SolverLocal && placed(res.Assignment) < ref {
				t.Fatalf("local placed %d shards, first-fit decreasing %d", placed(res.Assignment), ref)
			}
		}
	})
}

// On tiny instances a status of Infeasible is checked against brute force:
// then no assignment places every shard.
func TestPropInfeasibleIsProven(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := genTight(t, 3)
		if p.NumShards() > 7 {
			p.ShardIDs, p.Current = p.ShardIDs[:7], p.Current[:7]
			p.Load = p.Load[:7*p.NumResources()]
			if p.Groups != nil {
				p.Groups = p.Groups[:7]
			}
		}
		maxPlaced := bruteMaxPlaced(p)
		for _, name := range []string{SolverLocal, SolverGreedy, SolverFFD, SolverExact} {
			res, err := Solve(name, p, Options{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			checkStatus(t, name, p, res, maxPlaced)
		}
	})
}
