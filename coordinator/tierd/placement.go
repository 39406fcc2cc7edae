package tierd

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/tiers/control"
)

// placementState is what the leader's rounds found out about their plans,
// for Explain, the log and the metrics: the moves the controller holds back
// after the commit rejected them again and again (control.Backoff, a copy of
// the last round's), and the shards the last plan could place nowhere, with
// why. A new leader starts afresh (resetPlacement).
type placementState struct {
	mu         sync.Mutex
	held       []control.Held
	infeasible map[interfaces.ShardID]string
}

func (d *Daemon) resetPlacement() {
	d.place.mu.Lock()
	defer d.place.mu.Unlock()
	d.place.held, d.place.infeasible = nil, nil
}

// notePlacement keeps the moves the controller holds after a round (at now),
// and logs and counts the new ones.
func (d *Daemon) notePlacement(now time.Time, held []control.Held) {
	d.place.mu.Lock()
	before := map[string]bool{}
	for _, h := range d.place.held {
		before[string(h.Shard)+"\x00"+string(h.To)] = true
	}
	d.place.held = held
	d.place.mu.Unlock()
	d.scope.Gauge("moves_held").Update(float64(len(held)))
	n := 0
	for _, h := range held {
		if before[string(h.Shard)+"\x00"+string(h.To)] {
			continue
		}
		if n++; n <= 3 {
			d.logger.Printf("%v", h)
		}
	}
	if n > 3 {
		d.logger.Printf("… and %d more moves held", n-3)
	}
	if n > 0 {
		d.scope.Counter("moves_backed_off_total").Inc(int64(n))
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
	for _, h := range d.place.held {
		if h.Shard == shard {
			out = append(out, h.String())
		}
	}
	return out
}
