package hierbench

import (
	"context"

	"github.com/strata-sched/strata/interfaces"
)

// flat is one policy over all hosts.
type flat struct {
	in     *Instance
	seed   int64
	policy interfaces.Policy
	host   []int32
	epoch  []interfaces.Epoch
	hosts  []interfaces.Child
	shards []interfaces.Shard
	asg    []interfaces.Assignment
}

// newFlat reuses shards (the views by shard index) when given, with their loads
// set back to the loads before the change.
func newFlat(in *Instance, seed uint64, policy interfaces.Policy, shards []interfaces.Shard) *flat {
	N := in.P.NumShards()
	if shards == nil {
		shards = shardViews(in)
	}
	setLoads(shards, in.P.Load, in.P.NumResources())
	f := &flat{in: in, seed: int64(seed), policy: policy, host: make([]int32, N), epoch: make([]interfaces.Epoch, N),
		hosts: hostViews(in), shards: shards, asg: make([]interfaces.Assignment, 0, N)}
	for s := range f.host {
		f.host[s] = -1
	}
	return f
}

func (f *flat) run(ctx context.Context, clk clocks, phase func(string)) (Run, error) {
	return twoRounds(clk, phase, f.in, f.host, f.shards, func() (interfaces.Status, error) { return f.round(ctx) })
}

func (f *flat) round(ctx context.Context) (interfaces.Status, error) {
	v := &interfaces.View{Tier: interfaces.TierRegion, Instance: "flat", Seed: f.seed,
		Children: f.hosts, Shards: f.shards, Assignments: appendAssignments(f.asg[:0], f.shards, f.host, f.hosts, f.epoch)}
	return planAndApply(ctx, f.policy, v, len(f.host), "host-", len(f.hosts), func(s, c int) error {
		f.host[s] = int32(c)
		f.epoch[s]++
		return nil
	})
}
