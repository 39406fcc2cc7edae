package adminview

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/strata-sched/strata/interfaces/wire"
)

// Event kinds.
const (
	EventMove         = "move"        // a shard's owner at a tier instance changed
	EventChildState   = "child_state" // a child became draining, failed, active
	EventConnected    = "connected"   // a child's session came or went
	EventLeader       = "leader"      // a tier instance's leader changed
	EventAlert        = "alert"       // the control loop raised an alert
	EventAlertCleared = "alert_cleared"
	EventUnreachable  = "unreachable" // a child instance could not be asked
)

// Event is one thing that changed between two views of the hierarchy.
type Event struct {
	Seq      uint64    `json:"seq,omitempty"` // the dashboard numbers its feed
	At       time.Time `json:"at"`
	Kind     string    `json:"kind"`
	Tier     string    `json:"tier"`
	Instance string    `json:"instance"`
	Shard    string    `json:"shard,omitempty"`
	From     string    `json:"from,omitempty"`
	To       string    `json:"to,omitempty"`
	Epoch    uint64    `json:"epoch,omitempty"`
	Child    string    `json:"child,omitempty"`
	State    string    `json:"state,omitempty"`
	Alert    string    `json:"alert,omitempty"`
	// Reason and Mode say why a move was made (the placement history's
	// latest entry: the move's reason; emergency, periodic or manual).
	Reason string `json:"reason,omitempty"`
	Mode   string `json:"mode,omitempty"`
	// Message is the event in one line.
	Message string `json:"message"`
}

// Snapshot is one view of the hierarchy: the tree and, per tier instance,
// which child owns each of its shards.
type Snapshot struct {
	At    time.Time
	Roots []*Instance
	// Owners maps "tier/instance" to shard → child ("" while unassigned;
	// "→child" while a move to child is in flight).
	Owners map[string]map[string]string
	// Addrs maps "tier/instance" to the Admin address it was asked at.
	Addrs map[string]string
}

// Key names a tier instance in a Snapshot.
func Key(tier, instance string) string { return tier + "/" + instance }

// Take reads a Snapshot through the Admin API at addr.
func Take(ctx context.Context, dial Dialer, addr string, now time.Time) (*Snapshot, error) {
	roots, err := Walk(ctx, dial, addr, nil)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{At: now, Roots: roots, Owners: map[string]map[string]string{}, Addrs: map[string]string{}}
	var firstErr error
	EachInstance(roots, func(n *Instance, _ *Child) {
		k := Key(n.Tier, n.Instance)
		s.Addrs[k] = n.Address
		c, err := dial(n.Address)
		if err != nil {
			firstErr = err
			return
		}
		resp, err := c.ListShards(ctx, &wire.ListShardsRequest{})
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("shards of %s at %s: %w", k, n.Address, err)
			}
			return
		}
		own := map[string]string{}
		for _, si := range resp.GetShards() {
			owner := ""
			for _, p := range si.GetPlacement() {
				if p.GetTier() == n.Tier && p.GetInstance() == n.Instance {
					owner = p.GetChild()
					if p.GetInFlight() {
						owner = "→" + owner
					}
				}
			}
			own[si.GetShard().GetId()] = owner
		}
		s.Owners[k] = own
	})
	return s, firstErr
}

// Diff returns what changed from prev to cur, in a stable order (moves by
// instance and shard, then the rest). A nil prev yields nothing: the first view
// is the baseline.
func Diff(prev, cur *Snapshot) []Event {
	if prev == nil || cur == nil {
		return nil
	}
	var out []Event
	at := cur.At
	before := instances(prev.Roots)
	keys := make([]string, 0)
	after := instances(cur.Roots)
	for k := range after {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		n := after[k]
		p, ok := before[k]
		if !ok {
			continue
		}
		if p.LeaderID != n.LeaderID && n.LeaderID != "" {
			out = append(out, Event{At: at, Kind: EventLeader, Tier: n.Tier, Instance: n.Instance, To: n.LeaderID, From: p.LeaderID,
				Message: fmt.Sprintf("%s %s: leader %s (was %s, term %d)", n.Tier, n.Instance, n.LeaderID, orNone(p.LeaderID), n.Term)})
		}
		if n.LeaderID == "" && p.LeaderID != "" {
			out = append(out, Event{At: at, Kind: EventLeader, Tier: n.Tier, Instance: n.Instance, From: p.LeaderID,
				Message: fmt.Sprintf("%s %s: no leader (was %s)", n.Tier, n.Instance, p.LeaderID)})
		}
		was := setOf(p.Alerts)
		now := setOf(n.Alerts)
		for _, a := range n.Alerts {
			if !was[a] {
				out = append(out, Event{At: at, Kind: EventAlert, Tier: n.Tier, Instance: n.Instance, Alert: a, Message: fmt.Sprintf("%s %s: ALERT %s", n.Tier, n.Instance, a)})
			}
		}
		for _, a := range p.Alerts {
			if !now[a] {
				out = append(out, Event{At: at, Kind: EventAlertCleared, Tier: n.Tier, Instance: n.Instance, Alert: a, Message: fmt.Sprintf("%s %s: cleared %s", n.Tier, n.Instance, a)})
			}
		}
		for _, ch := range n.Children {
			pc := p.FindChild(ch.ID)
			if pc == nil {
				out = append(out, Event{At: at, Kind: EventChildState, Tier: n.Tier, Instance: n.Instance, Child: ch.ID, State: ch.State,
					Message: fmt.Sprintf("%s %s: new child %s (%s)", n.Tier, n.Instance, ch.ID, ch.State)})
				continue
			}
			if pc.State != ch.State {
				out = append(out, Event{At: at, Kind: EventChildState, Tier: n.Tier, Instance: n.Instance, Child: ch.ID, State: ch.State, From: pc.State,
					Message: fmt.Sprintf("%s %s: %s is %s (was %s)", n.Tier, n.Instance, ch.ID, ch.State, pc.State)})
			}
			if pc.Connected != ch.Connected {
				what := "connected"
				if !ch.Connected {
					what = "disconnected"
				}
				out = append(out, Event{At: at, Kind: EventConnected, Tier: n.Tier, Instance: n.Instance, Child: ch.ID, State: what,
					Message: fmt.Sprintf("%s %s: %s %s", n.Tier, n.Instance, ch.ID, what)})
			}
			if ch.Error != "" && pc.Error == "" && !ch.NotFollowed {
				out = append(out, Event{At: at, Kind: EventUnreachable, Tier: n.Tier, Instance: n.Instance, Child: ch.ID,
					Message: fmt.Sprintf("%s %s: child instance %s unreachable: %s", n.Tier, n.Instance, ch.ID, ch.Error)})
			}
		}
		po, co := prev.Owners[k], cur.Owners[k]
		shards := make([]string, 0, len(co))
		for s := range co {
			shards = append(shards, s)
		}
		sort.Slice(shards, func(i, j int) bool { return NaturalLess(shards[i], shards[j]) })
		for _, s := range shards {
			from, to := strings.TrimPrefix(po[s], "→"), co[s]
			if strings.HasPrefix(to, "→") || to == "" || to == po[s] || to == from {
				continue // in flight, unassigned, or unchanged
			}
			if _, known := po[s]; !known && po != nil {
				from = ""
			}
			msg := fmt.Sprintf("%s %s: %s placed on %s", n.Tier, n.Instance, s, to)
			if from != "" {
				msg = fmt.Sprintf("%s %s: %s moved %s → %s", n.Tier, n.Instance, s, from, to)
			}
			out = append(out, Event{At: at, Kind: EventMove, Tier: n.Tier, Instance: n.Instance, Shard: s, From: from, To: to, Message: msg})
		}
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func setOf(ss []string) map[string]bool {
	m := make(map[string]bool, len(ss))
	for _, s := range ss {
		m[s] = true
	}
	return m
}

func instances(roots []*Instance) map[string]*Instance {
	m := map[string]*Instance{}
	EachInstance(roots, func(n *Instance, _ *Child) { m[Key(n.Tier, n.Instance)] = n })
	return m
}

// Explained fills in the reasons of move events from each shard's placement
// history at the instance that moved it (at most limit lookups; 0: all).
func Explained(ctx context.Context, dial Dialer, s *Snapshot, evs []Event, limit int) {
	n := 0
	for i := range evs {
		e := &evs[i]
		if e.Kind != EventMove || (limit > 0 && n >= limit) {
			continue
		}
		addr := s.Addrs[Key(e.Tier, e.Instance)]
		c, err := dial(addr)
		if err != nil {
			continue
		}
		n++
		resp, err := c.Explain(ctx, &wire.ExplainRequest{Shard: e.Shard, Limit: 1})
		if err != nil || len(resp.GetHistory()) == 0 {
			continue
		}
		h := resp.GetHistory()[len(resp.GetHistory())-1]
		e.Reason, e.Mode, e.Epoch = h.GetMove().GetReason(), h.GetMode(), h.GetMove().GetEpoch()
		if e.Reason != "" {
			e.Message += " (" + e.Mode + ": " + e.Reason + ")"
		}
	}
}

// Watch takes a snapshot every interval and calls fn with every event since
// the last one (moves with their reasons), and with each snapshot, until ctx
// ends. A failed snapshot is reported through fn's err and retried. The calls
// of one snapshot share a deadline of timeout.
func Watch(ctx context.Context, dial Dialer, addr string, interval, timeout time.Duration, now func() time.Time, fn func(s *Snapshot, evs []Event, err error)) {
	var prev *Snapshot
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, timeout)
		s, err := Take(rctx, dial, addr, now())
		if s != nil {
			evs := Diff(prev, s)
			Explained(rctx, dial, s, evs, 64)
			cancel()
			if ctx.Err() != nil {
				return
			}
			fn(s, evs, err)
			prev = s
		} else {
			cancel()
			if ctx.Err() != nil {
				return
			}
			fn(nil, nil, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
