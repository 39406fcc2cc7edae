package balancer

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/strata-sched/strata/interfaces"
)

// ViewOptions say how FromView turns a tier's view into a Problem.
type ViewOptions struct {
	// Resources to plan for; nil means every dimension (built-in or extra) that
	// some child has capacity for or some shard loads.
	Resources []interfaces.Resource
	// Headroom is the fraction of every capacity kept free, in [0, 1).
	Headroom float64
	// LocalityLabel is the child label whose value is the child's locality domain
	// (e.g. "zone"); "" disables the locality goal's distance term.
	LocalityLabel string
	// ShardDomains gives each shard's preferred domain (a value of LocalityLabel).
	ShardDomains map[interfaces.ShardID]string
	// DomainDist gives the cost between two domains, keyed "from/to"; missing
	// pairs cost 0 within a domain and 1 across.
	DomainDist map[string]float64
}

// FromView builds a Problem from a tier's view. It validates every child and
// shard (interfaces.ValidateChild / ValidateShard), resolves the references of
// assignments and in-flight moves (a missing shard or child there is an error
// wrapping interfaces.ErrNotFound: the state is inconsistent), applies in-flight
// moves as done and locks those shards, turns labels and allowed lists into
// allowed-children sets, and applies the tier constraints.
//
// Constraints are the one place a view may name children and shards it does
// not have — a job pinned to a region that does not exist (yet), a rule that
// outlived a deleted job or a departed child — and that never fails the view:
// a shard whose pin, or whose allowed list as a whole, names only children the
// view does not have may live on no child (Problem.Unresolved says why, and
// every solver reports it infeasible with that reason); an allowed list's
// missing children are left out of it; a tier rule's missing shards, and a
// capacity or avoid rule's missing children, are left out of the rule (as
// VerifyRules leaves them out). The tier constraints:
//
//   - capacity: the listed children's capacity becomes min(capacity, Limit) in
//     every dimension where Limit is above zero;
//   - pin: the listed shards are pinned to Children[0] (exactly one child);
//   - allowed: the listed shards may only use Children (intersected with their
//     own rules);
//   - anti_affinity: the listed shards form a group with at most Max (≥ 1) per
//     child;
//   - max_moves: the round's budget is Max moves and MaxBytes bytes (the smallest
//     budget wins; 0 means no limit on that part);
//   - avoid: the listed shards should not use Children (soft: locality goal).
func FromView(v *interfaces.View, opts ViewOptions) (*Problem, error) {
	if v == nil {
		return nil, invalid("view", "is required", nil)
	}
	p := &Problem{Headroom: opts.Headroom}
	childIdx := make(map[interfaces.ChildID]int32, len(v.Children))
	for i, ch := range v.Children {
		if err := interfaces.ValidateChild(ch); err != nil {
			return nil, fmt.Errorf("children[%d]: %w", i, err)
		}
		if _, dup := childIdx[ch.ID]; dup {
			return nil, invalid(fmt.Sprintf("children[%d].id", i), "must be unique", fmt.Sprintf("%q", ch.ID))
		}
		childIdx[ch.ID] = int32(i)
	}
	// Shards listed in strictly increasing ID order (what the daemons and the
	// simulator send) are unique by construction and are found by position or
	// binary search; any other order builds an index. Either way the first
	// invalid or repeated shard is the one reported.
	// ValidateShards reports the first invalid shard; the repeats before it
	// are looked for next, so that the first fault in order is reported
	// (at one shard, validity before uniqueness).
	bad, badErr := interfaces.ValidateShards(v.Shards)
	valid := v.Shards
	if badErr != nil {
		valid = v.Shards[:bad]
	}
	var shardIdx map[interfaces.ShardID]int32
	for i := range valid {
		id := valid[i].ID
		if shardIdx == nil {
			if i == 0 || valid[i-1].ID < id {
				continue
			}
			shardIdx = make(map[interfaces.ShardID]int32, len(v.Shards))
			for j := 0; j < i; j++ {
				shardIdx[valid[j].ID] = int32(j)
			}
		}
		if _, dup := shardIdx[id]; dup {
			return nil, invalid(fmt.Sprintf("shards[%d].id", i), "must be unique", fmt.Sprintf("%q", id))
		}
		shardIdx[id] = int32(i)
	}
	if badErr != nil {
		return nil, fmt.Errorf("shards[%d] (%q): %w", bad, v.Shards[bad].ID, badErr)
	}
	// lookChild and lookShard name the field as a format with one %d for i
	// (used as is when i < 0), formatted only for the error: views list a
	// million references.
	fieldName := func(format string, i int) string {
		if i < 0 {
			return format
		}
		return fmt.Sprintf(format, i)
	}
	lookChild := func(format string, i int, id interfaces.ChildID) (int32, error) {
		c, ok := childIdx[id]
		if !ok {
			return -1, notFound(fieldName(format, i), fmt.Sprintf("%q", id))
		}
		return c, nil
	}
	next := 0 // sorted views: where the previous reference pointed, plus one
	lookShard := func(format string, i int, id interfaces.ShardID) (int32, error) {
		s, ok := int32(-1), false
		switch {
		case shardIdx != nil:
			s, ok = shardIdx[id]
		case next < len(v.Shards) && v.Shards[next].ID == id:
			s, ok = int32(next), true
		default:
			i, found := slices.BinarySearchFunc(v.Shards, id, func(sh interfaces.Shard, id interfaces.ShardID) int {
				return strings.Compare(string(sh.ID), string(id))
			})
			s, ok = int32(i), found
		}
		if !ok {
			return -1, fmt.Errorf("%s: refers to a shard that does not exist (got %q): %w", fieldName(format, i), id, interfaces.ErrNotFound)
		}
		next = int(s) + 1
		return s, nil
	}

	// Resources.
	res := opts.Resources
	if res == nil {
		res = viewResources(v)
	}
	p.Resources = res
	R, M, N := len(res), len(v.Children), len(v.Shards)

	// Children.
	p.ChildIDs = make([]interfaces.ChildID, M)
	p.Capacity = make([]float64, M*R)
	p.ChildState = make([]interfaces.ChildState, M)
	for c, ch := range v.Children {
		p.ChildIDs[c] = ch.ID
		p.ChildState[c] = ch.State
		for r, name := range res {
			p.Capacity[c*R+r] = ch.Capacity.Get(name)
		}
	}

	// Shards.
	p.ShardIDs = make([]interfaces.ShardID, N)
	p.Load = make([]float64, N*R)
	p.StateBytes = make([]int64, N)
	p.Epoch = make([]interfaces.Epoch, N)
	p.Current = make([]int32, N)
	p.Pinned = make([]int32, N)
	allowed := make([][]int32, N)
	groupIdx := map[string]int32{}
	addGroup := func(name string, limit int) int32 {
		if limit <= 0 {
			limit = 1
		}
		g, ok := groupIdx[name]
		if !ok {
			g = int32(len(p.GroupLimit))
			groupIdx[name] = g
			p.GroupLimit = append(p.GroupLimit, int32(limit))
			p.GroupNames = append(p.GroupNames, name)
		} else if int32(limit) < p.GroupLimit[g] {
			p.GroupLimit[g] = int32(limit)
		}
		return g
	}
	var groups [][]int32
	// unresolve marks shard s as allowed nowhere, because a constraint of it
	// names a child this tier does not have (why says which): the shard is
	// infeasible, every other one is placed. The first reason is kept.
	var unresolved []string
	unresolve := func(s int, why string) {
		if unresolved == nil {
			unresolved = make([]string, N)
		}
		if unresolved[s] == "" {
			unresolved[s] = why
		}
		allowed[s] = []int32{}
	}
	// dim[r] is the built-in field res[r] names (0-3: CPU, Mem, Net, Tasks),
	// or -1 for an extra one: a million loads are read without a string switch.
	dim := make([]int, R)
	for r, name := range res {
		switch name {
		case interfaces.CPU:
			dim[r] = 0
		case interfaces.Mem:
			dim[r] = 1
		case interfaces.Net:
			dim[r] = 2
		case interfaces.Tasks:
			dim[r] = 3
		default:
			dim[r] = -1
		}
	}
	for s := range v.Shards {
		sh := &v.Shards[s]
		p.ShardIDs[s] = sh.ID
		l := &sh.Load
		for r, d := range dim {
			x := 0.0
			switch d {
			case 0:
				x = l.CPU
			case 1:
				x = l.Mem
			case 2:
				x = l.Net
			case 3:
				x = l.Tasks
			default:
				x = l.Get(res[r])
			}
			p.Load[s*R+r] = x
		}
		p.StateBytes[s] = sh.StateBytes
		p.Current[s] = -1
		p.Pinned[s] = -1
		sc := &sh.Constraints
		if sc.Pinned != "" {
			if c, ok := childIdx[sc.Pinned]; ok {
				p.Pinned[s] = c
			} else {
				unresolve(s, fmt.Sprintf("%s: the shard is pinned to %q, which is not a child of this tier", ConstraintPin, sc.Pinned))
			}
		}
		if len(sc.Allowed) > 0 {
			list := make([]int32, 0, len(sc.Allowed))
			for _, id := range sc.Allowed {
				if c, ok := childIdx[id]; ok {
					list = append(list, c)
				}
			}
			if len(list) == 0 {
				unresolve(s, fmt.Sprintf("%s: none of the shard's allowed children (%s) is a child of this tier", ConstraintAllowed, quoteChildren(sc.Allowed)))
			} else {
				allowed[s] = intersectAllowed(allowed[s], sortUnique(list))
			}
		}
		if len(sc.Labels) > 0 {
			var list []int32
			for c := range v.Children {
				if sc.MatchesLabels(&v.Children[c]) {
					list = append(list, int32(c))
				}
			}
			if list == nil {
				list = []int32{}
			}
			allowed[s] = intersectAllowed(allowed[s], list)
		}
		if sc.AntiAffinity != "" {
			if groups == nil {
				groups = make([][]int32, N)
			}
			groups[s] = append(groups[s], addGroup("shard:"+sc.AntiAffinity, sc.MaxPerChild))
		}
	}
	for i, a := range v.Assignments {
		s, err := lookShard("assignments[%d].shard", i, a.Shard)
		if err != nil {
			return nil, err
		}
		c, err := lookChild("assignments[%d].child", i, a.Child)
		if err != nil {
			return nil, err
		}
		if p.Current[s] >= 0 {
			return nil, invalid(fmt.Sprintf("assignments[%d]", i), "must hold at most one entry per shard", fmt.Sprintf("%q", a.Shard))
		}
		p.Current[s] = c
		p.Epoch[s] = a.Epoch
	}
	for i, m := range v.InFlight {
		s, err := lookShard("in_flight[%d].shard", i, m.Shard)
		if err != nil {
			return nil, err
		}
		c, err := lookChild("in_flight[%d].to", i, m.To)
		if err != nil {
			return nil, err
		}
		if p.Locked == nil {
			p.Locked = make([]bool, N)
		}
		if p.Locked[s] {
			return nil, invalid(fmt.Sprintf("in_flight[%d]", i), "must hold at most one move per shard", fmt.Sprintf("%q", m.Shard))
		}
		p.Current[s] = c
		p.Locked[s] = true
	}
	// A tier-level rule's shards and children that the view does not have are
	// left out of it (a rule outlives the shards and children it names: a job
	// deleted, a child gone or not joined yet), as Verify leaves them out; a
	// pin or allowed rule left with no child of this tier makes its shards
	// infeasible (unresolve), not the whole view.
	for i, k := range v.Constraints {
		field := fmt.Sprintf("constraints[%d] (%s)", i, k.Kind)
		var shards, children []int32
		for _, id := range k.Shards {
			if s, err := lookShard("", -1, id); err == nil {
				shards = append(shards, s)
			}
		}
		var missing []interfaces.ChildID
		for _, id := range k.Children {
			if c, ok := childIdx[id]; ok {
				children = append(children, c)
			} else {
				missing = append(missing, id)
			}
		}
		switch k.Kind {
		case interfaces.ConstraintCapacity:
			if err := interfaces.ValidateLoad(field+".limit", k.Limit); err != nil {
				return nil, err
			}
			for _, c := range children {
				for r, name := range res {
					if l := k.Limit.Get(name); l > 0 {
						p.Capacity[int(c)*R+r] = math.Min(p.Capacity[int(c)*R+r], l)
					}
				}
			}
		case interfaces.ConstraintPin:
			if len(k.Children) != 1 {
				return nil, invalid(field+".children", "must name exactly one child", len(k.Children))
			}
			for _, s := range shards {
				if len(children) == 1 {
					p.Pinned[s] = children[0]
				} else {
					unresolve(int(s), fmt.Sprintf("%s: the tier's %s pins the shard to %q, which is not a child of this tier", ConstraintPin, ruleWhy(k), k.Children[0]))
				}
			}
		case interfaces.ConstraintAllowed:
			if len(children) == 0 && len(missing) > 0 {
				for _, s := range shards {
					unresolve(int(s), fmt.Sprintf("%s: none of the children the tier's %s allows (%s) is a child of this tier", ConstraintAllowed, ruleWhy(k), quoteChildren(missing)))
				}
				break
			}
			list := sortUnique(append([]int32{}, children...))
			for _, s := range shards {
				allowed[s] = intersectAllowed(allowed[s], list)
			}
		case interfaces.ConstraintAntiAffinity:
			if k.Max < 0 {
				return nil, invalid(field+".max", "must be ≥ 0 (0 = 1)", k.Max)
			}
			if groups == nil {
				groups = make([][]int32, N)
			}
			g := addGroup(fmt.Sprintf("constraint:%d", i), k.Max)
			for _, s := range shards {
				groups[s] = append(groups[s], g)
			}
		case interfaces.ConstraintMaxMoves:
			if k.Max < 0 || k.MaxBytes < 0 {
				return nil, invalid(field, "max and max_bytes must be ≥ 0 (0 = unlimited)", fmt.Sprintf("%d, %d", k.Max, k.MaxBytes))
			}
			if k.Max > 0 && (p.MaxMoves == 0 || k.Max < p.MaxMoves) {
				p.MaxMoves = k.Max
			}
			if k.MaxBytes > 0 && (p.MaxBytes == 0 || k.MaxBytes < p.MaxBytes) {
				p.MaxBytes = k.MaxBytes
			}
		case interfaces.ConstraintAvoid:
			if p.Avoid == nil {
				p.Avoid = make([][]int32, N)
			}
			for _, s := range shards {
				p.Avoid[s] = sortUnique(append(p.Avoid[s], children...))
			}
		default:
			return nil, invalid(field+".kind", "must be a known constraint kind", int(k.Kind))
		}
	}
	for s := range allowed {
		if allowed[s] != nil {
			p.Allowed = allowed
			break
		}
	}
	p.Groups = groups
	p.Unresolved = unresolved
	if opts.LocalityLabel != "" {
		domIdx := map[string]int32{}
		dom := func(name string) int32 {
			d, ok := domIdx[name]
			if !ok {
				d = int32(len(p.DomainNames))
				domIdx[name] = d
				p.DomainNames = append(p.DomainNames, name)
			}
			return d
		}
		p.ChildDomain = make([]int32, M)
		for c, ch := range v.Children {
			p.ChildDomain[c] = -1
			if v, ok := ch.Labels[opts.LocalityLabel]; ok {
				p.ChildDomain[c] = dom(v)
			}
		}
		p.ShardDomain = make([]int32, N)
		for s := range p.ShardDomain {
			p.ShardDomain[s] = -1
		}
		ids := make([]string, 0, len(opts.ShardDomains))
		for id := range opts.ShardDomains {
			ids = append(ids, string(id))
		}
		sort.Strings(ids)
		for _, id := range ids {
			s, err := lookShard("shard_domains", -1, interfaces.ShardID(id))
			if err != nil {
				return nil, err
			}
			p.ShardDomain[s] = dom(opts.ShardDomains[interfaces.ShardID(id)])
		}
		if len(opts.DomainDist) > 0 {
			D := len(p.DomainNames)
			p.DomainDist = make([]float64, D*D)
			for i := 0; i < D; i++ {
				for j := 0; j < D; j++ {
					if i != j {
						p.DomainDist[i*D+j] = 1
					}
					if v, ok := opts.DomainDist[p.DomainNames[i]+"/"+p.DomainNames[j]]; ok {
						p.DomainDist[i*D+j] = v
					}
				}
			}
		}
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// quoteChildren lists ids quoted, comma-separated, for an explanation.
func quoteChildren(ids []interfaces.ChildID) string {
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", id)
	}
	return b.String()
}

func sortUnique(xs []int32) []int32 {
	sort.Slice(xs, func(i, j int) bool { return xs[i] < xs[j] })
	out := xs[:0]
	for i, x := range xs {
		if i == 0 || x != xs[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// intersectAllowed intersects two sorted allowed lists where nil means "any".
func intersectAllowed(a, b []int32) []int32 {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	out := []int32{}
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

// Assignment returns the result's assignment as contract values: one entry per
// placed shard, with the shard's epoch (incremented when the shard moved).
func (p *Problem) Assignment(assign []int32) []interfaces.Assignment {
	out := make([]interfaces.Assignment, 0, len(assign))
	for s, c := range assign {
		if c < 0 {
			continue
		}
		var e interfaces.Epoch
		if p.Epoch != nil {
			e = p.Epoch[s]
		}
		if c != p.Current[s] {
			e++
		}
		out = append(out, interfaces.Assignment{Shard: p.ShardIDs[s], Child: p.ChildIDs[c], Epoch: e})
	}
	return out
}

// viewResources is every dimension (built-in, then extra by name) that some
// child has capacity for or some shard loads; cpu when there is none. It reads
// every load once (views list a million shards).
func viewResources(v *interfaces.View) []interfaces.Resource {
	var builtin [4]bool // CPU, Mem, Net, Tasks: some load is above zero
	var extra map[string]bool
	see := func(l *interfaces.Load) {
		builtin[0] = builtin[0] || l.CPU > 0
		builtin[1] = builtin[1] || l.Mem > 0
		builtin[2] = builtin[2] || l.Net > 0
		builtin[3] = builtin[3] || l.Tasks > 0
		for k, x := range l.Extra {
			if extra == nil {
				extra = map[string]bool{}
			}
			extra[k] = extra[k] || x > 0
		}
	}
	for c := range v.Children {
		see(&v.Children[c].Capacity)
	}
	for s := range v.Shards {
		see(&v.Shards[s].Load)
	}
	// used is Get(r) > 0 for some load: a built-in name reads its field.
	used := func(r interfaces.Resource) bool {
		switch r {
		case interfaces.CPU:
			return builtin[0]
		case interfaces.Mem:
			return builtin[1]
		case interfaces.Net:
			return builtin[2]
		case interfaces.Tasks:
			return builtin[3]
		}
		return extra[r]
	}
	names := append([]interfaces.Resource(nil), interfaces.BuiltinResources...)
	names = append(names, slices.Sorted(maps.Keys(extra))...)
	var res []interfaces.Resource
	for _, r := range names {
		if used(r) {
			res = append(res, r)
		}
	}
	if len(res) == 0 {
		res = []interfaces.Resource{interfaces.CPU}
	}
	return res
}
