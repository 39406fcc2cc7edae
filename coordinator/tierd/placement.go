package tierd

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/tiers/control"
)

// placementState is what the leader's rounds remember about their plans'
// outcomes, for the next rounds and for Explain: the moves held back after
// the commit rejected them again and again (control.Backoff), and the
// shards the last plan could place nowhere, with why. A new leader starts
// afresh (reset).
type placementState struct {
	mu         sync.Mutex
	backoff    control.Backoff
	infeasible map[interfaces.ShardID]string
	now        time.Time // the last round's: Explain shows the holds as of then
}

// backoffHoldRounds is how many control intervals a move the commit rejected
// backoff.After times in a row is held (control.Backoff.Hold).
const backoffHoldRounds = 60

func (d *Daemon) resetPlacement() {
	d.place.mu.Lock()
	defer d.place.mu.Unlock()
	d.place.backoff = control.Backoff{After: control.DefaultBackoffAfter, Hold: backoffHoldRounds * d.cfg.Interval}
	d.place.infeasible = nil
	d.place.now = time.Time{}
}

// heldRules are the rules that keep the policy off the moves held at now
// (control.Backoff.Rules), for the round's view.
func (d *Daemon) heldRules(now time.Time, v *interfaces.View) []interfaces.Constraint {
	d.place.mu.Lock()
	defer d.place.mu.Unlock()
	d.place.now = now
	rules := d.place.backoff.Rules(now, v)
	d.scope.Gauge("moves_held").Update(float64(len(d.place.backoff.Held(now))))
	return rules
}

// dropHeld drops the held moves from a plan (a policy that ignores the
// view's rules proposes them anyway).
func (d *Daemon) dropHeld(now time.Time, moves []interfaces.Move) []interfaces.Move {
	d.place.mu.Lock()
	defer d.place.mu.Unlock()
	kept, n := d.place.backoff.Drop(now, moves)
	if n > 0 {
		d.scope.Counter("moves_held_dropped_total").Inc(int64(n))
	}
	return kept
}

// noteVerdict feeds a round's verification to the backoff and logs the
// moves it now holds.
func (d *Daemon) noteVerdict(now time.Time, rejected []balancer.Rejection, accepted []interfaces.Move) {
	d.place.mu.Lock()
	held := d.place.backoff.Observe(now, rejected, accepted)
	d.place.mu.Unlock()
	if len(held) == 0 {
		return
	}
	d.scope.Counter("moves_backed_off_total").Inc(int64(len(held)))
	for i, h := range held {
		if i == 3 {
			d.logger.Printf("… and %d more moves held", len(held)-i)
			break
		}
		d.logger.Printf("%v", h)
	}
}

// noteInfeasible keeps the shards the round's plan could place nowhere, with
// why, and logs when their number changes.
func (d *Daemon) noteInfeasible(plan interfaces.Plan) {
	var inf map[interfaces.ShardID]string
	for _, x := range plan.Infeasible {
		if inf == nil {
			inf = make(map[interfaces.ShardID]string, len(plan.Infeasible))
		}
		inf[x.Shard] = infeasibleWhy(x)
	}
	d.place.mu.Lock()
	before := len(d.place.infeasible)
	d.place.infeasible = inf
	d.place.mu.Unlock()
	d.scope.Gauge("shards_infeasible").Update(float64(len(inf)))
	if len(inf) != before && len(plan.Infeasible) > 0 {
		x := plan.Infeasible[0]
		d.logger.Printf("%d shards fit no child (e.g. %s: %s)", len(inf), x.Shard, inf[x.Shard])
	} else if len(inf) != before {
		d.logger.Printf("every shard fits a child again")
	}
}

// infeasibleWhy says why no child takes x: the one reason when every child
// gives the same (a pin to a missing child), else each child's, sorted.
func infeasibleWhy(x interfaces.Infeasible) string {
	ids := make([]string, 0, len(x.Excluded))
	same, first := true, ""
	for id, why := range x.Excluded {
		ids = append(ids, string(id))
		if first == "" {
			first = why
		} else if why != first {
			same = false
		}
	}
	if len(ids) == 0 {
		return "no child to place it on"
	}
	if same {
		return first
	}
	sort.Strings(ids)
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = id + ": " + x.Excluded[interfaces.ChildID(id)]
	}
	return strings.Join(parts, "; ")
}

// placementFindings explains, for Explain, why the last round left shard
// unplaced and which of its moves are held (as of the last round).
func (d *Daemon) placementFindings(shard interfaces.ShardID) []string {
	d.place.mu.Lock()
	defer d.place.mu.Unlock()
	var out []string
	if why, ok := d.place.infeasible[shard]; ok {
		out = append(out, fmt.Sprintf("infeasible: no child of %s/%s takes it: %s", d.cfg.Tier, d.cfg.Instance, why))
	}
	for _, h := range d.place.backoff.Held(d.place.now) {
		if h.Shard == shard {
			out = append(out, h.String())
		}
	}
	return out
}
