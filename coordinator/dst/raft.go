package dst

import (
	"errors"
	"time"

	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/coordinator/tiercore"
	"github.com/strata-sched/strata/interfaces"
)

// logEntry is one committed command of a group's log.
type logEntry struct {
	term uint64
	cmd  fsm.Command
}

var errNotLeader = errors.New("not the leader")

// commit appends cmd to p's group log if p leads it in the current term, and
// applies it to p's FSM (its state is then what every later leader starts
// from).
func (w *World) commit(p *proc, cmd fsm.Command) (*fsm.Result, error) {
	g, t := p.g, p.t
	if !t.leading || t.term != g.term || g.leader < 0 || g.replicas[g.leader] != p {
		return nil, errNotLeader
	}
	g.log = append(g.log, logEntry{term: g.term, cmd: cmd})
	w.catchUp(p)
	w.mix(uint64(cmd.Type()), uint64(len(g.log)))
	if w.cfg.Trace {
		w.tracef("%s commits %s %+v: %v", p.name, cmd.Type(), cmd, p.t.lastErr)
	}
	return t.lastResult, t.lastErr
}

// catchUp applies every entry p has not applied yet.
func (w *World) catchUp(p *proc) {
	g, t := p.g, p.t
	for t.applied < len(g.log) {
		t.applied++
		t.lastResult, t.lastErr = t.fsm.ApplyCommand(uint64(t.applied), g.log[t.applied-1].cmd)
	}
}

// depose ends g's leader's term: its commits fail from now on, it learns it
// after up to lag (hashicorp/raft's leader lease), and the followers elect a
// new leader after their election timeout.
func (w *World) depose(g *group, lag time.Duration) {
	if g.leader < 0 {
		return
	}
	old := g.replicas[g.leader]
	g.term++
	g.leader = -1
	w.tracef("%s: leader %s deposed (term %d)", g.name, old.name, g.term)
	if old.up {
		w.after(w.dur(0, lag), &event{kind: evStepDown, proc: old.id, inc: old.inc, term: old.t.term})
	}
	w.electLater(g)
}

func (w *World) electLater(g *group) {
	if g.electing {
		return
	}
	g.electing = true
	w.after(w.dur(time.Second, 2*time.Second), &event{kind: evElect, arg: w.groupIndex(g)})
}

func (w *World) groupIndex(g *group) int {
	if g == w.global {
		return -1
	}
	return g.region
}

func (w *World) groupAt(i int) *group {
	if i < 0 {
		return w.global
	}
	return w.regions[i]
}

// elect makes a live, running replica of g its leader in a new term.
func (w *World) elect(g *group) {
	g.electing = false
	if g.leader >= 0 {
		return
	}
	var cands []int
	for i, p := range g.replicas {
		if p.up && !p.paused && !p.t.leading {
			cands = append(cands, i)
		}
	}
	if len(cands) == 0 {
		w.electLater(g)
		return
	}
	i := cands[w.rng.IntN(len(cands))]
	p := g.replicas[i]
	g.term++
	g.leader = i
	w.catchUp(p)
	t := p.t
	t.leading, t.term = true, g.term
	t.leases.StepUp(g.term, w.now(p))
	t.kids = map[interfaces.ChildID]*psess{}
	w.stats.Elections++
	w.tracef("%s: %s leads in term %d", g.name, p.name, g.term)
}

// stepDown: p learns it no longer leads (in term): it forgets its sessions
// and leases, closes its children's streams and ends its uplink.
func (w *World) stepDown(p *proc, term uint64) {
	t := p.t
	if !t.leading || t.term != term {
		return
	}
	t.leading = false
	t.leases.StepDown()
	for _, id := range sortedKeys(t.kids) {
		ps := t.kids[id]
		w.reset(p.id, ps.proc, ps.sid)
	}
	t.kids = map[interfaces.ChildID]*psess{}
	if t.cs != nil {
		w.reset(p.id, t.cs.parent, t.cs.sid)
		t.cs = nil
		t.up.Disconnected()
	}
	if t.up != nil {
		t.up.EndLease()
	}
	w.tracef("%s steps down", p.name)
}

func newLeases(m tiercore.Mutations, ttl time.Duration) *tiercore.Leases {
	return tiercore.NewLeases(tiercore.LeaseConfig{TTL: ttl, DriftMargin: driftMargin, Grace: grace, Mutations: m})
}
