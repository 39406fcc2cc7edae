package control

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// projection is the tier as a round sees it: each shard's owner with in-flight
// moves counted as done, and each child's load from the shards it holds.
type projection struct {
	v        *interfaces.View
	childIdx map[interfaces.ChildID]int
	shardIdx map[interfaces.ShardID]int
	owner    []int // child index, -1 unplaced
	inFlight []bool
	res      []interfaces.Resource
	load     [][]float64 // child × resource
	count    []int       // shards per child
	slo      []time.Duration
}

func project(v *interfaces.View) *projection {
	p := &projection{
		v:        v,
		childIdx: make(map[interfaces.ChildID]int, len(v.Children)),
		shardIdx: make(map[interfaces.ShardID]int, len(v.Shards)),
		owner:    make([]int, len(v.Shards)),
		inFlight: make([]bool, len(v.Shards)),
		load:     make([][]float64, len(v.Children)),
		count:    make([]int, len(v.Children)),
		slo:      make([]time.Duration, len(v.Children)),
	}
	caps := make([]interfaces.Load, 0, len(v.Children))
	for i, c := range v.Children {
		p.childIdx[c.ID] = i
		caps = append(caps, c.Capacity)
	}
	for _, r := range interfaces.UnionNames(caps...) {
		for _, c := range caps {
			if c.Get(r) > 0 {
				p.res = append(p.res, r)
				break
			}
		}
	}
	for i := range p.load {
		p.load[i] = make([]float64, len(p.res))
	}
	for i := range v.Shards {
		p.shardIdx[v.Shards[i].ID] = i
		p.owner[i] = -1
	}
	for _, a := range v.Assignments {
		if i, ok := p.shardIdx[a.Shard]; ok {
			if c, ok := p.childIdx[a.Child]; ok {
				p.owner[i] = c
			}
		}
	}
	for _, m := range v.InFlight {
		if i, ok := p.shardIdx[m.Shard]; ok {
			p.inFlight[i] = true
			if c, ok := p.childIdx[m.To]; ok {
				p.owner[i] = c
			}
		}
	}
	for i := range v.Shards {
		s := &v.Shards[i]
		c := p.owner[i]
		if c < 0 {
			continue
		}
		p.count[c]++
		for r, name := range p.res {
			p.load[c][r] += s.Load.Get(name)
		}
		if slo := s.LatencySLO; slo > 0 && (p.slo[c] == 0 || slo < p.slo[c]) {
			p.slo[c] = slo
		}
	}
	return p
}

func (p *projection) active(c int) bool {
	return p.v.Children[c].State == interfaces.ChildActive
}

// errors are the measured errors of a round against the targets. Each
// component is a relative error (0 = on target); Need is the estimated number
// of moves that would bring the components outside the dead band back to
// their targets.
type measured struct {
	Imbalance float64 // max over resources of max/LB − TargetImbalance
	Util      float64 // max utilization − TargetUtil (only where the mean leaves room)
	SLO       float64 // max over children of smoothed p99 / SLO − 1
	Error     float64 // the largest component
	Need      int
	Worst     string // which component and where, for people
}

// measure computes the errors of the projected tier. p99 gives each child's
// smoothed p99 (0 = unknown).
func measure(p *projection, cfg *Config, p99 func(interfaces.ChildID) time.Duration) measured {
	m := measured{Imbalance: math.Inf(-1), Util: math.Inf(-1), SLO: math.Inf(-1)}
	needImb, needUtil, needSLO := 0, 0, 0
	// shardsToShed estimates how many of child c's shards carry `excess` of
	// resource r (the child's mean shard load on r).
	shardsToShed := func(c, r int, excess float64) int {
		if p.count[c] == 0 || p.load[c][r] <= 0 {
			return 0
		}
		mean := p.load[c][r] / float64(p.count[c])
		return int(math.Ceil(excess/mean - 1e-9))
	}
	for r, name := range p.res {
		var loadSum, capSum, maxCap, maxShard float64
		for c := range p.v.Children {
			if !p.active(c) {
				continue
			}
			capR := p.v.Children[c].Capacity.Get(name)
			loadSum += p.load[c][r]
			capSum += capR
			maxCap = math.Max(maxCap, capR)
		}
		if capSum <= 0 || loadSum <= 0 {
			continue
		}
		for i := range p.v.Shards {
			if c := p.owner[i]; c >= 0 && p.active(c) {
				maxShard = math.Max(maxShard, p.v.Shards[i].Load.Get(name))
			}
		}
		mean := loadSum / capSum
		lb := math.Max(mean, maxShard/maxCap)
		maxU, hot := 0.0, -1
		for c := range p.v.Children {
			capR := p.v.Children[c].Capacity.Get(name)
			if !p.active(c) || capR <= 0 {
				continue
			}
			if u := p.load[c][r] / capR; u > maxU {
				maxU, hot = u, c
			}
		}
		if hot < 0 {
			continue
		}
		if maxU >= cfg.Floor {
			if e := maxU/lb - cfg.TargetImbalance; e > m.Imbalance {
				m.Imbalance = e
				if e >= cfg.DeadBand {
					m.Worst = fmt.Sprintf("%s max/LB %.3f on %s (target %.3f)", name, maxU/lb, p.v.Children[hot].ID, cfg.TargetImbalance)
				}
			}
			if maxU/lb-cfg.TargetImbalance >= cfg.DeadBand {
				level := cfg.TargetImbalance * lb
				n := 0
				for c := range p.v.Children {
					capR := p.v.Children[c].Capacity.Get(name)
					if p.active(c) && capR > 0 && p.load[c][r] > level*capR {
						n += shardsToShed(c, r, p.load[c][r]-level*capR)
					}
				}
				needImb = max(needImb, n)
			}
		}
		if mean < cfg.TargetUtil {
			e := maxU - cfg.TargetUtil
			if e > m.Util {
				m.Util = e
			}
			if e >= cfg.DeadBand {
				n := 0
				for c := range p.v.Children {
					capR := p.v.Children[c].Capacity.Get(name)
					if p.active(c) && capR > 0 && p.load[c][r] > cfg.TargetUtil*capR {
						n += shardsToShed(c, r, p.load[c][r]-cfg.TargetUtil*capR)
					}
				}
				needUtil = max(needUtil, n)
				if m.Worst == "" {
					m.Worst = fmt.Sprintf("%s utilization %.3f on %s (target %.3f)", name, maxU, p.v.Children[hot].ID, cfg.TargetUtil)
				}
			}
		}
	}
	for c, ch := range p.v.Children {
		if !p.active(c) || p.slo[c] <= 0 || p.count[c] == 0 {
			continue
		}
		lat := p99(ch.ID)
		if lat <= 0 {
			continue
		}
		e := float64(lat)/float64(p.slo[c]) - 1
		if e > m.SLO {
			m.SLO = e
		}
		if e < cfg.DeadBand {
			continue
		}
		// M/M/1: p99 ∝ 1/(1−ρ); to divide it by (1+e) the utilization must fall
		// to ρ' = 1 − (1−ρ)(1+e); shed at most half of the child.
		rho := 0.0
		for r := range p.res {
			if capR := ch.Capacity.Get(p.res[r]); capR > 0 {
				rho = math.Max(rho, p.load[c][r]/capR)
			}
		}
		frac := 0.5
		if rho > 0 {
			if target := 1 - (1-math.Min(rho, 1))*(1+e); target > rho/2 {
				frac = (rho - target) / rho
			}
		}
		needSLO = max(needSLO, int(math.Ceil(frac*float64(p.count[c])-1e-9)))
		if m.Worst == "" || e > m.Imbalance && e > m.Util {
			m.Worst = fmt.Sprintf("p99 %v on %s is %.0f%% over its SLO %v", lat, ch.ID, 100*e, p.slo[c])
		}
	}
	m.Error = math.Max(m.Imbalance, math.Max(m.Util, m.SLO))
	if math.IsInf(m.Error, -1) {
		m.Error = 0
	}
	for _, x := range []*float64{&m.Imbalance, &m.Util, &m.SLO} {
		if math.IsInf(*x, -1) {
			*x = 0
		}
	}
	if m.Error >= cfg.DeadBand {
		m.Need = max(1, needImb, needUtil, needSLO)
	}
	return m
}

// median is the median of xs (0 when empty); xs is not changed.
func median[T ~int64 | ~float64](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	return medianSorted(s)
}

// medianSorted is the median of sorted xs (0 when empty).
func medianSorted[T ~int64 | ~float64](xs []T) T {
	n := len(xs)
	switch {
	case n == 0:
		return 0
	case n%2 == 1:
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}
