package dst

import (
	"fmt"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// Violation is a broken invariant: which rule, what was seen, when.
type Violation struct {
	Rule   string
	Detail string
	At     time.Duration // virtual time
	Step   int
}

func (v *Violation) String() string {
	return fmt.Sprintf("%s at %.3fs (step %d): %s", v.Rule, v.At.Seconds(), v.Step, v.Detail)
}

// The invariants' names.
const (
	RuleOneOwner     = "one owner"
	RuleEpochsGrow   = "epochs grow"
	RuleCapacity     = "capacity"
	RuleLeases       = "leases honoured"
	RuleNothingLost  = "nothing lost"
	RuleNoLeader     = "a leader after the faults"
	ruleHarnessError = "harness"
)

type checker struct {
	maxEpoch map[interfaces.ShardID]interfaces.Epoch
	lastHost map[interfaces.ShardID]int
}

func (w *World) violate(rule, format string, args ...any) {
	if w.viol != nil {
		return
	}
	w.viol = &Violation{Rule: rule, Detail: fmt.Sprintf(format, args...), At: time.Duration(w.clock), Step: w.steps}
	w.tracef("VIOLATION %s", w.viol)
}

func (w *World) allHosts() []*proc {
	var out []*proc
	for _, hs := range w.hosts {
		out = append(out, hs...)
	}
	return out
}

// start checks a worker's start of shard at epoch on host p, before it runs.
// A worker becomes active only here, so checking here is checking at every
// instant: any two overlapping active intervals overlap at the later start.
func (w *World) start(p *proc, shard interfaces.ShardID, epoch interfaces.Epoch) {
	for _, o := range w.allHosts() {
		if o != p && w.active(o.h, shard, w.clock) {
			w.violate(RuleOneOwner, "%s starts %s@%d while %s runs it @%d (its worker's lease ends %.3fs)",
				p.name, shard, epoch, o.name, o.h.workers[shard].epoch, float64(o.h.lease)/1e9)
		}
	}
	if c := w.chk.maxEpoch[shard]; epoch < c {
		w.violate(RuleEpochsGrow, "%s starts %s@%d after it ran @%d", p.name, shard, epoch, c)
	} else if epoch == c && w.chk.lastHost[shard] != p.id {
		w.violate(RuleEpochsGrow, "%s starts %s@%d, the epoch %s ran it at", p.name, shard, epoch, w.procs[w.chk.lastHost[shard]].name)
	}
	w.chk.maxEpoch[shard] = max(w.chk.maxEpoch[shard], epoch)
	w.chk.lastHost[shard] = p.id
	n := 1
	for id := range p.h.workers {
		if id != shard && w.active(p.h, id, w.clock) {
			n++
		}
	}
	// In-flight moves count as done (the balancer's rule): a move's source
	// may still run the shard while its slot is given out again, until it
	// stops it. So a host runs at most its capacity plus its moves away.
	if away := w.movingFrom(p); n > hostCapacity+away {
		w.violate(RuleCapacity, "%s runs %d shards, capacity %d, with %d moves away from it", p.name, n, hostCapacity, away)
	}
}

// checkLost: tier p is about to declare child lost, and may then give its
// shards to others. Nothing the child's lease covers may still run.
func (w *World) checkLost(p *proc, child interfaces.ChildID) {
	var hosts []*proc
	if p.kind == kGlobal {
		for _, r := range w.regions {
			if r.name == string(child) {
				hosts = w.hosts[r.region]
			}
		}
	} else {
		for _, h := range w.hosts[p.region] {
			if h.name == string(child) {
				hosts = append(hosts, h)
			}
		}
	}
	for _, h := range hosts {
		for _, id := range sortedKeys(h.h.workers) {
			if w.active(h.h, id, w.clock) {
				w.violate(RuleLeases, "%s declares %s lost while %s runs %s@%d under a lease until %.3fs",
					p.name, child, h.name, id, h.h.workers[id].epoch, float64(h.h.lease)/1e9)
			}
		}
	}
	w.stats.Lost++
}

// finalCheck: after the quiet run, every shard the global tier has runs on
// exactly one host, and nothing else runs.
func (w *World) finalCheck() {
	g := w.global
	if g.leader < 0 {
		w.violate(RuleNoLeader, "the global tier has no leader %v after the faults stopped", w.cfg.QuietFor)
		return
	}
	for _, r := range w.regions {
		if r.leader < 0 {
			w.violate(RuleNoLeader, "%s has no leader %v after the faults stopped", r.name, w.cfg.QuietFor)
			return
		}
	}
	f := g.replicas[g.leader].t.fsm
	want := map[interfaces.ShardID]bool{}
	for _, id := range w.shardIDs(g.replicas[g.leader]) {
		want[id] = true
	}
	runs := map[interfaces.ShardID][]string{}
	for _, h := range w.allHosts() {
		for _, id := range sortedKeys(h.h.workers) {
			if w.active(h.h, id, w.clock) {
				runs[id] = append(runs[id], h.name)
			}
		}
	}
	for _, id := range sortedKeys(want) {
		if n := len(runs[id]); n != 1 {
			st, _ := f.Shard(id)
			w.violate(RuleNothingLost, "%s runs on %d hosts %v %v after the faults stopped (global: owner %q epoch %d)", id, n, runs[id], w.cfg.QuietFor, st.Owner, st.Epoch)
			return
		}
	}
	for _, id := range sortedKeys(runs) {
		if !want[id] {
			w.violate(RuleNothingLost, "%s runs on %v, but the global tier does not have it (an orphan)", id, runs[id])
			return
		}
	}
}

// movingFrom counts the in-flight moves away from host p in its region's
// committed state (the most advanced replica's).
func (w *World) movingFrom(p *proc) int {
	var best *proc
	for _, r := range w.regions[p.region].replicas {
		if best == nil || r.t.applied > best.t.applied {
			best = r
		}
	}
	w.catchUp(best)
	n := 0
	for _, m := range best.t.fsm.InFlight() {
		if m.From == interfaces.ChildID(p.name) {
			n++
		}
	}
	return n
}
