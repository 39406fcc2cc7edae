package instance

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/strata-sched/strata/interfaces"
)

// Instance is a fleet and the shards to place on it.
type Instance struct {
	// Resources are the named dimensions, cpu, mem, net and tasks first
	// (those present), then the others sorted.
	Resources []interfaces.Resource
	Hosts     []Host
	Shards    []Shard
}

// Host is one machine of the fleet.
type Host struct {
	ID     string
	Region string
	Rack   string
	State  interfaces.ChildState
	Labels map[string]string
	// Capacity is the capacity per resource (devices included, as
	// count × each).
	Capacity map[string]float64
	// Devices are the resources held as discrete devices.
	Devices map[string]Device
	// Line is where the host is defined in its file (0 when built in code).
	Line int
}

// Device is a resource held as Count devices of Each capacity (gpu: 8 × 1.0).
type Device struct {
	Count int     `json:"count"`
	Each  float64 `json:"each"`
}

// Shard is one shard to place.
type Shard struct {
	ID         string
	Job        string
	Load       map[string]float64
	StateBytes int64
	// Constraints.
	Pin          string
	Allowed      []string
	Region, Rack string
	Labels       map[string]string
	AntiAffinity string
	MaxPerHost   int
	// Current is the host the shard is on now ("" = unplaced).
	Current string
	Line    int
}

// Error is a decoding or validation error: the file, the line (0 when
// unknown), the field and the rule.
type Error struct {
	File  string
	Line  int
	Field string
	Rule  string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
		b.WriteString(": ")
	} else if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Rule)
	return b.String()
}

// Unwrap makes every instance error an interfaces.ErrInvalid.
func (e *Error) Unwrap() error { return interfaces.ErrInvalid }

// number checks that v is a finite number ≥ 0.
func number(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return fmt.Sprintf("must be a finite number ≥ 0 (got %v)", v)
	}
	return ""
}

// parseDevice reads "8x1.0" or "8×1.0" (count × per-device capacity).
func parseDevice(s string) (Device, string) {
	t := strings.ReplaceAll(strings.TrimSpace(s), "×", "x")
	cnt, each, ok := strings.Cut(t, "x")
	if !ok {
		return Device{}, fmt.Sprintf("must be count×capacity, e.g. 8x1.0 (got %q)", s)
	}
	n, err := strconv.Atoi(strings.TrimSpace(cnt))
	if err != nil || n < 0 {
		return Device{}, fmt.Sprintf("device count must be an integer ≥ 0 (got %q)", cnt)
	}
	e, err := strconv.ParseFloat(strings.TrimSpace(each), 64)
	if err != nil {
		return Device{}, fmt.Sprintf("device capacity must be a number (got %q)", each)
	}
	d := Device{Count: n, Each: e}
	return d, d.check()
}

func (d Device) check() string {
	if d.Count < 0 {
		return fmt.Sprintf("device count must be an integer ≥ 0 (got %d)", d.Count)
	}
	if why := number(d.Each); why != "" || d.Each == 0 {
		return fmt.Sprintf("per-device capacity must be a finite number > 0 (got %v)", d.Each)
	}
	return ""
}

// parseGroup reads "group" or "group:limit".
func parseGroup(s string) (string, int, string) {
	name, lim, ok := strings.Cut(s, ":")
	if !ok {
		return s, 0, ""
	}
	n, err := strconv.Atoi(lim)
	if err != nil || n < 1 {
		return "", 0, fmt.Sprintf("limit after ':' must be an integer ≥ 1 (got %q)", lim)
	}
	return name, n, ""
}

// check validates the instance as a whole and fills Resources and the hosts'
// device capacities: unique ids, resources that some host has, constraints
// naming hosts that exist. file names the file in errors.
func (in *Instance) check(file string, shardFile string) error {
	if len(in.Hosts) == 0 {
		return &Error{File: file, Field: "hosts", Rule: "must list at least one host"}
	}
	hostAt := make(map[string]int, len(in.Hosts))
	res := map[string]bool{}
	for i := range in.Hosts {
		h := &in.Hosts[i]
		fail := func(field, rule string) error {
			return &Error{File: file, Line: h.Line, Field: fmt.Sprintf("host %q: %s", h.ID, field), Rule: rule}
		}
		if err := interfaces.ValidateName("id", h.ID); err != nil {
			return &Error{File: file, Line: h.Line, Field: fmt.Sprintf("hosts[%d].id", i), Rule: err.Error()}
		}
		if j, dup := hostAt[h.ID]; dup {
			return fail("id", fmt.Sprintf("is repeated (first on line %d)", in.Hosts[j].Line))
		}
		hostAt[h.ID] = i
		if h.Capacity == nil {
			h.Capacity = map[string]float64{}
		}
		for r, v := range h.Capacity {
			if why := number(v); why != "" {
				return fail("capacity."+r, why)
			}
			res[r] = true
		}
		for r, d := range h.Devices {
			if why := d.check(); why != "" {
				return fail("devices."+r, why)
			}
			if _, both := h.Capacity[r]; both {
				return fail("devices."+r, "is also given as a capacity: give it once")
			}
			h.Capacity[r] = float64(d.Count) * d.Each
			res[r] = true
		}
		positive := false
		for _, v := range h.Capacity {
			positive = positive || v > 0
		}
		if !positive {
			return fail("capacity", "must be > 0 in at least one resource")
		}
	}
	in.Resources = orderResources(res)
	shardAt := make(map[string]int, len(in.Shards))
	for i := range in.Shards {
		s := &in.Shards[i]
		fail := func(field, rule string) error {
			return &Error{File: shardFile, Line: s.Line, Field: fmt.Sprintf("shard %q: %s", s.ID, field), Rule: rule}
		}
		if err := interfaces.ValidateShardID("id", s.ID); err != nil {
			return &Error{File: shardFile, Line: s.Line, Field: fmt.Sprintf("shards[%d].id", i), Rule: err.Error()}
		}
		if j, dup := shardAt[s.ID]; dup {
			return fail("id", fmt.Sprintf("is repeated (first on line %d)", in.Shards[j].Line))
		}
		shardAt[s.ID] = i
		if s.Job == "" {
			s.Job = "default"
		}
		if err := interfaces.ValidateName("job", s.Job); err != nil {
			return fail("job", err.Error())
		}
		for r, v := range s.Load {
			if why := number(v); why != "" {
				return fail("load."+r, why)
			}
			if !res[r] {
				return fail("load."+r, "no host has this resource (capacities: "+strings.Join(in.Resources, ", ")+")")
			}
		}
		if s.StateBytes < 0 {
			return fail("state_bytes", fmt.Sprintf("must be ≥ 0 (got %d)", s.StateBytes))
		}
		for _, ref := range append([]string{s.Pin, s.Current}, s.Allowed...) {
			if _, ok := hostAt[ref]; ref != "" && !ok {
				return fail("constraints", fmt.Sprintf("names host %q, which the instance does not have", ref))
			}
		}
		if s.Pin != "" && len(s.Allowed) > 0 && !slices.Contains(s.Allowed, s.Pin) {
			return fail("pin", "must be one of allowed")
		}
		if s.MaxPerHost < 0 || (s.MaxPerHost > 0 && s.AntiAffinity == "") {
			return fail("anti_affinity", "a limit needs a group name")
		}
	}
	return nil
}

// orderResources lists res: the built-in ones in their order, then the rest
// sorted.
func orderResources(res map[string]bool) []string {
	var out, extra []string
	for _, r := range interfaces.BuiltinResources {
		if res[r] {
			out = append(out, r)
		}
	}
	for r := range res {
		if !slices.Contains(interfaces.BuiltinResources, r) {
			extra = append(extra, r)
		}
	}
	sort.Strings(extra)
	return append(out, extra...)
}

// loadOf turns a per-resource map into an interfaces.Load.
func loadOf(m map[string]float64) interfaces.Load {
	var l interfaces.Load
	for _, r := range orderKeys(m) {
		l = l.With(r, m[r])
	}
	return l
}

func orderKeys(m map[string]float64) []string {
	set := make(map[string]bool, len(m))
	for k := range m {
		set[k] = true
	}
	return orderResources(set)
}

// View is the instance as a tier's view (tier "region" placing onto hosts):
// the hosts as children (labels region, rack and their own), the shards with
// their constraints (region and rack become label constraints), and the
// current placements as assignments.
func (in *Instance) View() *interfaces.View {
	v := &interfaces.View{Tier: interfaces.TierRegion, Instance: "instance"}
	v.Children = make([]interfaces.Child, len(in.Hosts))
	for i, h := range in.Hosts {
		labels := map[string]string{}
		for k, x := range h.Labels {
			labels[k] = x
		}
		if h.Region != "" {
			labels["region"] = h.Region
		}
		if h.Rack != "" {
			labels["rack"] = h.Rack
		}
		v.Children[i] = interfaces.Child{ID: interfaces.ChildID(h.ID), Tier: interfaces.TierHost,
			Capacity: loadOf(h.Capacity), Labels: labels, State: h.State}
	}
	v.Shards = make([]interfaces.Shard, len(in.Shards))
	for i, s := range in.Shards {
		sc := interfaces.ShardConstraints{Pinned: interfaces.ChildID(s.Pin), AntiAffinity: s.AntiAffinity, MaxPerChild: s.MaxPerHost}
		for _, a := range s.Allowed {
			sc.Allowed = append(sc.Allowed, interfaces.ChildID(a))
		}
		if len(s.Labels) > 0 || s.Region != "" || s.Rack != "" {
			sc.Labels = map[string]string{}
			for k, x := range s.Labels {
				sc.Labels[k] = x
			}
			if s.Region != "" {
				sc.Labels["region"] = s.Region
			}
			if s.Rack != "" {
				sc.Labels["rack"] = s.Rack
			}
		}
		v.Shards[i] = interfaces.Shard{ID: interfaces.ShardID(s.ID), Job: s.Job, Load: loadOf(s.Load), StateBytes: s.StateBytes, Constraints: sc}
		if s.Current != "" {
			v.Assignments = append(v.Assignments, interfaces.Assignment{Shard: interfaces.ShardID(s.ID), Child: interfaces.ChildID(s.Current)})
		}
	}
	return v
}

// DeviceOf returns, per host, the device layout of resource r (zero Device
// where the host holds r as a plain capacity or not at all).
func (in *Instance) DeviceOf(r string) []Device {
	out := make([]Device, len(in.Hosts))
	for i, h := range in.Hosts {
		out[i] = h.Devices[r]
	}
	return out
}
