package tierd

import (
	"fmt"
	"sort"
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
// why (tiercore.Infeasible), and logs when their number changes.
func (d *Daemon) noteInfeasible(inf map[interfaces.ShardID]string) {
	d.place.mu.Lock()
	before := len(d.place.infeasible)
	d.place.infeasible = inf
	d.place.mu.Unlock()
	d.scope.Gauge("shards_infeasible").Update(float64(len(inf)))
	switch {
	case len(inf) != before && len(inf) > 0:
		ids := make([]string, 0, len(inf))
		for id := range inf {
			ids = append(ids, string(id))
		}
		sort.Strings(ids)
		x := interfaces.ShardID(ids[0])
		d.logger.Printf("%d shards fit no child (e.g. %s: %s)", len(inf), x, inf[x])
	case len(inf) != before:
		d.logger.Printf("every shard fits a child again")
	}
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
