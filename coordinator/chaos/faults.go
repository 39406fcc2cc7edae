package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/strata-sched/strata/coordinator/e2e"
)

// Kind is a kind of fault.
type Kind string

// The fault kinds. "leader" is the leader of the named tier at the moment of
// injection; a region fault picks a region from the seed.
const (
	KillGlobalLeader      Kind = "kill-global-leader"
	KillRegionLeader      Kind = "kill-region-leader"
	KillHost              Kind = "kill-host"
	PauseGlobalLeader     Kind = "pause-global-leader"
	PauseRegionLeader     Kind = "pause-region-leader"
	PauseHost             Kind = "pause-host"
	IsolateGlobalLeader   Kind = "partition-global-leader-from-followers"
	IsolateRegionLeader   Kind = "partition-region-leader-from-followers"
	OrphanGlobalChildren  Kind = "partition-global-leader-from-children"
	OrphanRegionChildren  Kind = "partition-region-leader-from-children"
	PartitionRegionGlobal Kind = "partition-region-from-global"
	PartitionHost         Kind = "partition-host"
	KillAll               Kind = "kill-all-and-restart"
)

// Kinds lists every fault kind in a fixed order.
var Kinds = []Kind{KillGlobalLeader, KillRegionLeader, KillHost, PauseGlobalLeader, PauseRegionLeader, PauseHost,
	IsolateGlobalLeader, IsolateRegionLeader, OrphanGlobalChildren, OrphanRegionChildren, PartitionRegionGlobal, PartitionHost, KillAll}

// ParseKinds reads a comma-separated list of fault kinds ("" is none: every
// kind).
func ParseKinds(list string) ([]Kind, error) {
	var out []Kind
	for _, f := range strings.Split(list, ",") {
		k := Kind(strings.TrimSpace(f))
		if k == "" {
			continue
		}
		if !slices.Contains(Kinds, k) {
			return nil, fmt.Errorf("-chaos.kinds: unknown fault kind %q (the kinds: %v)", k, Kinds)
		}
		out = append(out, k)
	}
	return out, nil
}

// HostFault reports whether the fault hits hosts themselves, so that their
// shards stopping is expected; every other kind hits only the control plane,
// and static stability (DESIGN.md §3 rule 5) says no shard stops.
func (k Kind) HostFault() bool {
	return k == KillHost || k == PauseHost || k == PartitionHost || k == KillAll
}

// Fault is one injected fault: what, whom, when.
type Fault struct {
	Seq    int
	Kind   Kind
	Target string   // the process or region hit
	Hosts  []string // hosts hit directly (host faults)
	Start  time.Time
	End    time.Time // healed (restarted, resumed, reconnected)
	Err    string    // the injection failed (e.g. no leader found)
}

// Step is one entry of the schedule: a fault held for Hold, then a quiet Gap.
type Step struct {
	Kind      Kind
	Hold, Gap time.Duration
	Pick      uint64 // chooses the region or host
}

// Schedule draws n steps from seed: the kinds in rounds, each round every
// kind once in a seeded order, holds in [minHold, maxHold].
func Schedule(seed uint64, n int, minHold, maxHold, gap time.Duration) []Step {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var out []Step
	for len(out) < n {
		round := append([]Kind(nil), Kinds...)
		rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
		for _, k := range round {
			if len(out) == n {
				break
			}
			hold := minHold + time.Duration(rng.Int64N(int64(maxHold-minHold)+1))
			if k == KillAll {
				hold = minHold // the processes are down for this long
			}
			out = append(out, Step{Kind: k, Hold: hold, Gap: gap, Pick: rng.Uint64()})
		}
	}
	return out
}

// Injector applies faults to a topology.
type Injector struct {
	T    *Topology
	Logf func(format string, args ...any)
}

// Inject applies step, holds it, heals it and returns what was done. ctx
// cancels the hold (the fault is still healed).
func (in *Injector) Inject(ctx context.Context, seq int, st Step) Fault {
	f := Fault{Seq: seq, Kind: st.Kind, Start: time.Now()}
	heal, err := in.apply(ctx, st, &f)
	if err != nil {
		if heal != nil {
			_ = heal() // a partition's rules may be half in place
		}
		f.Err = err.Error()
		f.End = time.Now()
		return f
	}
	in.Logf("fault %d: %s on %s for %v", seq, f.Kind, f.Target, st.Hold.Round(100*time.Millisecond))
	select {
	case <-ctx.Done():
	case <-time.After(st.Hold):
	}
	if err := heal(); err != nil {
		f.Err = "heal: " + err.Error()
	}
	f.End = time.Now()
	return f
}

func (in *Injector) apply(ctx context.Context, st Step, f *Fault) (heal func() error, err error) {
	t := in.T
	regions := t.RegionNames()
	region := regions[st.Pick%uint64(len(regions))]
	hosts := t.Hosts()
	host := hosts[st.Pick%uint64(len(hosts))]
	leaderOf := func(group string) (*e2e.Proc, error) {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		l, err := e2e.Leader(cctx, t.Group(group))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", group, err)
		}
		return l, nil
	}
	restart := func(p *e2e.Proc) func() error { return func() error { return p.Start(t.Cluster.Bin) } }
	resume := func(p *e2e.Proc) func() error { return func() error { p.Resume(); return nil } }
	heal = func() error { return t.Net.Heal() }
	followers := func(group string, l *e2e.Proc) []string {
		var out []string
		for _, p := range t.Group(group) {
			if p != l {
				out = append(out, p.Name)
			}
		}
		return out
	}
	switch st.Kind {
	case KillGlobalLeader, KillRegionLeader, PauseGlobalLeader, PauseRegionLeader, IsolateGlobalLeader, IsolateRegionLeader, OrphanGlobalChildren, OrphanRegionChildren:
		group := "global"
		if st.Kind == KillRegionLeader || st.Kind == PauseRegionLeader || st.Kind == IsolateRegionLeader || st.Kind == OrphanRegionChildren {
			group = region
		}
		l, err := leaderOf(group)
		if err != nil {
			return nil, err
		}
		f.Target, f.Start = l.Name, time.Now()
		switch st.Kind {
		case KillGlobalLeader, KillRegionLeader:
			l.Kill()
			return restart(l), nil
		case PauseGlobalLeader, PauseRegionLeader:
			l.Pause()
			return resume(l), nil
		case IsolateGlobalLeader, IsolateRegionLeader:
			return heal, t.Net.Cut([]string{l.Name}, followers(group, l))
		default: // from its children
			var children []string
			if group == "global" {
				for _, r := range regions {
					children = append(children, names(t.Group(r))...)
				}
			} else {
				children = t.HostsOf(group)
			}
			return heal, t.Net.Cut([]string{l.Name}, children)
		}
	case PartitionRegionGlobal:
		f.Target = region
		return heal, t.Net.Cut(names(t.Group(region)), names(t.Cluster.Global))
	case KillHost, PauseHost, PartitionHost:
		p := t.Cluster.Hosts[host]
		f.Target, f.Hosts = host, []string{host}
		switch st.Kind {
		case KillHost:
			p.Kill()
			return restart(p), nil
		case PauseHost:
			p.Pause()
			return resume(p), nil
		default:
			return heal, t.Net.Cut([]string{host}, names(t.Group(t.Cluster.HostRegion[host])))
		}
	case KillAll:
		f.Target, f.Hosts = "every process", hosts
		for _, p := range t.Cluster.All() {
			p.Kill()
		}
		return func() error { return t.Cluster.Start() }, nil
	}
	return nil, fmt.Errorf("unknown fault kind %q", st.Kind)
}
