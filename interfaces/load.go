package interfaces

import (
	"math"
	"sort"
)

// Resource names a dimension of a load or capacity vector.
type Resource = string

// The built-in resource dimensions. Further dimensions may be used by name; they
// live in Load.Extra.
const (
	CPU   Resource = "cpu"   // cores
	Mem   Resource = "mem"   // bytes
	Net   Resource = "net"   // bytes per second
	Tasks Resource = "tasks" // count
)

// BuiltinResources lists the built-in dimensions in their canonical order.
var BuiltinResources = []Resource{CPU, Mem, Net, Tasks}

// Load is a per-resource demand (for a shard) or capacity (for a child).
//
// The four built-in dimensions are fields so that the hot paths of the balancer and
// the simulator do no map look-ups; further dimensions are kept by name in Extra.
// The zero Load is all zeros. Load values are treated as immutable: every
// arithmetic method returns a new Load and never aliases the receiver's Extra map.
type Load struct {
	CPU   float64
	Mem   float64
	Net   float64
	Tasks float64
	// Extra holds dimensions other than the built-in four, by name. Nil when empty.
	Extra map[string]float64
}

// Get returns the value of dimension r (0 when absent).
func (l Load) Get(r Resource) float64 {
	switch r {
	case CPU:
		return l.CPU
	case Mem:
		return l.Mem
	case Net:
		return l.Net
	case Tasks:
		return l.Tasks
	}
	return l.Extra[r]
}

// With returns a copy of l with dimension r set to v.
func (l Load) With(r Resource, v float64) Load {
	switch r {
	case CPU:
		l.CPU = v
	case Mem:
		l.Mem = v
	case Net:
		l.Net = v
	case Tasks:
		l.Tasks = v
	default:
		extra := make(map[string]float64, len(l.Extra)+1)
		for k, x := range l.Extra {
			extra[k] = x
		}
		extra[r] = v
		l.Extra = extra
	}
	return l
}

// Names returns the dimensions of l: the four built-in ones, then the names in Extra
// in sorted order.
func (l Load) Names() []Resource {
	names := append([]Resource(nil), BuiltinResources...)
	return append(names, l.extraNames()...)
}

func (l Load) extraNames() []string {
	if len(l.Extra) == 0 {
		return nil
	}
	names := make([]string, 0, len(l.Extra))
	for k := range l.Extra {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// UnionNames returns the dimensions present in any of ls: the four built-in ones,
// then every extra name, sorted.
func UnionNames(ls ...Load) []Resource {
	seen := map[string]bool{}
	for _, l := range ls {
		for k := range l.Extra {
			seen[k] = true
		}
	}
	extra := make([]string, 0, len(seen))
	for k := range seen {
		extra = append(extra, k)
	}
	sort.Strings(extra)
	return append(append([]Resource(nil), BuiltinResources...), extra...)
}

// zip applies f to every dimension present in a or b.
func zip(a, b Load, f func(x, y float64) float64) Load {
	out := Load{CPU: f(a.CPU, b.CPU), Mem: f(a.Mem, b.Mem), Net: f(a.Net, b.Net), Tasks: f(a.Tasks, b.Tasks)}
	if len(a.Extra) == 0 && len(b.Extra) == 0 {
		return out
	}
	out.Extra = make(map[string]float64, len(a.Extra)+len(b.Extra))
	for k, x := range a.Extra {
		out.Extra[k] = f(x, b.Extra[k])
	}
	for k, y := range b.Extra {
		if _, ok := a.Extra[k]; !ok {
			out.Extra[k] = f(0, y)
		}
	}
	return out
}

// Add returns l + o, dimension by dimension.
func (l Load) Add(o Load) Load { return zip(l, o, func(x, y float64) float64 { return x + y }) }

// Sub returns l - o, dimension by dimension.
func (l Load) Sub(o Load) Load { return zip(l, o, func(x, y float64) float64 { return x - y }) }

// Max returns the dimension-wise maximum of l and o.
func (l Load) Max(o Load) Load { return zip(l, o, math.Max) }

// Min returns the dimension-wise minimum of l and o.
func (l Load) Min(o Load) Load { return zip(l, o, math.Min) }

// Scale returns l with every dimension multiplied by f.
func (l Load) Scale(f float64) Load {
	return zip(l, Load{}, func(x, _ float64) float64 { return x * f })
}

// Capped returns l with every dimension at most MaxQuantity: for a sum of
// valid loads (a region's capacity or used load, the sum of its children's)
// that must itself be valid where it is sent.
func (l Load) Capped() Load {
	return zip(l, Load{}, func(x, _ float64) float64 { return math.Min(x, MaxQuantity) })
}

// Div returns l / capacity dimension by dimension: the utilization of a child whose
// capacity is c when it carries l. A dimension with zero capacity yields 0 when its
// load is 0 and +Inf otherwise (any demand on a resource the child lacks overflows).
func (l Load) Div(c Load) Load {
	return zip(l, c, func(x, y float64) float64 {
		if y == 0 {
			if x == 0 {
				return 0
			}
			return math.Inf(1)
		}
		return x / y
	})
}

// Fits reports whether l ≤ c in every dimension.
func (l Load) Fits(c Load) bool {
	if l.CPU > c.CPU || l.Mem > c.Mem || l.Net > c.Net || l.Tasks > c.Tasks {
		return false
	}
	for k, x := range l.Extra {
		if x > c.Extra[k] {
			return false
		}
	}
	return true
}

// IsZero reports whether every dimension of l is 0.
func (l Load) IsZero() bool {
	if l.CPU != 0 || l.Mem != 0 || l.Net != 0 || l.Tasks != 0 {
		return false
	}
	for _, x := range l.Extra {
		if x != 0 {
			return false
		}
	}
	return true
}

// MaxDim returns the name and value of l's largest dimension (the dominant share
// when l is a utilization). Ties go to the earlier dimension in Names order.
func (l Load) MaxDim() (Resource, float64) {
	best, bv := CPU, l.CPU
	for _, r := range []Resource{Mem, Net, Tasks} {
		if v := l.Get(r); v > bv {
			best, bv = r, v
		}
	}
	for _, k := range l.extraNames() {
		if v := l.Extra[k]; v > bv {
			best, bv = k, v
		}
	}
	return best, bv
}

// Equal reports whether l and o hold the same values in every dimension (a missing
// extra dimension equals 0).
func (l Load) Equal(o Load) bool {
	if l.CPU != o.CPU || l.Mem != o.Mem || l.Net != o.Net || l.Tasks != o.Tasks {
		return false
	}
	for k, x := range l.Extra {
		if o.Extra[k] != x {
			return false
		}
	}
	for k, y := range o.Extra {
		if l.Extra[k] != y {
			return false
		}
	}
	return true
}

// Sum adds up ls.
func Sum(ls ...Load) Load {
	var out Load
	for _, l := range ls {
		out = out.Add(l)
	}
	return out
}

// WithMeasured returns l with each of CPU, Mem and Net that m measured (> 0) in
// place of the declared value; what m does not measure keeps l's value. It is
// how a tier weighs a shard by what its owner reported.
func (l Load) WithMeasured(m Load) Load {
	if m.CPU > 0 {
		l.CPU = m.CPU
	}
	if m.Mem > 0 {
		l.Mem = m.Mem
	}
	if m.Net > 0 {
		l.Net = m.Net
	}
	return l
}
