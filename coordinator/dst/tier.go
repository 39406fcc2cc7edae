package dst

import (
	"cmp"
	"errors"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/coordinator/tiercore"
	"github.com/strata-sched/strata/interfaces"
)

// groupTermLabel records the newest group term a child tier's accepted Hello
// stated (tierd.GroupTermLabel).
const groupTermLabel = "strata.group_term"

// tierProc is one tier replica. fsm and applied are its Raft state (they
// survive a crash: the log is on disk); the rest is the leader's memory.
type tierProc struct {
	fsm        *fsm.FSM
	applied    int
	lastResult *fsm.Result
	lastErr    error

	leading    bool
	term       uint64
	leases     *tiercore.Leases
	assigns    tiercore.Assigns
	kids       map[interfaces.ChildID]*psess
	revokeSent map[interfaces.ShardID]time.Time
	deleted    map[interfaces.ShardID]uint64
	// The uplink (region replicas): the session with the global tier and the
	// tier core's state of it.
	up   *tiercore.Uplink
	cs   *csess
	hint int
}

func (w *World) bootTier(p *proc, keepLog bool) {
	t := &tierProc{fsm: fsm.New(), kids: map[interfaces.ChildID]*psess{}, revokeSent: map[interfaces.ShardID]time.Time{},
		deleted: map[interfaces.ShardID]uint64{}, hint: -1}
	ttl := hostTTL
	if p.kind == kGlobal {
		ttl = regionTTL
	} else {
		t.up = tiercore.NewUplink(w.cfg.Mutations)
	}
	t.leases = newLeases(w.cfg.Mutations, ttl)
	p.t = t
	if !keepLog {
		return
	}
	w.catchUp(p) // replays its log (the FSM is rebuilt from it)
}

func (w *World) childTTL(p *proc) time.Duration {
	if p.kind == kGlobal {
		return regionTTL
	}
	return hostTTL
}

// ---- parent side: sessions with children ----

func (w *World) tierMsg(p *proc, m *msg) {
	switch m.kind {
	case mHello:
		if m.restate {
			w.onRestate(p, m)
		} else {
			w.onHello(p, m)
		}
	case mReport:
		w.onReport(p, m)
	case mAck:
		w.onAck(p, m)
	case mReset:
		if p.t.cs != nil && m.sid == p.t.cs.sid {
			w.uplinkLost(p)
			return
		}
		for _, id := range sortedKeys(p.t.kids) {
			if ps := p.t.kids[id]; ps.sid == m.sid {
				delete(p.t.kids, id)
				p.t.leases.SessionLost(id, w.now(p))
			}
		}
	case mGrant, mAssign, mRevoke, mRedirect:
		w.uplinkMsg(p, m)
	}
}

func (w *World) onHello(p *proc, m *msg) {
	t := p.t
	g := p.g
	if !t.leading {
		leader := -1
		if g.leader >= 0 {
			leader = g.replicas[g.leader].id
		}
		w.send(&msg{kind: mRedirect, from: p.id, to: m.from, sid: m.sid, leader: leader})
		return
	}
	now := w.now(p)
	if t.up != nil && t.up.LeaseLeft(now) <= 0 {
		w.reset(p.id, m.from, m.sid) // no lease from our parent: none to grant
		return
	}
	c, known := t.fsm.Child(m.child)
	gt, _ := strconv.ParseUint(c.Labels[groupTermLabel], 10, 64)
	term, err := tiercore.AdmitHello(m.child, gt, m.gterm)
	if err == nil {
		if old := t.kids[m.child]; old != nil {
			_, err = tiercore.AdmitHello(m.child, old.gterm, m.gterm)
		}
	}
	if err != nil {
		w.reset(p.id, m.from, m.sid)
		return
	}
	want := interfaces.Child{ID: m.child, Tier: interfaces.TierHost, Capacity: interfaces.Load{Tasks: float64(m.capacity)}, State: interfaces.ChildActive}
	if p.kind == kGlobal {
		want.Tier = interfaces.TierRegion
	}
	if term != 0 {
		want.Labels = map[string]string{groupTermLabel: strconv.FormatUint(term, 10)}
	}
	if !known || c.State != want.State || !c.Capacity.Equal(want.Capacity) || c.Labels[groupTermLabel] != want.Labels[groupTermLabel] {
		if _, err := w.commit(p, &fsm.PutChild{Child: want}); err != nil {
			w.reset(p.id, m.from, m.sid)
			return
		}
	}
	if old := t.kids[m.child]; old != nil && old.sid != m.sid {
		w.reset(p.id, old.proc, old.sid) // a newer session replaces it
	}
	ps := &psess{sid: m.sid, proc: m.from, term: t.term, gterm: m.gterm, lastRecv: now}
	t.kids[m.child] = ps
	w.grant(p, m.child, ps, 0)
	w.reconcile(p, m.child, ps, m.held, true, nil)
}

func (w *World) onRestate(p *proc, m *msg) {
	ps := p.t.kids[m.child]
	if !p.t.leading || ps == nil || ps.sid != m.sid {
		return
	}
	ps.lastRecv = w.now(p)
	w.reconcile(p, m.child, ps, m.held, true, nil)
}

func (w *World) sessionOf(p *proc, m *msg) (interfaces.ChildID, *psess) {
	for _, id := range sortedKeys(p.t.kids) {
		if ps := p.t.kids[id]; ps.sid == m.sid && ps.proc == m.from {
			return id, ps
		}
	}
	return "", nil
}

func (w *World) onReport(p *proc, m *msg) {
	t := p.t
	id, ps := w.sessionOf(p, m)
	if !t.leading || ps == nil {
		w.reset(p.id, m.from, m.sid) // a stream this replica does not hold
		return
	}
	now := w.now(p)
	ps.lastRecv = now
	if m.seq <= ps.lastSeq {
		return // an older or repeated report
	}
	ps.lastSeq = m.seq
	if c, ok := t.fsm.Child(id); ok && c.State == interfaces.ChildFailed {
		delete(t.kids, id)
		w.reset(p.id, m.from, m.sid)
		return
	}
	w.grant(p, id, ps, m.seq)
	// A child tier's capacity is its children's: its reports say when it
	// changes.
	if c, ok := t.fsm.Child(id); ok && m.capacity > 0 && int(c.Capacity.Tasks) != m.capacity {
		c.Capacity = interfaces.Load{Tasks: float64(m.capacity)}
		_, _ = w.commit(p, &fsm.PutChild{Child: c})
	}
	if p.kind != kGlobal {
		running := make(map[interfaces.ShardID]uint64, len(m.running))
		for _, s := range m.running {
			running[s] = 0
		}
		w.reconcile(p, id, ps, running, false, func(s interfaces.ShardID) bool {
			return t.assigns.Due(s, now, reportInterval, hostTTL)
		})
	}
}

// grant sends child a lease, capped by what our own lease from the parent has
// left, if the session core lets it go.
func (w *World) grant(p *proc, child interfaces.ChildID, ps *psess, seq uint64) {
	t := p.t
	now := w.now(p)
	ttl := w.childTTL(p)
	if t.up != nil {
		left := t.up.LeaseLeft(now)
		if left <= 0 {
			return
		}
		ttl = min(ttl, left)
	}
	c, _ := t.fsm.Child(child)
	if !t.leases.Grant(child, ps.term, c.State == interfaces.ChildFailed, now) {
		return
	}
	w.send(&msg{kind: mGrant, from: p.id, to: ps.proc, sid: ps.sid, seq: seq, ttl: ttl})
}

// coreShard is st as the tier core sees it, with its wire epochs.
func (w *World) coreShard(p *proc, st fsm.ShardState) tiercore.Shard {
	t := p.t
	s := tiercore.Shard{ID: st.Spec.ID, Owner: st.Owner}
	if st.InFlight != nil {
		s.MovingFrom = st.InFlight.From
	}
	if t.up == nil {
		s.AssignEpoch, s.RevokeEpoch = uint64(st.Epoch), uint64(st.Epoch)
		return s
	}
	s.Leaving = t.up.Leaving(s.ID)
	s.AssignEpoch, _ = t.up.WireEpoch(s.ID, uint64(st.Epoch))
	s.RevokeEpoch, _ = t.up.RevokeEpoch(s.ID, uint64(st.Epoch))
	return s
}

func (w *World) reconcile(p *proc, child interfaces.ChildID, ps *psess, held map[interfaces.ShardID]uint64, stated bool, due func(interfaces.ShardID) bool) {
	t := p.t
	in := tiercore.Input{Child: child, Held: held, EpochsStated: stated, Due: due}
	for _, a := range t.fsm.Assignments() {
		if a.Child == child {
			st, _ := t.fsm.Shard(a.Shard)
			in.Owned = append(in.Owned, w.coreShard(p, st))
		}
	}
	in.Lookup = func(id interfaces.ShardID) (tiercore.Shard, bool) {
		st, ok := t.fsm.Shard(id)
		if !ok {
			return tiercore.Shard{}, false
		}
		return w.coreShard(p, st), true
	}
	in.Gone = func(id interfaces.ShardID) uint64 {
		e := t.deleted[id]
		if t.up == nil {
			return max(e, uint64(t.fsm.EpochFloor()))
		}
		return max(e, t.up.GoneEpoch(id))
	}
	for _, m := range tiercore.Reconcile(in) {
		switch m.Kind {
		case tiercore.Assign:
			if st, ok := t.fsm.Shard(m.Shard); ok {
				w.send(&msg{kind: mAssign, from: p.id, to: ps.proc, sid: ps.sid, spec: st.Spec, epoch: m.Epoch})
				t.assigns.Sent(m.Shard, m.Epoch, w.now(p))
			}
		case tiercore.Revoke:
			w.send(&msg{kind: mRevoke, from: p.id, to: ps.proc, sid: ps.sid, shard: m.Shard, epoch: m.Epoch})
		}
	}
}

// sendAssign sends the shard's Assign to its owner, if the core allows it.
func (w *World) sendAssign(p *proc, shard interfaces.ShardID) {
	t := p.t
	st, ok := t.fsm.Shard(shard)
	if !ok {
		return
	}
	cs := w.coreShard(p, st)
	ps := t.kids[st.Owner]
	if ps == nil || !tiercore.MayAssign(cs, st.Owner) {
		return
	}
	w.send(&msg{kind: mAssign, from: p.id, to: ps.proc, sid: ps.sid, spec: st.Spec, epoch: cs.AssignEpoch})
	t.assigns.Sent(shard, cs.AssignEpoch, w.now(p))
}

func (w *World) sendRevoke(p *proc, child interfaces.ChildID, shard interfaces.ShardID, e interfaces.Epoch) {
	t := p.t
	we := uint64(e)
	if t.up != nil {
		var ok bool
		if we, ok = t.up.RevokeEpoch(shard, uint64(e)); !ok {
			return
		}
	}
	ps := t.kids[child]
	if ps == nil {
		return
	}
	w.send(&msg{kind: mRevoke, from: p.id, to: ps.proc, sid: ps.sid, shard: shard, epoch: we})
	t.revokeSent[shard] = w.now(p)
}

func (w *World) onAck(p *proc, m *msg) {
	t := p.t
	child, ps := w.sessionOf(p, m)
	if !t.leading || ps == nil {
		return
	}
	ps.lastRecv = w.now(p)
	if !m.revoke {
		t.assigns.Acked(m.shard, m.epoch, m.ok)
		if !m.ok && m.revoked >= m.epoch && m.revoked > 0 {
			// Refused: the child revoked it at that epoch. Unassign, so that
			// it is placed again under a newer one.
			st, ok := t.fsm.Shard(m.shard)
			if ok && st.Owner == child && st.InFlight == nil && w.coreShard(p, st).AssignEpoch == m.epoch {
				_, _ = w.commit(p, &fsm.Unassign{Shard: m.shard, Epoch: st.Epoch, Reason: "refused as revoked"})
			}
		}
		return
	}
	if !m.ok {
		return
	}
	st, ok := t.fsm.Shard(m.shard)
	var cs tiercore.Shard
	if ok {
		cs = w.coreShard(p, st)
	}
	leaving := t.up != nil && t.up.Leaving(m.shard)
	switch tiercore.RevokeAcked(cs, ok, child, m.epoch, leaving) {
	case tiercore.AckCompleteMove:
		w.completeMove(p, m.shard, st)
	case tiercore.AckFinishRevoke:
		w.finishRevoke(p, m.shard)
	}
}

func (w *World) completeMove(p *proc, shard interfaces.ShardID, st fsm.ShardState) {
	if _, err := w.commit(p, &fsm.CompleteMove{Shard: shard, Epoch: st.Epoch}); err != nil {
		return
	}
	delete(p.t.revokeSent, shard)
	w.stats.Moves++
	w.sendAssign(p, shard)
}

// ---- child side (regions): the uplink to the global tier ----

func (w *World) regionHello(p *proc, restate bool) func(uint64) *msg {
	return func(uint64) *msg {
		t := p.t
		held := map[interfaces.ShardID]uint64{}
		v := t.fsm.View(interfaces.TierRegion, p.g.name)
		for _, s := range v.Shards {
			held[s.ID] = t.up.Epoch(s.ID)
		}
		return &msg{kind: mHello, child: interfaces.ChildID(p.g.name), held: held, gterm: t.term, capacity: w.regionCapacity(p), restate: restate}
	}
}

// regionCapacity is the sum of the region's active children's (a token 1
// when it has none).
func (w *World) regionCapacity(p *proc) int {
	n := 0
	for _, c := range p.t.fsm.Children() {
		if c.Child.State == interfaces.ChildActive {
			n += int(c.Child.Capacity.Tasks)
		}
	}
	return max(n, 1)
}

func (w *World) uplinkTick(p *proc) {
	t := p.t
	now := w.now(p)
	if t.cs != nil && now.Sub(t.cs.lastRecv) > silence(regionTTL) {
		w.reset(p.id, t.cs.parent, t.cs.sid)
		w.uplinkLost(p)
	}
	if t.cs == nil {
		t.cs = w.connect(p, t.hint, w.regionHello(p, false))
		return
	}
	w.report(p, t.cs, nil, w.regionCapacity(p))
	if t.cs.reports%restateEvery == 0 {
		m := w.regionHello(p, true)(t.cs.sid)
		m.from, m.to, m.sid = p.id, t.cs.parent, t.cs.sid
		w.send(m)
	}
}

func (w *World) uplinkLost(p *proc) {
	p.t.cs, p.t.hint = nil, -1
	p.t.up.Disconnected()
}

func (w *World) uplinkMsg(p *proc, m *msg) {
	t := p.t
	if t.up == nil || t.cs == nil || m.sid != t.cs.sid {
		return
	}
	now := w.now(p)
	t.cs.lastRecv = now
	switch m.kind {
	case mRedirect:
		w.uplinkLost(p)
		t.hint = m.leader
		t.cs = w.connect(p, t.hint, w.regionHello(p, false))
	case mGrant:
		if from, ok := t.cs.sentAt[m.seq]; ok {
			t.up.OnLease(from, m.ttl)
		}
	case mAssign:
		w.onParentAssign(p, m)
	case mRevoke:
		w.onParentRevoke(p, m)
	}
}

func (w *World) ackUp(p *proc, shard interfaces.ShardID, epoch uint64, revoke bool, err error, revokedAt uint64) {
	cs := p.t.cs
	if cs == nil {
		return
	}
	w.send(&msg{kind: mAck, from: p.id, to: cs.parent, sid: cs.sid, shard: shard, epoch: epoch, revoke: revoke, ok: err == nil,
		stale: errors.Is(err, interfaces.ErrStaleEpoch), revoked: revokedAt})
}

func (w *World) onParentAssign(p *proc, m *msg) {
	t := p.t
	tomb, err := t.up.CheckAssign(m.spec.ID, m.epoch)
	if err != nil {
		w.ackUp(p, m.spec.ID, m.epoch, false, err, tomb)
		return
	}
	if st, ok := t.fsm.Shard(m.spec.ID); !ok || !st.Spec.Equal(m.spec) {
		if _, err := w.commit(p, &fsm.PutShards{Shards: []interfaces.Shard{m.spec}}); err != nil {
			w.ackUp(p, m.spec.ID, m.epoch, false, err, 0)
			return
		}
	}
	t.up.Assigned(m.spec.ID, m.epoch)
	w.ackUp(p, m.spec.ID, m.epoch, false, nil, 0)
}

func (w *World) onParentRevoke(p *proc, m *msg) {
	t := p.t
	st, ok := t.fsm.Shard(m.shard)
	if err := t.up.OnRevoke(m.shard, m.epoch, ok); err != nil || !ok {
		w.ackUp(p, m.shard, m.epoch, true, err, 0)
		return
	}
	if st.InFlight != nil {
		if _, err := w.commit(p, &fsm.AbortMove{Shard: m.shard, Epoch: st.Epoch, Reason: "revoked by the parent tier"}); err != nil {
			w.ackUp(p, m.shard, m.epoch, true, err, 0)
			return
		}
		st, _ = t.fsm.Shard(m.shard)
	}
	if w.ownerGone(p, st) {
		w.finishRevoke(p, m.shard)
		return
	}
	w.sendRevoke(p, st.Owner, m.shard, st.Epoch)
}

func (w *World) ownerGone(p *proc, st fsm.ShardState) bool {
	if st.Owner == "" {
		return true
	}
	c, ok := p.t.fsm.Child(st.Owner)
	return ok && c.State == interfaces.ChildFailed
}

// finishRevoke deletes the shard here (no child runs it) and acks the
// parent's revoke.
func (w *World) finishRevoke(p *proc, shard interfaces.ShardID) {
	t := p.t
	epoch, _ := t.up.Revoking(shard)
	if st, ok := t.fsm.Shard(shard); ok {
		if we, known := t.up.RevokeEpoch(shard, uint64(st.Epoch)); known {
			t.deleted[shard] = we
		}
	}
	res, err := w.commit(p, &fsm.DropShards{IDs: []interfaces.ShardID{shard}, Reason: "revoked by the parent tier"})
	if err == nil {
		if e := res.Err(); e != nil && !errors.Is(e, interfaces.ErrNotFound) {
			err = e
		}
	}
	if err != nil {
		w.ackUp(p, shard, epoch, true, err, 0)
		return
	}
	t.up.Finished(shard)
	w.ackUp(p, shard, epoch, true, nil, 0)
}

// ---- the control round (this package's, not tierd's: see the package doc) ----

func (w *World) tierTick(p *proc) {
	t := p.t
	if p.kind == kRegion && t.leading {
		w.uplinkTick(p)
	}
	if !t.leading {
		return
	}
	now := w.now(p)
	for _, id := range sortedKeys(t.kids) {
		if ps := t.kids[id]; now.Sub(ps.lastRecv) > keepalive {
			delete(t.kids, id)
			t.leases.SessionLost(id, now)
			w.reset(p.id, ps.proc, ps.sid)
		}
	}
	if t.up != nil && t.up.LeaseLeft(now) <= 0 {
		return // without a lease from our parent, decide nothing
	}
	w.control(p, now)
}

type room struct {
	id   interfaces.ChildID
	free int
}

func (w *World) rooms(p *proc) []room {
	var out []room
	for _, c := range p.t.fsm.Children() {
		if c.Child.State == interfaces.ChildActive {
			out = append(out, room{c.Child.ID, int(c.Child.Capacity.Tasks) - c.Shards})
		}
	}
	return out
}

// target picks a child with room other than not, preferring the emptiest
// (ties drawn).
func (w *World) target(rs []room, not interfaces.ChildID) (interfaces.ChildID, bool) {
	best := -1
	var cands []interfaces.ChildID
	for _, r := range rs {
		if r.id == not || r.free <= 0 {
			continue
		}
		switch {
		case r.free > best:
			best, cands = r.free, []interfaces.ChildID{r.id}
		case r.free == best:
			cands = append(cands, r.id)
		}
	}
	if len(cands) == 0 {
		return "", false
	}
	return cands[w.rng.IntN(len(cands))], true
}

func take(rs []room, id interfaces.ChildID) {
	for i := range rs {
		if rs[i].id == id {
			rs[i].free--
		}
	}
}

func (w *World) control(p *proc, now time.Time) {
	t := p.t
	// In-flight moves: a failed source cannot ack and its lease is over, so
	// the move completes; otherwise the revoke is sent again now and then.
	for _, m := range t.fsm.InFlight() {
		st, ok := t.fsm.Shard(m.Shard)
		if !ok {
			continue
		}
		if src, _ := t.fsm.Child(m.From); src.State == interfaces.ChildFailed {
			w.completeMove(p, m.Shard, st)
			continue
		}
		if now.Sub(t.revokeSent[m.Shard]) > 2*tickInterval {
			w.sendRevoke(p, m.From, m.Shard, st.Epoch)
		}
	}
	// The parent's pending revokes.
	if t.up != nil {
		for _, id := range t.up.Pending() {
			st, ok := t.fsm.Shard(id)
			if ok && st.InFlight != nil {
				continue
			}
			if !ok || w.ownerGone(p, st) {
				w.finishRevoke(p, id)
				continue
			}
			if now.Sub(t.revokeSent[id]) > 2*tickInterval {
				w.sendRevoke(p, st.Owner, id, st.Epoch)
			}
		}
	}
	// Children silent past their lease, margin and grace are lost.
	for _, c := range t.fsm.Children() {
		if c.Child.State == interfaces.ChildFailed || !t.leases.StartDeclaring(c.Child.ID, 0, now) {
			continue
		}
		w.checkLost(p, c.Child.ID)
		lost := c.Child
		lost.State = interfaces.ChildFailed
		_, err := w.commit(p, &fsm.PutChild{Child: lost})
		t.leases.Declared(c.Child.ID)
		if err != nil {
			return
		}
		if ps := t.kids[c.Child.ID]; ps != nil {
			delete(t.kids, c.Child.ID)
			w.reset(p.id, ps.proc, ps.sid)
		}
		w.tracef("%s: %s lost", p.name, c.Child.ID)
	}
	rs := w.rooms(p)
	failed := map[interfaces.ChildID]bool{}
	for _, c := range t.fsm.Children() {
		failed[c.Child.ID] = c.Child.State == interfaces.ChildFailed
	}
	var placed []interfaces.ShardID
	ids := w.shardIDs(p)
	for _, id := range ids {
		st, _ := t.fsm.Shard(id)
		if st.InFlight != nil || (t.up != nil && t.up.Leaving(id)) {
			continue
		}
		switch {
		case st.Owner == "":
			// Unplaced: place it.
			if to, ok := w.target(rs, ""); ok {
				if _, err := w.commit(p, &fsm.Assign{Shard: id, Child: to, Reason: "place"}); err == nil {
					take(rs, to)
					placed = append(placed, id)
				}
			}
		case failed[st.Owner]:
			// On a lost child: move it directly (its lease is over).
			if to, ok := w.target(rs, st.Owner); ok {
				if _, err := w.commit(p, &fsm.Move{Move: interfaces.Move{Shard: id, From: st.Owner, To: to, Epoch: st.Epoch, Reason: "failover"}}); err == nil {
					take(rs, to)
					placed = append(placed, id)
				}
			}
		}
	}
	for _, id := range placed {
		w.sendAssign(p, id)
	}
	if w.quiet {
		return
	}
	// Random rebalancing: revoke → ack → commit → assign.
	if len(ids) > 0 && w.rng.Float64() < 0.3 {
		id := ids[w.rng.IntN(len(ids))]
		st, _ := t.fsm.Shard(id)
		leaving := t.up != nil && t.up.Leaving(id)
		if st.Owner != "" && st.InFlight == nil && !leaving && !failed[st.Owner] {
			if to, ok := w.target(rs, st.Owner); ok {
				if _, err := w.commit(p, &fsm.BeginMove{Move: interfaces.Move{Shard: id, From: st.Owner, To: to, Epoch: st.Epoch, Reason: "rebalance"}}); err == nil {
					w.sendRevoke(p, st.Owner, id, st.Epoch)
				}
			}
		}
	}
	if p.kind == kGlobal {
		w.workload(p, ids)
	}
}

func (w *World) shardIDs(p *proc) []interfaces.ShardID {
	v := p.t.fsm.View("", "")
	out := make([]interfaces.ShardID, 0, len(v.Shards))
	for _, s := range v.Shards {
		out = append(out, s.ID)
	}
	slices.Sort(out)
	return out
}

// workload creates and deletes shards at the top tier.
func (w *World) workload(p *proc, ids []interfaces.ShardID) {
	t := p.t
	r := w.rng.Float64()
	switch {
	case r < 0.15 && len(ids) < w.cfg.MaxShards:
		// A new ID (the workload's, not the tier's), unless the run
		// re-creates deleted IDs (ReuseShardIDs: see the known gap there).
		id := shardID(w.nextShard)
		if k := len(w.deletedIDs); w.cfg.ReuseShardIDs && k > 0 {
			id = w.deletedIDs[k-1] // the job submitted again
		}
		s := interfaces.Shard{ID: id, Job: "j", Load: interfaces.Load{Tasks: 1}}
		if _, err := w.commit(p, &fsm.PutShards{Shards: []interfaces.Shard{s}}); err == nil {
			if id == shardID(w.nextShard) {
				w.nextShard++
			} else {
				w.deletedIDs = w.deletedIDs[:len(w.deletedIDs)-1]
			}
		}
	case r < 0.25 && len(ids) > 0:
		id := ids[w.rng.IntN(len(ids))]
		st, _ := t.fsm.Shard(id)
		if _, err := w.commit(p, &fsm.RetireShards{DropShards: fsm.DropShards{IDs: []interfaces.ShardID{id}, Reason: "job deleted"}}); err == nil {
			t.deleted[id] = uint64(st.Epoch)
			w.deletedIDs = append(w.deletedIDs, id)
			if st.Owner != "" {
				w.sendRevoke(p, st.Owner, id, st.Epoch)
			}
		}
	}
}

func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K { return slices.Sorted(maps.Keys(m)) }
