package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// world is the dense state of a simulated fleet: hosts, regions and shards in
// parallel arrays indexed by int, so the tick loop does no map look-ups and no
// allocations.
type world struct {
	// Regions.
	regionName  []string
	regionHosts [][]int32

	// Racks (topology.racks_per_region > 0): rack k of region r is
	// regionRacks[r][k]; hosts are dealt to them round-robin.
	racksPerRegion int
	rackName       []string
	rackRegion     []int32
	rackHosts      [][]int32
	regionRacks    [][]int32
	hostRack       []int32 // -1 without racks

	// Hosts.
	hostName   []string
	hostRegion []int32
	hostCap    []float64 // nres per host
	hostLabels []map[string]string
	hostState  []interfaces.ChildState

	// Jobs.
	jobName   []string
	jobArrive []time.Duration
	jobLeave  []time.Duration
	jobSLO    []time.Duration

	// Shards.
	shardID    []interfaces.ShardID
	shardJob   []int32
	baseLoad   []float64 // nres per shard, at rate factor 1
	baseRate   []float64
	stateBytes []int64
	gcons      []interfaces.ShardConstraints // as the global tier sees them (regions)
	rcons      []interfaces.ShardConstraints // as a region tier sees them (hosts)
	active     []bool
	hot        []float64 // rate multiplier from hot-shard events
}

func (w *world) addHost(name string, region int32, capacity interfaces.Load, labels map[string]string) int32 {
	h := int32(len(w.hostName))
	w.hostName = append(w.hostName, name)
	w.hostRegion = append(w.hostRegion, region)
	c := vec(capacity)
	w.hostCap = append(w.hostCap, c[:]...)
	lb := map[string]string{"region": w.regionName[region]}
	for k, v := range labels {
		lb[k] = v
	}
	w.hostLabels = append(w.hostLabels, lb)
	w.hostState = append(w.hostState, interfaces.ChildActive)
	w.regionHosts[region] = append(w.regionHosts[region], h)
	w.hostRack = append(w.hostRack, -1)
	if w.racksPerRegion > 0 {
		w.assignRack(h)
	}
	return h
}

// buildRacks makes n racks per region and deals the hosts defined so far to
// them; later hosts are dealt as they are added.
func (w *world) buildRacks(n int) {
	w.racksPerRegion = n
	for r, name := range w.regionName {
		rr := make([]int32, n)
		for k := range rr {
			rr[k] = int32(len(w.rackName))
			w.rackName = append(w.rackName, rackName(name, k))
			w.rackRegion = append(w.rackRegion, int32(r))
			w.rackHosts = append(w.rackHosts, nil)
		}
		w.regionRacks = append(w.regionRacks, rr)
	}
	for h := range w.hostName {
		w.assignRack(int32(h))
	}
}

// assignRack puts host h, the k-th host of its region, on rack k mod n.
func (w *world) assignRack(h int32) {
	r := w.hostRegion[h]
	k := len(w.regionHosts[r]) - 1
	for i, x := range w.regionHosts[r] {
		if x == h {
			k = i
			break
		}
	}
	rack := w.regionRacks[r][k%w.racksPerRegion]
	w.hostRack[h] = rack
	w.rackHosts[rack] = append(w.rackHosts[rack], h)
	lb := make(map[string]string, len(w.hostLabels[h])+1)
	for a, b := range w.hostLabels[h] {
		lb[a] = b
	}
	lb[TierRack] = w.rackName[rack]
	w.hostLabels[h] = lb
}

func (w *world) rackIndex(name string) int32 {
	for i, n := range w.rackName {
		if n == name {
			return int32(i)
		}
	}
	return -1
}

func (w *world) region(name string) int32 {
	for i, n := range w.regionName {
		if n == name {
			return int32(i)
		}
	}
	w.regionName = append(w.regionName, name)
	w.regionHosts = append(w.regionHosts, nil)
	return int32(len(w.regionName) - 1)
}

func (w *world) hostIndex(name string) int32 {
	for i, n := range w.hostName {
		if n == name {
			return int32(i)
		}
	}
	return -1
}

// jitter scales every dimension of l by an independent factor in [1-j, 1+j].
func jitter(rng *rand.Rand, l interfaces.Load, j float64) interfaces.Load {
	if j == 0 {
		return l
	}
	f := func(x float64) float64 { return x * (1 + j*(2*rng.Float64()-1)) }
	return interfaces.Load{CPU: f(l.CPU), Mem: f(l.Mem), Net: f(l.Net), Tasks: math.Round(f(l.Tasks))}
}

// buildTopology generates the hosts of every region (heterogeneous classes and
// jitter drawn from rng) and adds the listed hosts.
func buildTopology(w *world, t Topology, rng *rand.Rand) {
	for _, r := range t.Regions {
		ri := w.region(r.Name)
		total := 0.0
		for _, c := range r.Classes {
			total += c.Weight
		}
		for h := 0; h < r.Hosts; h++ {
			capacity, labels := r.Capacity.Load(), map[string]string{}
			for k, v := range r.Labels {
				labels[k] = v
			}
			if len(r.Classes) > 0 {
				x := rng.Float64() * total
				for ci, c := range r.Classes {
					x -= c.Weight
					if x < 0 || ci == len(r.Classes)-1 {
						capacity = c.Capacity.Load()
						labels["class"] = fmt.Sprint(ci)
						for k, v := range c.Labels {
							labels[k] = v
						}
						break
					}
				}
			}
			w.addHost(hostName(r.Name, h), ri, jitter(rng, capacity, r.Jitter), labels)
		}
	}
	for _, h := range t.Hosts {
		w.addHost(h.Name, w.region(h.Region), h.Capacity.Load(), h.Labels)
	}
}

// sizeWeights returns n shard size weights with mean 1 following the job's size
// distribution, in an order shuffled by rng.
func sizeWeights(s SizeSpec, n int, rng *rand.Rand) []float64 {
	w := make([]float64, n)
	switch s.Dist {
	case "equal":
		for i := range w {
			w[i] = 1
		}
	case "uniform":
		for i := range w {
			w[i] = 1 + (s.Ratio-1)*rng.Float64()
		}
	case "zipf":
		exp := s.S
		if exp == 0 && n > 1 {
			exp = math.Log(s.Ratio) / math.Log(float64(n))
		}
		for i := range w {
			w[i] = math.Pow(float64(i+1), -exp)
		}
		rng.Shuffle(n, func(i, j int) { w[i], w[j] = w[j], w[i] })
	}
	sum := 0.0
	for _, x := range w {
		sum += x
	}
	for i := range w {
		w[i] *= float64(n) / sum
	}
	return w
}

// buildWorkload generates the shards of every job.
func buildWorkload(w *world, sc *Scenario, rng *rand.Rand, replay *replaySeries) error {
	regionsOf := func(regions []string) []interfaces.ChildID {
		var out []interfaces.ChildID
		for _, r := range regions {
			out = append(out, interfaces.ChildID(r))
		}
		return out
	}
	for _, j := range sc.Workload.Jobs {
		ji := int32(len(w.jobName))
		w.jobName = append(w.jobName, j.Name)
		w.jobArrive = append(w.jobArrive, j.Arrive.D())
		w.jobLeave = append(w.jobLeave, j.Leave.D())
		w.jobSLO = append(w.jobSLO, j.LatencySLO.D())
		sizes := sizeWeights(j.Sizes, j.Shards, rng)
		base := vec(j.Load.Load())
		for k := 0; k < j.Shards; k++ {
			g := interfaces.ShardConstraints{Allowed: regionsOf(j.Regions)}
			r := interfaces.ShardConstraints{AntiAffinity: j.Spread, MaxPerChild: j.MaxPerHost}
			if j.Pinned != "" {
				r.Pinned = interfaces.ChildID(j.Pinned)
				g.Allowed = []interfaces.ChildID{interfaces.ChildID(w.regionName[w.hostRegion[w.hostIndex(j.Pinned)]])}
			}
			l := [nres]float64{base[0] * sizes[k], base[1] * sizes[k], base[2] * sizes[k], base[3]}
			w.addShard(interfaces.ShardID(fmt.Sprintf("%s-%05d", j.Name, k)), ji, l, j.InputRate*sizes[k], int64(float64(j.StateBytes)*sizes[k]), g, r)
		}
	}
	if replay != nil {
		r := sc.Workload.Replay
		ji := int32(len(w.jobName))
		w.jobName = append(w.jobName, r.Job)
		w.jobArrive = append(w.jobArrive, 0)
		w.jobLeave = append(w.jobLeave, 0)
		w.jobSLO = append(w.jobSLO, 0)
		seen := make(map[interfaces.ShardID]bool, len(w.shardID))
		for _, id := range w.shardID {
			seen[id] = true
		}
		for _, id := range replay.shards {
			if seen[interfaces.ShardID(id)] {
				return fmt.Errorf("workload.replay: shard %q of the replayed series is also a generated shard of workload.jobs: %w", id, interfaces.ErrInvalid)
			}
		}
		for _, id := range replay.shards {
			w.addShard(interfaces.ShardID(id), ji, [nres]float64{}, 0, int64(r.StateBytes), interfaces.ShardConstraints{}, interfaces.ShardConstraints{})
		}
	}
	return nil
}

func (w *world) addShard(id interfaces.ShardID, job int32, load [nres]float64, rate float64, state int64, g, r interfaces.ShardConstraints) {
	w.shardID = append(w.shardID, id)
	w.shardJob = append(w.shardJob, job)
	w.baseLoad = append(w.baseLoad, load[:]...)
	w.baseRate = append(w.baseRate, rate)
	w.stateBytes = append(w.stateBytes, state)
	w.gcons = append(w.gcons, g)
	w.rcons = append(w.rcons, r)
	w.active = append(w.active, false)
	w.hot = append(w.hot, 1)
}

// rateFactors computes each job's rate multiplier at time t: diurnal cycle ×
// steps × spikes × the replayed arrival series. O(jobs × (steps + spikes)); it
// writes into out and allocates nothing.
func rateFactors(sc *Scenario, w *world, arr *arrivalSeries, t time.Duration, out []float64) {
	g := 1.0
	if d := sc.Workload.Diurnal; d != nil {
		g = 1 + d.Amplitude*math.Sin(2*math.Pi*float64(t+d.Phase.D())/float64(d.Period.D()))
	}
	for j := range out {
		out[j] = g
	}
	for _, s := range sc.Workload.Steps {
		if t >= s.At.D() && !s.Partial() { // a partial step is a hot set (pickFraction)
			for j := range out {
				if s.Job == "" || w.jobName[j] == s.Job {
					out[j] *= s.Factor
				}
			}
		}
	}
	for _, s := range sc.Workload.Spikes {
		if t >= s.At.D() && t < s.At.D()+s.For.D() {
			for j := range out {
				if s.Job == "" || w.jobName[j] == s.Job {
					out[j] *= s.Factor
				}
			}
		}
	}
	if arr != nil {
		f := arr.at(t)
		for j := range out {
			if arr.job < 0 || int(arr.job) == j {
				out[j] *= f
			}
		}
	}
}

// pickFraction draws the shards a step on a fraction of shards applies to:
// ceil(fraction × n) of the n shards of its job (of all shards when the job is
// empty), at least one, with the seeded stream.
func pickFraction(w *world, s StepSpec, rng *rand.Rand) []int {
	var cands []int
	for i, j := range w.shardJob {
		if s.Job == "" || w.jobName[j] == s.Job {
			cands = append(cands, i)
		}
	}
	rng.Shuffle(len(cands), func(a, b int) { cands[a], cands[b] = cands[b], cands[a] })
	n := max(1, int(math.Ceil(s.Fraction*float64(len(cands))-1e-9)))
	if n < len(cands) {
		cands = cands[:n]
	}
	sort.Ints(cands)
	return cands
}

// pickHot returns the shard indexes a hot spec names or draws.
func pickHot(w *world, h HotSpec, rng *rand.Rand) ([]int, error) {
	var out []int
	if len(h.Shards) > 0 {
		for _, id := range h.Shards {
			found := -1
			for i, s := range w.shardID {
				if string(s) == id {
					found = i
					break
				}
			}
			if found < 0 {
				return nil, fmt.Errorf("workload.hot: shard %q is not in the workload: %w", id, interfaces.ErrNotFound)
			}
			out = append(out, found)
		}
		return out, nil
	}
	var cands []int
	for i, j := range w.shardJob {
		if w.jobName[j] == h.Job {
			cands = append(cands, i)
		}
	}
	rng.Shuffle(len(cands), func(a, b int) { cands[a], cands[b] = cands[b], cands[a] })
	if h.Count < len(cands) {
		cands = cands[:h.Count]
	}
	sort.Ints(cands)
	return cands, nil
}
