package instance

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// FleetSpec describes a generated instance shaped like a real GPU fleet (see
// Fleet).
type FleetSpec struct {
	Hosts, Shards int
	Seed          uint64
	// CPU, Mem and GPU are the target utilizations Σload/Σcapacity; 0 means
	// 0.70, 0.50 and 0.97.
	CPU, Mem, GPU float64
}

// hostSize is one of the fleet's machine types.
type hostSize struct {
	cpu, memGiB float64
	gpus        int
	share       float64 // of the hosts
}

// fleetSizes are the six machine types of Fleet, from small CPU boxes to
// 8-GPU servers.
var fleetSizes = []hostSize{
	{16, 64, 0, 0.15},
	{32, 128, 0, 0.20},
	{64, 256, 0, 0.15},
	{48, 192, 2, 0.15},
	{64, 512, 4, 0.20},
	{96, 768, 8, 0.15},
}

// Fleet generates an instance shaped like a public GPU-cluster trace: hosts of
// six sizes (16–96 cores, 64–768 GiB, 0, 2, 4 or 8 GPUs held as devices of
// 1.0 each), and shards of skewed sizes (cpu log-normal, memory a skewed
// multiple of cpu), a share of them asking for GPUs (0.25, 0.5, 1, 2, 4 or 8,
// most of them small), scaled so that cpu, mem and gpu reach the spec's
// utilizations. Every shard is unplaced. The same spec gives the same
// instance.
func Fleet(spec FleetSpec) (*Instance, error) {
	if spec.Hosts < 1 || spec.Shards < 1 {
		return nil, &Error{Field: "fleet", Rule: fmt.Sprintf("needs ≥ 1 host and ≥ 1 shard (got %d, %d)", spec.Hosts, spec.Shards)}
	}
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&spec.CPU, 0.70)
	def(&spec.Mem, 0.50)
	def(&spec.GPU, 0.97)
	for _, u := range []float64{spec.CPU, spec.Mem, spec.GPU} {
		if !(u > 0 && u <= 1) {
			return nil, &Error{Field: "fleet", Rule: fmt.Sprintf("utilizations must be in (0, 1] (got %v)", u)}
		}
	}
	rng := rand.New(rand.NewPCG(spec.Seed, 0xf1ee7))
	in := &Instance{}
	var capCPU, capMem float64
	capGPU := 0
	for i := 0; i < spec.Hosts; i++ {
		x, k := rng.Float64(), 0
		for k < len(fleetSizes)-1 && x >= fleetSizes[k].share {
			x -= fleetSizes[k].share
			k++
		}
		sz := fleetSizes[k]
		h := Host{ID: fmt.Sprintf("h%04d", i), Region: "r0", Rack: fmt.Sprintf("rack%02d", i/40),
			Capacity: map[string]float64{"cpu": sz.cpu, "mem": sz.memGiB * (1 << 30)}}
		if sz.gpus > 0 {
			h.Devices = map[string]Device{"gpu": {Count: sz.gpus, Each: 1}}
			capGPU += sz.gpus
		}
		capCPU += sz.cpu
		capMem += sz.memGiB * (1 << 30)
		in.Hosts = append(in.Hosts, h)
	}
	// GPU demands, mostly small, until the target share of the GPUs is
	// asked for (whole GPUs are counted in quarters to stay exact).
	gpuChoices := []float64{0.25, 0.5, 1, 1, 1, 2, 2, 4, 8}
	var gpu []float64
	want := spec.GPU * float64(capGPU)
	sum := 0.0
	for len(gpu) < spec.Shards {
		d := gpuChoices[rng.IntN(len(gpuChoices))]
		if sum+d > want {
			// top up with the largest demand that still fits the target
			for _, c := range []float64{8, 4, 2, 1, 0.5, 0.25} {
				if sum+c <= want {
					d = c
					break
				}
			}
			if sum+d > want {
				break
			}
		}
		gpu = append(gpu, d)
		sum += d
	}
	N := spec.Shards
	in.Shards = make([]Shard, N)
	cpu := make([]float64, N)
	mem := make([]float64, N)
	var sc, sm, gcpu float64
	for s := 0; s < N; s++ {
		mem[s] = math.Exp(rng.NormFloat64()*0.9) * math.Exp(rng.NormFloat64()*0.6)
		sm += mem[s]
		if s < len(gpu) {
			// GPU jobs need a few cores per GPU, fewer than a GPU host has
			cpu[s] = gpu[s] * (2 + 4*rng.Float64())
			gcpu += cpu[s]
			continue
		}
		cpu[s] = math.Exp(rng.NormFloat64() * 0.9)
		sc += cpu[s]
	}
	// scale to the targets, rounding cpu to quarter cores and memory to MiB
	cpuScale := math.Max(spec.CPU*capCPU-gcpu, 0) / sc
	for s := 0; s < N; s++ {
		scale := cpuScale
		if s < len(gpu) {
			scale = 1
		}
		c := math.Max(0.25, math.Round(cpu[s]*scale*4)/4)
		m := math.Max(1, math.Round(mem[s]*spec.Mem*capMem/sm/(1<<20))) * (1 << 20)
		load := map[string]float64{"cpu": math.Min(c, 16), "mem": math.Min(m, 64*(1<<30))}
		if s < len(gpu) {
			load["gpu"] = gpu[s]
		}
		in.Shards[s] = Shard{ID: fmt.Sprintf("s%05d", s), Job: fmt.Sprintf("job%03d", s%97), Load: load}
	}
	// shuffle so that GPU shards are not all first
	rng.Shuffle(N, func(i, j int) { in.Shards[i].Load, in.Shards[j].Load = in.Shards[j].Load, in.Shards[i].Load })
	if err := in.check("", ""); err != nil {
		return nil, err
	}
	return in, nil
}
