package adminview

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

// ErrNoInstance is a status that lists no tier instance.
var ErrNoInstance = errors.New("the status lists no tier instance")

// Instance is one tier instance of the tree, as its own Admin API describes it.
type Instance struct {
	Tier          string   `json:"tier"`
	Instance      string   `json:"instance"`
	Address       string   `json:"address"`
	LeaderID      string   `json:"leader_id,omitempty"`
	LeaderAddress string   `json:"leader_address,omitempty"`
	Term          uint64   `json:"term"`
	StateIndex    uint64   `json:"state_index"`
	Policy        string   `json:"policy,omitempty"`
	Alerts        []string `json:"alerts,omitempty"`
	Findings      []string `json:"findings,omitempty"`
	Children      []*Child `json:"children"`
}

// Child is a child of a tier instance as that instance's leader sees it.
// Instance is the child's own tier instance when the child is one (it has an
// Admin address); Error says why that instance could not be asked.
type Child struct {
	ID        string            `json:"id"`
	Tier      string            `json:"tier"`
	State     string            `json:"state"`
	Connected bool              `json:"connected"`
	Shards    int64             `json:"shards"`
	Labels    map[string]string `json:"labels,omitempty"`
	// UtilizationPct is used/capacity per resource, in percent.
	UtilizationPct        map[string]float64 `json:"utilization_pct"`
	Used                  map[string]float64 `json:"used"`
	LeaseRemainingSeconds float64            `json:"lease_remaining_seconds"`
	Address               string             `json:"address,omitempty"`
	Instance              *Instance          `json:"instance,omitempty"`
	Error                 string             `json:"error,omitempty"`
	// NotFollowed: the address was not asked (a cycle, or too deep), as
	// opposed to asked and unreachable.
	NotFollowed bool
}

// MaxTreeDepth bounds the walk so that a misconfigured cycle cannot loop.
const MaxTreeDepth = 16

// Dialer returns an Admin client for an address.
type Dialer func(addr string) (wire.AdminClient, error)

// Walk asks the Admin API at addr for its status and, recursively, every
// child tier instance through ChildStatus.address. An unreachable child
// instance is recorded in its Child.Error; only a failure at addr itself is
// returned, through callErr (which may wrap it for its caller; nil: as is).
func Walk(ctx context.Context, dial Dialer, addr string, callErr func(addr string, err error) error) ([]*Instance, error) {
	if callErr == nil {
		callErr = func(_ string, err error) error { return err }
	}
	return walkFrom(ctx, dial, callErr, addr, 0, map[string]bool{})
}

func walkFrom(ctx context.Context, dial Dialer, callErr func(string, error) error, addr string, depth int, seen map[string]bool) ([]*Instance, error) {
	seen[addr] = true
	c, err := dial(addr)
	if err != nil {
		return nil, err
	}
	resp, err := c.Status(ctx, &wire.StatusRequest{})
	if err != nil {
		return nil, callErr(addr, err)
	}
	var out []*Instance
	for _, ts := range resp.GetTiers() {
		for _, is := range ts.GetInstances() {
			n := &Instance{
				Tier: ts.GetTier(), Instance: is.GetInstance(), Address: addr,
				LeaderID: is.GetLeaderId(), LeaderAddress: is.GetLeaderAddress(),
				Term: is.GetTerm(), StateIndex: is.GetStateIndex(), Policy: is.GetPolicy(), Alerts: is.GetAlerts(), Findings: is.GetFindings(),
				Children: []*Child{},
			}
			for _, cs := range is.GetChildren() {
				ch := ChildFromStatus(cs)
				switch {
				case ch.Address == "":
				case seen[ch.Address]:
					ch.Error, ch.NotFollowed = fmt.Sprintf("address %s already visited (a cycle in the tree?)", ch.Address), true
				case depth+1 >= MaxTreeDepth:
					ch.Error, ch.NotFollowed = fmt.Sprintf("tree deeper than %d levels; not followed", MaxTreeDepth), true
				default:
					sub, err := walkFrom(ctx, dial, callErr, ch.Address, depth+1, seen)
					if err != nil {
						ch.Error = err.Error()
					} else if len(sub) > 0 {
						ch.Instance = sub[0]
					}
				}
				n.Children = append(n.Children, ch)
			}
			sort.Slice(n.Children, func(i, k int) bool { return NaturalLess(n.Children[i].ID, n.Children[k].ID) })
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, callErr(addr, ErrNoInstance)
	}
	return out, nil
}

func ChildFromStatus(cs *wire.ChildStatus) *Child {
	ch := &Child{
		ID: cs.GetChild().GetId(), Tier: cs.GetChild().GetTier(),
		State:     ChildStateName(cs.GetChild().GetState()),
		Connected: cs.GetConnected(), Shards: cs.GetShards(), Labels: cs.GetChild().GetLabels(),
		UtilizationPct: map[string]float64{}, Used: map[string]float64{},
		LeaseRemainingSeconds: time.Duration(cs.GetLeaseRemainingNanos()).Round(time.Millisecond).Seconds(),
		Address:               cs.GetAddress(),
	}
	for r, u := range cs.GetUtilization() {
		if !math.IsNaN(u) && !math.IsInf(u, 0) { // JSON cannot carry them
			ch.UtilizationPct[r] = math.Round(u*1000) / 10
		}
	}
	used := cs.GetUsed()
	for _, r := range interfaces.BuiltinResources {
		if v := LoadGet(used, r); v != 0 {
			ch.Used[r] = v
		}
	}
	for k, v := range used.GetExtra() {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			ch.Used[k] = v
		}
	}
	return ch
}

func LoadGet(l *wire.Load, r string) float64 {
	switch r {
	case interfaces.CPU:
		return l.GetCpu()
	case interfaces.Mem:
		return l.GetMem()
	case interfaces.Net:
		return l.GetNet()
	case interfaces.Tasks:
		return l.GetTasks()
	}
	return l.GetExtra()[r]
}

func ChildStateName(s wire.ChildState) string {
	if st, err := wire.ChildStateFromWire("state", s); err == nil {
		return st.String()
	}
	return fmt.Sprintf("unknown(%d)", int32(s))
}

// EachInstance calls fn on every tier instance of the tree, top down, with the
// child through which it was reached (nil for the roots).
func EachInstance(roots []*Instance, fn func(n *Instance, via *Child)) {
	var visit func(n *Instance, via *Child)
	visit = func(n *Instance, via *Child) {
		fn(n, via)
		for _, ch := range n.Children {
			if ch.Instance != nil {
				visit(ch.Instance, ch)
			}
		}
	}
	for _, r := range roots {
		visit(r, nil)
	}
}

// Unreachable lists the child instances of the tree that could not be asked.
func Unreachable(roots []*Instance) []string {
	var out []string
	EachInstance(roots, func(n *Instance, _ *Child) {
		for _, ch := range n.Children {
			if ch.Error != "" {
				out = append(out, fmt.Sprintf("%s (child of %s/%s): %s", ch.ID, n.Tier, n.Instance, ch.Error))
			}
		}
	})
	return out
}

// FindChild returns the child named id of n, or nil.
func (n *Instance) FindChild(id string) *Child {
	for _, ch := range n.Children {
		if ch.ID == id {
			return ch
		}
	}
	return nil
}

// NaturalLess orders strings with embedded numbers by value: "s/2" < "s/10".
func NaturalLess(a, b string) bool {
	for a != "" && b != "" {
		ca, cb := chunk(a), chunk(b)
		a, b = a[len(ca):], b[len(cb):]
		if ca == cb {
			continue
		}
		na, ea := strconv.ParseUint(ca, 10, 64)
		nb, eb := strconv.ParseUint(cb, 10, 64)
		if ea == nil && eb == nil && na != nb {
			return na < nb
		}
		return ca < cb
	}
	return len(a) < len(b)
}

// chunk returns the leading run of digits, or of non-digits, of s.
func chunk(s string) string {
	digit := s[0] >= '0' && s[0] <= '9'
	i := 1
	for i < len(s) && (s[i] >= '0' && s[i] <= '9') == digit {
		i++
	}
	return s[:i]
}

// ChildNoun names a child of tier in messages and usage: "host", "region",
// or "child" for any tier.
func ChildNoun(tier string) string {
	if tier == "" {
		return "child"
	}
	return tier
}

// FindParent returns the tier instance that has id as a child of tier
// (of any tier when tier is ""). Not found is an ErrNotFound naming the
// child; a name that is a child of another tier, or that more than one
// instance has, is ErrInvalid.
func FindParent(roots []*Instance, id, tier string) (*Instance, error) {
	noun := ChildNoun(tier)
	var parents []*Instance
	var otherTier []string
	var otherTiers []string
	searched := 0
	EachInstance(roots, func(n *Instance, _ *Child) {
		searched++
		if ch := n.FindChild(id); ch != nil {
			if tier == "" || ch.Tier == tier {
				parents = append(parents, n)
			} else {
				otherTier = append(otherTier, fmt.Sprintf("a %s child of %s/%s", ch.Tier, n.Tier, n.Instance))
				otherTiers = append(otherTiers, ch.Tier)
			}
		}
	})
	switch {
	case len(parents) == 1:
		return parents[0], nil
	case len(parents) > 1:
		var names []string
		for _, p := range parents {
			names = append(names, p.Tier+"/"+p.Instance)
		}
		return nil, fmt.Errorf("%s %q is a child of %d tier instances (%s); refusing to guess: %w", noun, id, len(parents), strings.Join(names, ", "), interfaces.ErrInvalid)
	case len(otherTier) > 0:
		cmd := "tier"
		if t := otherTiers[0]; t == interfaces.TierHost || t == interfaces.TierRegion {
			cmd = t
		}
		return nil, fmt.Errorf("%q is not a %s: it is %s (use 'strata %s drain|undrain %s'): %w", id, noun, strings.Join(otherTier, " and "), cmd, id, interfaces.ErrInvalid)
	}
	msg := fmt.Sprintf("%s %q: no tier instance has it as a child (searched %d instances)", noun, id, searched)
	if u := Unreachable(roots); len(u) > 0 {
		msg += "; it may be under an unreachable one: " + strings.Join(u, "; ")
	}
	return nil, fmt.Errorf("%s: %w", msg, interfaces.ErrNotFound)
}
