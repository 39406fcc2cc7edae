package balancer

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/strata-sched/strata/interfaces"
)

// Skews of generated shard loads.
const (
	SkewZipf    = "zipf"
	SkewUniform = "uniform"
)

// InstanceSpec describes a reproducible benchmark instance (see Generate).
type InstanceSpec struct {
	Shards, Hosts int
	Seed          uint64
	// Skew is "zipf" (default) or "uniform".
	Skew string
	// Utilization is the mean utilization Σload/Σcapacity per resource; 0 means
	// 0.6.
	Utilization float64
}

// Generate builds the benchmark instance of `strata bench balance`: resources cpu
// and mem; shard loads Zipf-distributed over ranks (load ∝ rank^-a with a =
// ln 20 / ln N, so the largest shard is 20× the smallest; ranks are shuffled
// independently per resource) or, with skew "uniform", drawn uniformly from
// [1, 20]; state sizes proportional to mem; host capacities equal up to a
// uniform ±20% per resource, scaled so that the mean utilization is
// spec.Utilization; every shard starts on a uniformly random host. The same
// spec always gives the same instance.
func Generate(spec InstanceSpec) (*Problem, error) {
	if spec.Shards < 1 {
		return nil, invalid("shards", "must be ≥ 1", spec.Shards)
	}
	if spec.Hosts < 1 {
		return nil, invalid("hosts", "must be ≥ 1", spec.Hosts)
	}
	if spec.Shards > math.MaxInt32 || spec.Hosts > math.MaxInt32 {
		return nil, invalid("shards", "too large", spec.Shards)
	}
	switch spec.Skew {
	case "":
		spec.Skew = SkewZipf
	case SkewZipf, SkewUniform:
	default:
		return nil, invalid("skew", "must be zipf or uniform", fmt.Sprintf("%q", spec.Skew))
	}
	if spec.Utilization == 0 {
		spec.Utilization = 0.6
	}
	if math.IsNaN(spec.Utilization) || spec.Utilization <= 0 || spec.Utilization > 1 {
		return nil, invalid("utilization", "must be in (0, 1]", spec.Utilization)
	}
	rng := rand.New(rand.NewPCG(spec.Seed, 0x57a7a))
	N, M := spec.Shards, spec.Hosts
	const R = 2
	p := &Problem{
		Resources:  []interfaces.Resource{interfaces.CPU, interfaces.Mem},
		ChildIDs:   make([]interfaces.ChildID, M),
		Capacity:   make([]float64, M*R),
		ShardIDs:   make([]interfaces.ShardID, N),
		Load:       make([]float64, N*R),
		StateBytes: make([]int64, N),
		Current:    make([]int32, N),
	}
	a := 0.0
	if N > 1 {
		a = math.Log(20) / math.Log(float64(N))
	}
	base := []float64{1, 1 << 30} // cpu cores, mem bytes per unit of load
	sum := make([]float64, R)
	for r := 0; r < R; r++ {
		perm := rng.Perm(N)
		for s := 0; s < N; s++ {
			var v float64
			if spec.Skew == SkewZipf {
				v = math.Pow(float64(perm[s]+1), -a)
			} else {
				v = 1 + 19*rng.Float64()
			}
			v *= base[r]
			p.Load[s*R+r] = v
			sum[r] += v
		}
	}
	capSum := make([]float64, R)
	for c := 0; c < M; c++ {
		p.ChildIDs[c] = interfaces.ChildID(fmt.Sprintf("host-%d", c))
		for r := 0; r < R; r++ {
			v := 0.8 + 0.4*rng.Float64()
			p.Capacity[c*R+r] = v
			capSum[r] += v
		}
	}
	for r := 0; r < R; r++ {
		scale := sum[r] / (spec.Utilization * capSum[r])
		for c := 0; c < M; c++ {
			p.Capacity[c*R+r] *= scale
		}
	}
	for s := 0; s < N; s++ {
		p.ShardIDs[s] = interfaces.ShardID(fmt.Sprintf("shard-%d", s))
		p.StateBytes[s] = int64(p.Load[s*R+1])
		p.Current[s] = int32(rng.IntN(M))
	}
	return p, nil
}
