package coop

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// Held is the parent's memory that Shard must stay away from Child until Until,
// because Child shed it or proposed to avoid it.
type Held struct {
	Shard  interfaces.ShardID
	Child  interfaces.ChildID
	Until  time.Time
	Reason string
}

// Memory is what the parent remembers between rounds: the shards held away
// from children. Derive takes it and returns the next one; the zero value is
// empty.
type Memory struct {
	Held []Held
}

// Down is what a parent sends one child: a move budget for the child's rounds
// and the utilization the child keeps its own children under.
type Down struct {
	Child    interfaces.ChildID
	MaxMoves int
	Target   float64
	Reason   string
}

// Derived is the result of Derive.
type Derived struct {
	// Constraints are added to the parent's own view before it solves.
	Constraints []interfaces.Constraint
	// Down holds one entry per active child, in child order.
	Down []Down
	// Shed maps each child asked to give load back (a shed request, or a
	// proposed capacity below its load) to the capacity it has for the
	// parent's control loop: the limit it got, or, when the request named
	// shards (held away from it instead of a limit), its load without them
	// in the resource the request weighs most in.
	// The child looks over capacity and the parent's round runs; the round's
	// max_moves rule then lets it move the held shards only.
	Shed map[interfaces.ChildID]interfaces.Load
	// Refused lists the hints and proposals not used, with why, for people.
	Refused []string
	// Memory is the memory to pass to the next Derive.
	Memory Memory
}

// Derive turns the children's hints in v.Reports into constraints for the
// parent's own solve, and computes the budget and target to send each active
// child. mem is the memory returned by the previous call (zero at first). It
// is a pure function of its inputs: time comes from v.Now. An invalid config
// or a nil view is an error naming the field; invalid hints are refused (and
// listed in Refused), never an error.
func Derive(v *interfaces.View, cfg Config, mem Memory) (Derived, error) {
	if err := cfg.Validate(); err != nil {
		return Derived{}, err
	}
	if v == nil {
		return Derived{}, &interfaces.FieldError{Field: "view", Rule: "is required"}
	}
	d := newDeriver(v, cfg.WithDefaults(), mem)
	d.readHints()
	eff := d.headroomLimits()
	d.shedRoundMoves()
	d.heldRules(eff)
	d.budgets()
	return d.out, nil
}

// deriver is one Derive call: the view and its projection, and what the
// children's hints have taken so far.
type deriver struct {
	v     *interfaces.View
	st    *state
	cfg   Config
	out   Derived
	order []int // the active children, by ID

	// capSum is the active children's capacity, total the load of every
	// shard of the view, placed or not. pool is their slack (capSum - total,
	// per resource): what derived capacity limits may take away without
	// leaving too little room for the load.
	capSum, total, pool interfaces.Load
	limited             map[int]bool            // children with a capacity limit from a shed or a proposal
	capped              map[int]interfaces.Load // those limits

	// usable is each active child's usable headroom: what its headroom hint
	// says (the last valid one), else its capacity minus its load. Load
	// pushed off a child goes only where others have usable headroom for it:
	// when every child is above target, shedding would only move the problem.
	// A child that asks to shed (shedding) has no headroom to give: usableSum
	// leaves it out. pushed is the load pushed off children so far.
	usable            []interfaces.Load
	usableSum, pushed interfaces.Load
	shedding          map[int]bool
	// hotRes is a resource in which the children together are at or above
	// the target: shedding it only moves the excess from one child to the
	// next ("" when there is none).
	hotRes string

	held    map[interfaces.ShardID]map[interfaces.ChildID]Held
	rooms   []headroom
	sloRisk map[int]bool
}

// headroom is a child's usable headroom, from a hint or a capacity proposal
// above its load.
type headroom struct {
	c      int
	amount interfaces.Load
	reason string
}

func newDeriver(v *interfaces.View, cfg Config, mem Memory) *deriver {
	d := &deriver{v: v, st: project(v), cfg: cfg,
		limited: map[int]bool{}, capped: map[int]interfaces.Load{}, shedding: map[int]bool{},
		held: map[interfaces.ShardID]map[interfaces.ChildID]Held{}, sloRisk: map[int]bool{}}
	st := d.st
	for c := range v.Children {
		if st.active(c) {
			d.order = append(d.order, c)
		}
	}
	sort.Slice(d.order, func(a, b int) bool { return v.Children[d.order[a]].ID < v.Children[d.order[b]].ID })
	for _, c := range d.order {
		d.capSum = d.capSum.Add(v.Children[c].Capacity)
	}
	for i := range v.Shards {
		d.total = d.total.Add(v.Shards[i].Load)
	}
	d.pool = d.capSum.Sub(d.total).Max(interfaces.Load{})
	d.usable = make([]interfaces.Load, len(v.Children))
	for _, c := range d.order {
		d.usable[c] = v.Children[c].Capacity.Sub(st.load[c]).Max(interfaces.Load{})
		for _, h := range v.Reports[v.Children[c].ID].Hints {
			switch {
			case h.Kind == interfaces.HintHeadroom && interfaces.ValidateLoad("amount", h.Amount) == nil:
				d.usable[c] = h.Amount
			case h.Kind == interfaces.HintShed:
				d.shedding[c] = true
			}
		}
	}
	for _, c := range d.order {
		if !d.shedding[c] {
			d.usableSum = d.usableSum.Add(d.usable[c])
		}
	}
	for _, r := range st.res {
		if cp := d.capSum.Get(r); cp > 0 && d.total.Get(r) >= cfg.Target*cp {
			d.hotRes = r
			break
		}
	}
	// Memory: keep what has not expired and still names a shard and child of
	// the view.
	for _, h := range mem.Held {
		if _, ok := d.st.shardIdx[h.Shard]; !ok || !h.Until.After(d.v.Now) {
			continue
		}
		if _, ok := st.childIdx[h.Child]; !ok {
			continue
		}
		d.hold(h)
	}
	return d
}

// refuse records a hint or proposal not used, with why.
func (d *deriver) refuse(format string, args ...any) {
	d.out.Refused = append(d.out.Refused, fmt.Sprintf(format, args...))
}

// hold keeps h.Shard away from h.Child until h.Until (the later of two holds
// of the same pair).
func (d *deriver) hold(h Held) {
	m := d.held[h.Shard]
	if m == nil {
		m = map[interfaces.ChildID]Held{}
		d.held[h.Shard] = m
	}
	if old, ok := m[h.Child]; !ok || h.Until.After(old.Until) {
		m[h.Child] = h
	}
}

// shed sets child c's capacity for the parent's control loop (Derived.Shed).
func (d *deriver) shed(c int, l interfaces.Load) {
	if d.out.Shed == nil {
		d.out.Shed = map[interfaces.ChildID]interfaces.Load{}
	}
	d.out.Shed[d.v.Children[c].ID] = l
}

// elsewhere is the usable headroom the other children have left for load
// pushed off child c.
func (d *deriver) elsewhere(c int) interfaces.Load {
	left := d.usableSum.Sub(d.pushed)
	if !d.shedding[c] {
		left = left.Sub(d.usable[c])
	}
	return left
}

// limit caps child c at its load minus amount (per resource with amount >
// 0), bounded so that the capacity it takes away stays within the pool; it
// returns the constraint, or false when nothing can be pushed elsewhere.
func (d *deriver) limit(c int, amount interfaces.Load, why string) (interfaces.Constraint, bool) {
	st, v := d.st, d.v
	var lim, took, reduce interfaces.Load
	any := false
	capacity := v.Children[c].Capacity
	left := d.elsewhere(c)
	for _, r := range st.res {
		load, cp := st.load[c].Get(r), capacity.Get(r)
		a := math.Min(math.Min(amount.Get(r), load), math.Min(load-cp+d.pool.Get(r), left.Get(r)))
		if a <= 1e-12 {
			continue
		}
		any = true
		l := math.Max(load-a, 1e-9*cp)
		took = took.With(r, a)
		lim = lim.With(r, l)
		reduce = reduce.With(r, math.Max(0, cp-math.Min(cp, l)))
	}
	if !any {
		return interfaces.Constraint{}, false
	}
	d.pool = d.pool.Sub(reduce).Max(interfaces.Load{})
	d.pushed = d.pushed.Add(took)
	d.limited[c] = true
	d.capped[c] = lim
	d.shed(c, lim)
	return interfaces.Constraint{Kind: interfaces.ConstraintCapacity, Children: []interfaces.ChildID{v.Children[c].ID}, Limit: lim,
		Reason: fmt.Sprintf("cooperation: %s %s; capped at %s (its load %s minus %s)", v.Children[c].ID, why, FormatLoad(lim), FormatLoad(st.load[c]), FormatLoad(took))}, true
}

// readHints goes through the active children's hints in child order.
func (d *deriver) readHints() {
	v := d.v
	for _, c := range d.order {
		id := v.Children[c].ID
		rep, ok := v.Reports[id]
		if !ok {
			continue
		}
		for k, h := range rep.Hints {
			field := fmt.Sprintf("reports[%s].hints[%d]", id, k)
			if k == maxHints {
				d.refuse("%s: only the first %d hints of a report are read (%d sent)", field, maxHints, len(rep.Hints))
				break
			}
			switch h.Kind {
			case interfaces.HintShed:
				d.shedHint(field, c, h)
			case interfaces.HintSLOAtRisk:
				risk := d.st.owned(h.Shards, c, d.cfg.MaxShards)
				if len(risk) == 0 {
					continue
				}
				d.sloRisk[c] = true
				d.out.Constraints = append(d.out.Constraints, interfaces.Constraint{Kind: interfaces.ConstraintAvoid, Shards: risk, Children: []interfaces.ChildID{id},
					Reason: fmt.Sprintf("cooperation: SLO at risk on %s (%s)", id, h.Reason)})
			case interfaces.HintConstraint:
				// A capacity proposal goes through limit, which records it in
				// limited and capped.
				if cons, ok := d.proposal(field, c, h); ok {
					d.out.Constraints = append(d.out.Constraints, cons)
				}
			case interfaces.HintHeadroom:
				if err := interfaces.ValidateLoad(field+".amount", h.Amount); err != nil {
					d.refuse("%s (headroom): %v", field, err)
					continue
				}
				d.rooms = append(d.rooms, headroom{c, h.Amount, h.Reason})
			default:
				d.refuse("%s: unknown hint kind %d", field, h.Kind)
			}
		}
	}
}

// shedHint answers child c's request to shed load.
func (d *deriver) shedHint(field string, c int, h interfaces.Hint) {
	v, st, cfg := d.v, d.st, d.cfg
	id := v.Children[c].ID
	if err := interfaces.ValidateLoad(field+".amount", h.Amount); err != nil {
		d.refuse("%s (shed): %v", field, err)
		return
	}
	if d.limited[c] {
		d.refuse("%s (shed): %s already has a capacity limit this round", field, id)
		return
	}
	if d.hotRes != "" {
		d.refuse("%s (shed): the children together are at %.0f%% %s, at or above the %.0f%% target: shedding would only move the excess", field, 100*d.total.Get(d.hotRes)/d.capSum.Get(d.hotRes), d.hotRes, 100*cfg.Target)
		return
	}
	// The named shards the child owns, in the child's order (its priority),
	// each taken only if it fits, whole, in the usable headroom the other
	// children have left: a partial shard moves nothing. A hint that names no
	// shard sheds its amount.
	amount := h.Amount
	cands := st.ownedInOrder(h.Shards, c, cfg.MaxShards)
	if len(h.Shards) > 0 && len(cands) == 0 {
		// Every shard it names is gone or already moving: the request is
		// older than the moves that answer it.
		d.refuse("%s (shed): none of the %d shards %s names is still on it and not moving", field, len(h.Shards), id)
		return
	}
	if len(cands) == 0 {
		cons, ok := d.limit(c, amount, "asks to shed "+FormatLoad(h.Amount)+" ("+h.Reason+")")
		if !ok {
			d.refuse("%s (shed): %s asks to shed %s but no other child has usable headroom for it", field, id, FormatLoad(h.Amount))
			return
		}
		d.out.Constraints = append(d.out.Constraints, cons)
		return
	}
	left := d.elsewhere(c)
	amount = interfaces.Load{}
	var taken []interfaces.ShardID
	for _, s := range cands {
		l := v.Shards[d.st.shardIdx[s]].Load
		if !l.Fits(left.Sub(amount)) {
			continue
		}
		amount = amount.Add(l)
		taken = append(taken, s)
	}
	if len(taken) == 0 {
		d.refuse("%s (shed): %s asks to shed %s but none of its %d candidate shards fits in the usable headroom of the other children", field, id, FormatLoad(h.Amount), len(cands))
		return
	}
	// The shards are held away from c (an allowed rule each): that moves
	// them, and only them. A capacity limit on c would also be the capacity
	// the solver balances against, and pull more load off c than it asked.
	d.pushed = d.pushed.Add(amount)
	d.limited[c] = true
	// Only in the resource the request weighs most in: the control loop's
	// error is then about that resource, and changes as the held shards leave.
	after := st.load[c].Sub(amount).Max(interfaces.Load{})
	dom, share := "", 0.0
	for _, r := range st.res {
		if cp := v.Children[c].Capacity.Get(r); cp > 0 && amount.Get(r)/cp > share {
			dom, share = r, amount.Get(r)/cp
		}
	}
	seen := interfaces.Load{}
	if dom != "" {
		cp := v.Children[c].Capacity.Get(dom)
		seen = seen.With(dom, math.Min(cp, math.Max(after.Get(dom), 1e-9*cp)))
	}
	d.shed(c, seen)
	for _, s := range taken {
		d.hold(Held{Shard: s, Child: id, Until: d.v.Now.Add(cfg.Hold), Reason: fmt.Sprintf("%s shed it (%s)", id, h.Reason)})
	}
}

// headroomLimits caps a child that can usefully take only `headroom` more at
// its load plus that, unless the limits together would leave less room than
// the load to place. It returns each active child's effective capacity (its
// capacity under the limits of this round).
func (d *deriver) headroomLimits() []interfaces.Load {
	v, st := d.v, d.st
	var roomCons []interfaces.Constraint
	eff := make([]interfaces.Load, len(v.Children))
	for _, c := range d.order {
		eff[c] = v.Children[c].Capacity
		for _, r := range st.res {
			if x := d.capped[c].Get(r); x > 0 && x < eff[c].Get(r) {
				eff[c] = eff[c].With(r, x)
			}
		}
	}
	for _, h := range d.rooms {
		if d.limited[h.c] {
			continue
		}
		capacity := v.Children[h.c].Capacity
		var lim interfaces.Load
		below := false
		for _, r := range st.res {
			cp := capacity.Get(r)
			l := st.load[h.c].Get(r) + h.amount.Get(r)
			if cp > 0 && l < cp*(1-1e-9) {
				lim = lim.With(r, math.Max(l, 1e-9*cp))
				below = true
			}
		}
		if !below {
			continue
		}
		for _, r := range st.res {
			if x := lim.Get(r); x > 0 && x < eff[h.c].Get(r) {
				eff[h.c] = eff[h.c].With(r, x)
			}
		}
		roomCons = append(roomCons, interfaces.Constraint{Kind: interfaces.ConstraintCapacity, Children: []interfaces.ChildID{v.Children[h.c].ID}, Limit: lim,
			Reason: fmt.Sprintf("cooperation: %s can usefully take %s more (%s); capped at %s", v.Children[h.c].ID, FormatLoad(h.amount), h.reason, FormatLoad(lim))})
	}
	if len(roomCons) > 0 {
		var room interfaces.Load
		for _, c := range d.order {
			room = room.Add(eff[c])
		}
		short := ""
		for _, r := range st.res {
			if room.Get(r) < d.total.Get(r) {
				short = r
				break
			}
		}
		if short != "" {
			d.refuse("headroom hints: the limits they imply leave %.4g %s for a load of %.4g; not used this round", room.Get(short), short, d.total.Get(short))
		} else {
			d.out.Constraints = append(d.out.Constraints, roomCons...)
		}
	}
	return eff
}

// shedRoundMoves: a round that answers shed requests moves the held shards
// and nothing else: the children asked to shed look full to the control loop
// (Shed), and a solver balancing against that would pull more off them.
func (d *deriver) shedRoundMoves() {
	st := d.st
	if len(d.out.Shed) == 0 || st.needsPlacement() {
		return
	}
	n := 0
	for s, away := range d.held {
		i := d.st.shardIdx[s]
		if o := st.owner[i]; o >= 0 && !st.inFlight[i] {
			if _, ok := away[d.v.Children[o].ID]; ok {
				n++
			}
		}
	}
	if n > 0 {
		d.out.Constraints = append(d.out.Constraints, interfaces.Constraint{Kind: interfaces.ConstraintMaxMoves, Max: n,
			Reason: fmt.Sprintf("cooperation: this round moves the %d shards held away from children that shed them, and nothing else", n)})
	}
}

// heldRules turns the held shards into rules: an allowed rule listing the
// active children that admit the shard and have room for it (eff), other
// than those it is held away from; a soft avoid rule when there is none. The
// holds go into the next memory.
func (d *deriver) heldRules(eff []interfaces.Load) {
	v, st := d.v, d.st
	type group struct {
		shards   []interfaces.ShardID
		children []interfaces.ChildID
		reason   string
	}
	groups := map[string]*group{}
	var keys []string
	heldIDs := make([]interfaces.ShardID, 0, len(d.held))
	for s := range d.held {
		heldIDs = append(heldIDs, s)
	}
	slices.Sort(heldIDs)
	for _, s := range heldIDs {
		i := d.st.shardIdx[s]
		away := d.held[s]
		var allowed []interfaces.ChildID
		for _, c := range d.order {
			id := v.Children[c].ID
			if _, ok := away[id]; ok {
				continue
			}
			on := st.owner[i] == c
			if st.admits(i, c, on) != "" {
				continue
			}
			if !on && !st.fits(c, v.Shards[i].Load, eff[c]) {
				continue
			}
			allowed = append(allowed, id)
		}
		awayIDs := make([]interfaces.ChildID, 0, len(away))
		for id := range away {
			awayIDs = append(awayIDs, id)
		}
		slices.Sort(awayIDs)
		first := away[awayIDs[0]]
		for _, id := range awayIDs {
			d.out.Memory.Held = append(d.out.Memory.Held, away[id])
		}
		if len(allowed) == 0 {
			d.out.Constraints = append(d.out.Constraints, interfaces.Constraint{Kind: interfaces.ConstraintAvoid, Shards: []interfaces.ShardID{s}, Children: awayIDs,
				Reason: fmt.Sprintf("cooperation: %s should stay off %s (%s); no other child has room for it, so only preferred", s, joinIDs(awayIDs), first.Reason)})
			continue
		}
		key := joinIDs(allowed) + "|" + joinIDs(awayIDs)
		g := groups[key]
		if g == nil {
			g = &group{children: allowed, reason: fmt.Sprintf("cooperation: held away from %s until %s: %s", joinIDs(awayIDs), first.Until.UTC().Format(time.RFC3339), first.Reason)}
			groups[key] = g
			keys = append(keys, key)
		}
		g.shards = append(g.shards, s)
	}
	for _, k := range keys {
		g := groups[k]
		d.out.Constraints = append(d.out.Constraints, interfaces.Constraint{Kind: interfaces.ConstraintAllowed, Shards: g.shards, Children: g.children, Reason: g.reason})
	}
}

// budgets computes the move budget and target sent down to each active child.
func (d *deriver) budgets() {
	v, st, cfg := d.v, d.st, d.cfg
	count := make([]int, len(v.Children))
	for i, c := range st.owner {
		if c >= 0 && !st.inFlight[i] {
			count[c]++
		}
	}
	for _, c := range d.order {
		dn := Down{Child: v.Children[c].ID, MaxMoves: max(cfg.MinBudget, int(math.Ceil(cfg.BudgetFraction*float64(count[c])-1e-9))), Target: cfg.Target}
		dn.Reason = fmt.Sprintf("budget %d moves (%.0f%% of its %d shards, at least %d), target utilization %.2f", dn.MaxMoves, 100*cfg.BudgetFraction, count[c], cfg.MinBudget, dn.Target)
		if d.sloRisk[c] {
			dn.Target = math.Round(cfg.Target*0.9*1e4) / 1e4
			dn.Reason = fmt.Sprintf("budget %d moves (%.0f%% of its %d shards, at least %d), target utilization %.2f (%.2f less 10%%: it reports SLOs at risk)", dn.MaxMoves, 100*cfg.BudgetFraction, count[c], cfg.MinBudget, dn.Target, cfg.Target)
		}
		d.out.Down = append(d.out.Down, dn)
	}
}

// owned returns the shards of ids that exist in the view and are owned by child
// c (not in flight), sorted and deduplicated, at most max of them.
func (st *state) owned(ids []interfaces.ShardID, c int, max int) []interfaces.ShardID {
	out := st.ownedInOrder(ids, c, len(ids))
	slices.Sort(out)
	if len(out) > max {
		out = out[:max]
	}
	return out
}

// maxHints bounds the hints of one child's report the parent reads per round.
const maxHints = 64

// ownedInOrder returns the shards of ids that exist in the view and are owned
// by child c (not in flight), in the order of ids without repeats, at most max.
func (st *state) ownedInOrder(ids []interfaces.ShardID, c int, max int) []interfaces.ShardID {
	seen := map[interfaces.ShardID]bool{}
	var out []interfaces.ShardID
	for _, id := range ids {
		i, ok := st.shardIdx[id]
		if len(out) >= max {
			break
		}
		if !ok || seen[id] || st.owner[i] != c || st.inFlight[i] {
			continue
		}
		seen[id] = true
		out = append(out, id)
	}
	return out
}

// proposal validates a constraint proposed by child c and returns the
// constraint to use, or refuses it.
func (d *deriver) proposal(field string, c int, h interfaces.Hint) (interfaces.Constraint, bool) {
	st, cfg := d.st, d.cfg
	id := st.v.Children[c].ID
	p := h.Constraint
	if p == nil {
		d.refuse("%s (constraint): no constraint proposed", field)
		return interfaces.Constraint{}, false
	}
	onlySelf := len(p.Children) == 1 && p.Children[0] == id
	var shards []interfaces.ShardID
	seen := map[interfaces.ShardID]bool{}
	for _, s := range p.Shards {
		if _, ok := st.shardIdx[s]; ok && !seen[s] {
			seen[s] = true
			shards = append(shards, s)
		}
	}
	slices.Sort(shards)
	if len(shards) > cfg.MaxShards {
		d.refuse("%s (constraint %s): %d shards, only the first %d used", field, p.Kind, len(shards), cfg.MaxShards)
		shards = shards[:cfg.MaxShards]
	}
	why := p.Reason
	if why == "" {
		why = h.Reason
	}
	switch p.Kind {
	case interfaces.ConstraintAvoid:
		if !onlySelf {
			d.refuse("%s (constraint avoid): a child may only propose rules about itself (children must be [%s], got %v)", field, id, p.Children)
			return interfaces.Constraint{}, false
		}
		if len(shards) == 0 {
			d.refuse("%s (constraint avoid): names no shard of the view", field)
			return interfaces.Constraint{}, false
		}
		for _, s := range shards {
			d.hold(Held{Shard: s, Child: id, Until: d.v.Now.Add(cfg.Hold), Reason: fmt.Sprintf("%s proposed it (%s)", id, why)})
		}
		return interfaces.Constraint{}, false // applied through the held shards
	case interfaces.ConstraintCapacity:
		if !onlySelf {
			d.refuse("%s (constraint capacity): a child may only propose rules about itself (children must be [%s], got %v)", field, id, p.Children)
			return interfaces.Constraint{}, false
		}
		if err := interfaces.ValidateLoad(field+".constraint.limit", p.Limit); err != nil {
			d.refuse("%s (constraint capacity): %v", field, err)
			return interfaces.Constraint{}, false
		}
		if d.limited[c] {
			d.refuse("%s (constraint capacity): %s already has a capacity limit this round", field, id)
			return interfaces.Constraint{}, false
		}
		var cut interfaces.Load
		for _, r := range st.res {
			if l := p.Limit.Get(r); l > 0 && l < st.load[c].Get(r) {
				cut = cut.With(r, st.load[c].Get(r)-l)
			}
		}
		if cut.IsZero() {
			// Not below its load: a limit on further load only, used like
			// usable headroom (dropped if the limits together leave too little room).
			var more interfaces.Load
			for _, r := range st.res {
				if l := p.Limit.Get(r); l > 0 {
					more = more.With(r, l-st.load[c].Get(r))
				} else {
					more = more.With(r, st.v.Children[c].Capacity.Get(r))
				}
			}
			d.rooms = append(d.rooms, headroom{c, more, "proposed a capacity of " + FormatLoad(p.Limit) + ": " + why})
			return interfaces.Constraint{}, false
		}
		cons, ok := d.limit(c, cut, "proposed a capacity of "+FormatLoad(p.Limit)+" ("+why+")")
		if !ok {
			d.refuse("%s (constraint capacity): no other child has room for the %s it would push out", field, FormatLoad(cut))
		}
		return cons, ok
	case interfaces.ConstraintAntiAffinity:
		// About its own shards: at least one named shard must be on the
		// child. Not all of them: once the rule has spread them, the child
		// holds fewer, and a rule it keeps proposing must not lapse and let
		// them drift back.
		if own := st.ownedInOrder(shards, c, 1); len(own) == 0 {
			d.refuse("%s (constraint anti_affinity): a child may only propose rules about its own shards (none of the %d named is on %s)", field, len(shards), id)
			return interfaces.Constraint{}, false
		}
		if len(shards) < 2 {
			d.refuse("%s (constraint anti_affinity): needs at least two shards of the view", field)
			return interfaces.Constraint{}, false
		}
		m := max(p.Max, 1)
		if need := (len(shards) + m - 1) / m; need > len(d.order) {
			d.refuse("%s (constraint anti_affinity): %d shards at most %d per child need %d children, %d are active", field, len(shards), m, need, len(d.order))
			return interfaces.Constraint{}, false
		}
		return interfaces.Constraint{Kind: interfaces.ConstraintAntiAffinity, Shards: shards, Max: m,
			Reason: fmt.Sprintf("cooperation: %s proposed keeping these %d shards apart, at most %d per child (%s)", id, len(shards), m, why)}, true
	}
	d.refuse("%s (constraint %s): only avoid, capacity and anti_affinity are accepted from a child", field, p.Kind)
	return interfaces.Constraint{}, false
}

func joinIDs(ids []interfaces.ChildID) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = string(id)
	}
	return strings.Join(parts, ", ")
}

// NeedsPlacement reports whether v has a shard that is unplaced or on a child
// that is not active (counting in-flight moves as done): a round that must
// place or evacuate shards. A parent's move budget (Down.MaxMoves) bounds
// relocations only, so a child applies it to rounds without such shards.
func NeedsPlacement(v *interfaces.View) bool { return project(v).needsPlacement() }

func (st *state) needsPlacement() bool {
	for _, c := range st.owner {
		if c < 0 || !st.active(c) {
			return true
		}
	}
	return false
}

// LowerCapacities lowers, in v, the capacity of each child asked to shed load
// (Derived.Shed) to the limit it got, in every dimension where the limit is
// above zero; v.Children is copied first, never changed in place. A parent
// whose control loop measures a child's utilization against its capacity in
// the view does this so that a child over its usable capacity triggers the
// round that moves load off it.
func LowerCapacities(v *interfaces.View, shed map[interfaces.ChildID]interfaces.Load) {
	if len(shed) == 0 {
		return
	}
	v.Children = append([]interfaces.Child(nil), v.Children...)
	for i := range v.Children {
		lim, ok := shed[v.Children[i].ID]
		if !ok {
			continue
		}
		capacity := v.Children[i].Capacity
		for _, r := range interfaces.UnionNames(lim) {
			if l := lim.Get(r); l > 0 && l < capacity.Get(r) {
				capacity = capacity.With(r, l)
			}
		}
		v.Children[i].Capacity = capacity
	}
}
