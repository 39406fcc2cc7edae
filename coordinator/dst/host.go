package dst

import (
	"errors"
	"maps"
	"slices"

	"github.com/strata-sched/strata/coordinator/hostagent"
	"github.com/strata-sched/strata/interfaces"
)

// hostProc is a host agent: a real hostagent.Core and the executor of its
// effects. The store outlives a crash of the agent; the workers do not (each
// runs under a supervisor that dies with the agent, execdriver's process
// groups), but they outlive a pause of it until the lease their supervisor
// holds ends.
type hostProc struct {
	core *hostagent.Core
	cs   *csess
	hint int
	// What survives the agent: its bbolt store. The workers survive a pause.
	recs    map[interfaces.ShardID]hostagent.Record
	tombs   map[interfaces.ShardID]interfaces.Epoch
	workers map[interfaces.ShardID]*worker
	lease   int64 // the supervisors' deadline, virtual time (0: none)
}

// worker is one shard's process under its supervisor.
type worker struct {
	epoch interfaces.Epoch
	since int64
}

func newHost() *hostProc {
	return &hostProc{recs: map[interfaces.ShardID]hostagent.Record{}, tombs: map[interfaces.ShardID]interfaces.Epoch{},
		workers: map[interfaces.ShardID]*worker{}, hint: -1}
}

// boot (re)starts the agent from its store: every record fenced.
func (w *World) bootHost(p *proc) {
	h := p.h
	recs := make([]hostagent.Record, 0, len(h.recs))
	for _, id := range slices.Sorted(maps.Keys(h.recs)) {
		recs = append(recs, h.recs[id])
	}
	h.core = hostagent.NewCore(hostagent.LeaseConfig{}, recs, h.tombs)
	h.cs = nil
	h.hint = -1
}

// active reports whether h's worker of shard runs at virtual time v.
func (w *World) active(h *hostProc, shard interfaces.ShardID, v int64) bool {
	if _, ok := h.workers[shard]; !ok {
		return false
	}
	return w.cfg.NoWorkerLease || v < h.lease
}

// exec carries out the core's effects in order, as hostagent.Agent does.
func (w *World) exec(p *proc, effs []hostagent.Effect) {
	h := p.h
	for _, e := range effs {
		switch e.Kind {
		case hostagent.EffPersist:
			h.recs[e.Shard] = e.Record
		case hostagent.EffDelete:
			delete(h.recs, e.Shard)
			h.tombs[e.Shard] = e.Epoch
		case hostagent.EffStart:
			w.start(p, e.Shard, e.Epoch)
			h.workers[e.Shard] = &worker{epoch: e.Epoch, since: w.clock}
			w.stats.Starts++
		case hostagent.EffStop:
			delete(h.workers, e.Shard)
			h.core.StopDone(e.Shard, e.Epoch)
		case hostagent.EffLease:
			// The supervisors get the new deadline (driver.LeaseHolder).
			h.lease = w.virt(p, e.Deadline)
			w.schedule(h.lease+1, &event{kind: evFence, proc: p.id, inc: p.inc})
		}
		w.tracef("%s %v", p.name, e)
	}
}

func (w *World) hostHello(p *proc) func(uint64) *msg {
	return func(uint64) *msg {
		held := map[interfaces.ShardID]uint64{}
		for _, r := range p.h.core.Held() {
			held[r.Shard] = uint64(r.Epoch)
		}
		return &msg{kind: mHello, child: interfaces.ChildID(p.name), held: held, capacity: hostCapacity}
	}
}

// hostTick: fence if the lease ran out, keep the session up, report.
func (w *World) hostTick(p *proc) {
	h := p.h
	now := w.now(p)
	w.exec(p, h.core.Tick(now))
	if h.cs != nil && now.Sub(h.cs.lastRecv) > silence(hostTTL) {
		w.reset(p.id, h.cs.parent, h.cs.sid) // gives the stream up
		h.cs, h.hint = nil, -1
	}
	if h.cs == nil {
		h.cs = w.connect(p, h.hint, w.hostHello(p))
		return
	}
	w.report(p, h.cs, h.core.Running(), 0)
}

func (w *World) hostMsg(p *proc, m *msg) {
	h := p.h
	if h.cs == nil || m.sid != h.cs.sid {
		return // a stream this agent gave up
	}
	now := w.now(p)
	h.cs.lastRecv = now
	switch m.kind {
	case mRedirect:
		h.cs, h.hint = nil, m.leader
		h.cs = w.connect(p, h.hint, w.hostHello(p))
	case mReset:
		h.cs, h.hint = nil, -1
	case mGrant:
		from, ok := h.cs.sentAt[m.seq]
		if !ok {
			return
		}
		w.exec(p, h.core.Tick(now))
		effs, _ := h.core.LeaseGrant(from, m.ttl, nil)
		w.exec(p, effs)
	case mAssign:
		effs, err := h.core.Assign(now, m.spec, interfaces.Epoch(m.epoch))
		w.exec(p, effs)
		w.ackHost(p, m, err)
	case mRevoke:
		effs, err := h.core.Revoke(now, m.shard, interfaces.Epoch(m.epoch))
		w.exec(p, effs)
		w.ackHost(p, m, err)
	}
}

func (w *World) ackHost(p *proc, m *msg, err error) {
	a := &msg{kind: mAck, from: p.id, to: m.from, sid: m.sid, shard: m.shard, epoch: m.epoch, revoke: m.kind == mRevoke, ok: err == nil}
	if m.kind == mAssign {
		a.shard = m.spec.ID
	}
	if err != nil && errors.Is(err, interfaces.ErrStaleEpoch) {
		a.stale = true
		if t, ok := p.h.core.Tombstone(a.shard); ok && uint64(t) >= m.epoch {
			a.revoked = uint64(t)
		}
	}
	w.send(a)
}

// crashHost: the agent dies, and its supervisors and workers with it (a
// parent-death signal); the store stays.
func (w *World) crashHost(p *proc) {
	if p.h.cs != nil {
		w.reset(p.id, p.h.cs.parent, p.h.cs.sid) // the kernel resets its streams
	}
	p.h.core, p.h.cs = nil, nil
	clear(p.h.workers)
}
