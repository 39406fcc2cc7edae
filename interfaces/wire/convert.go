package wire

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// This file holds every conversion between the wire messages and the domain types of
// package interfaces. See the package documentation for the canonical form.
//
// XxxToWire translates faithfully and does not validate. XxxFromWire validates and
// returns an *interfaces.FieldError (wrapping interfaces.ErrInvalid) that names the
// field by its path from the converted message; a nil message reads as empty.
//
// Paths cost nothing unless something is wrong: each FromWire names fields from its
// own root as constants ("shard.load.cpu"), and a caller converting a nested element
// re-roots the error only when there is one ("view.shards[3].load.cpu").

// fieldErr builds the validation error for field.
func fieldErr(field, rule string, value any) error {
	v := ""
	if value != nil {
		v = fmt.Sprintf("%v", value)
	}
	return &interfaces.FieldError{Field: field, Rule: rule, Value: v}
}

// reroot rewrites the field path of a validation error from interfaces (which names
// fields from root, e.g. "shard.load.cpu") to start at prefix instead (e.g.
// "view.shards[2].load.cpu"). Other errors are returned as they are.
func reroot(err error, root, prefix string) error {
	var fe *interfaces.FieldError
	if err == nil || root == prefix || !errors.As(err, &fe) {
		return err
	}
	if fe.Field != root && !strings.HasPrefix(fe.Field, root+".") && !strings.HasPrefix(fe.Field, root+"[") {
		return err
	}
	out := *fe
	out.Field = prefix + fe.Field[len(root):]
	return &out
}

// checkNonNeg checks that v is a finite number ≥ 0.
func checkNonNeg(field string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fieldErr(field, "must be a finite number", v)
	}
	if v < 0 {
		return fieldErr(field, "must be ≥ 0", v)
	}
	return nil
}

// checkNotNaN checks that v is a number; infinities are allowed (a ratio to a zero
// bound is +Inf).
func checkNotNaN(field string, v float64) error {
	if math.IsNaN(v) {
		return fieldErr(field, "must be a number, not NaN", v)
	}
	return nil
}

// checkNonNegInt checks an integer field and converts it to int.
func checkNonNegInt(field string, v int64) (int, error) {
	if v < 0 {
		return 0, fieldErr(field, "must be ≥ 0", v)
	}
	if int64(int(v)) != v {
		return 0, fieldErr(field, "is too large", v)
	}
	return int(v), nil
}

// checkOptionalID checks an identifier that may be empty.
func checkOptionalID(field, id string) error {
	if id == "" {
		return nil
	}
	return interfaces.ValidateID(field, id)
}

// durationFromWire reads a non-negative duration in nanoseconds.
func durationFromWire(field string, n int64) (time.Duration, error) {
	if n < 0 {
		return 0, fieldErr(field, "must be ≥ 0", n)
	}
	if n > int64(MaxLatency) {
		return 0, fieldErr(field, "must be at most 24h", time.Duration(n))
	}
	return time.Duration(n), nil
}

// MaxLatency bounds a reported latency: no measurement window comes near it,
// and a value near the int64 limit would wrap when smoothed in floating point
// and read as "no latency" (the worst p99 hidden as the best).
const MaxLatency = 24 * time.Hour

// ids converts between string-like identifier slices; empty gives nil.
func ids[To, From ~string](in []From) []To {
	if len(in) == 0 {
		return nil
	}
	out := make([]To, len(in))
	for i, x := range in {
		out[i] = To(x)
	}
	return out
}

// checkIDs validates every identifier of a list.
func checkIDs[T ~string](field string, in []T) error {
	for i, id := range in {
		if err := interfaces.ValidateID(field, string(id)); err != nil {
			return reroot(err, field, fmt.Sprintf("%s[%d]", field, i))
		}
	}
	return nil
}

// copyMap copies m with keys and values converted; empty gives nil.
func copyMap[K2, K1 ~string, V any](m map[K1]V) map[K2]V {
	if len(m) == 0 {
		return nil
	}
	out := make(map[K2]V, len(m))
	for k, v := range m {
		out[K2(k)] = v
	}
	return out
}

// ---- Load ----

// LoadToWire converts a load vector.
func LoadToWire(l interfaces.Load) *Load {
	return &Load{Cpu: l.CPU, Mem: l.Mem, Net: l.Net, Tasks: l.Tasks, Extra: copyMap[string](l.Extra)}
}

// decodeLoad converts a wire load without validating it.
func decodeLoad(m *Load) interfaces.Load {
	return interfaces.Load{CPU: m.GetCpu(), Mem: m.GetMem(), Net: m.GetNet(), Tasks: m.GetTasks(), Extra: copyMap[string](m.GetExtra())}
}

// LoadFromWire converts and validates a load vector: every dimension finite and
// ≥ 0, extra names non-empty and not a built-in name (interfaces.ValidateLoad).
func LoadFromWire(m *Load) (interfaces.Load, error) {
	return loadFromWire("load", m)
}

func loadFromWire(field string, m *Load) (interfaces.Load, error) {
	l := decodeLoad(m)
	if err := interfaces.ValidateLoad(field, l); err != nil {
		return interfaces.Load{}, err
	}
	return l, nil
}

// signedLoadFromWire converts a load that may be negative in a dimension (a
// headroom): every dimension must still be finite.
func signedLoadFromWire(field string, m *Load) (interfaces.Load, error) {
	l := decodeLoad(m)
	for _, r := range interfaces.BuiltinResources {
		if v := l.Get(r); math.IsNaN(v) || math.IsInf(v, 0) {
			return interfaces.Load{}, fieldErr(field+"."+r, "must be a finite number", v)
		} else if math.Abs(v) > interfaces.MaxQuantity {
			return interfaces.Load{}, fieldErr(field+"."+r, "must be within ±1e24", v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(l.Extra)) {
		switch k {
		case "":
			return interfaces.Load{}, fieldErr(field, "extra dimension names must not be empty", nil)
		case interfaces.CPU, interfaces.Mem, interfaces.Net, interfaces.Tasks:
			return interfaces.Load{}, fieldErr(field+"."+k, "is a built-in dimension and must not be set as extra", nil)
		}
		if v := l.Extra[k]; math.IsNaN(v) || math.IsInf(v, 0) {
			return interfaces.Load{}, fieldErr(field+"."+k, "must be a finite number", v)
		} else if math.Abs(v) > interfaces.MaxQuantity {
			return interfaces.Load{}, fieldErr(field+"."+k, "must be within ±1e24", v)
		}
	}
	return l, nil
}

// ---- Enums ----
//
// The wire enums use the numbers of the Go constants. A wire value is checked
// against the names the schema declares before it is narrowed to the Go type, so a
// large number cannot wrap around into a valid one.

func enumNames(names map[int32]string, prefix string) string {
	nums := make([]int, 0, len(names))
	for n := range names {
		nums = append(nums, int(n))
	}
	sort.Ints(nums)
	out := make([]string, len(nums))
	for i, n := range nums {
		out[i] = strings.ToLower(strings.TrimPrefix(names[int32(n)], prefix))
	}
	return "must be one of " + strings.Join(out, ", ")
}

// ChildStateFromWire converts a child state, failing for a value the schema does
// not declare.
func ChildStateFromWire(field string, s ChildState) (interfaces.ChildState, error) {
	if _, ok := ChildState_name[int32(s)]; !ok {
		return 0, fieldErr(field, enumNames(ChildState_name, "CHILD_STATE_"), int32(s))
	}
	return interfaces.ChildState(s), nil
}

// HintKindFromWire converts a hint kind, failing for a value the schema does not
// declare.
func HintKindFromWire(field string, k HintKind) (interfaces.HintKind, error) {
	if _, ok := HintKind_name[int32(k)]; !ok {
		return 0, fieldErr(field, enumNames(HintKind_name, "HINT_KIND_"), int32(k))
	}
	return interfaces.HintKind(k), nil
}

// ConstraintKindFromWire converts a constraint kind, failing for a value the schema
// does not declare.
func ConstraintKindFromWire(field string, k ConstraintKind) (interfaces.ConstraintKind, error) {
	if _, ok := ConstraintKind_name[int32(k)]; !ok {
		return 0, fieldErr(field, enumNames(ConstraintKind_name, "CONSTRAINT_KIND_"), int32(k))
	}
	return interfaces.ConstraintKind(k), nil
}

// StatusFromWire converts a plan status, failing for a value the schema does not
// declare.
func StatusFromWire(field string, s PlanStatus) (interfaces.Status, error) {
	if _, ok := PlanStatus_name[int32(s)]; !ok {
		return 0, fieldErr(field, enumNames(PlanStatus_name, "PLAN_STATUS_"), int32(s))
	}
	return interfaces.Status(s), nil
}

// ---- Shard ----

// ShardToWire converts a shard spec.
func ShardToWire(s interfaces.Shard) *Shard {
	c := s.Constraints
	return &Shard{
		Id:              string(s.ID),
		Job:             s.Job,
		Load:            LoadToWire(s.Load),
		InputRate:       s.InputRate,
		StateBytes:      s.StateBytes,
		LatencySloNanos: int64(s.LatencySLO),
		Constraints: &ShardConstraints{
			Pinned:       string(c.Pinned),
			Allowed:      ids[string](c.Allowed),
			Labels:       copyMap[string](c.Labels),
			AntiAffinity: c.AntiAffinity,
			MaxPerChild:  int64(c.MaxPerChild),
		},
	}
}

// ShardFromWire converts and validates a shard spec (interfaces.ValidateShard).
func ShardFromWire(m *Shard) (interfaces.Shard, error) {
	const field = "shard"
	c := m.GetConstraints()
	maxPer, err := checkNonNegInt(field+".constraints.max_per_child", c.GetMaxPerChild())
	if err != nil {
		return interfaces.Shard{}, err
	}
	s := interfaces.Shard{
		ID:         interfaces.ShardID(m.GetId()),
		Job:        m.GetJob(),
		Load:       decodeLoad(m.GetLoad()),
		InputRate:  m.GetInputRate(),
		StateBytes: m.GetStateBytes(),
		LatencySLO: time.Duration(m.GetLatencySloNanos()),
		Constraints: interfaces.ShardConstraints{
			Pinned:       interfaces.ChildID(c.GetPinned()),
			Allowed:      ids[interfaces.ChildID](c.GetAllowed()),
			Labels:       copyMap[string](c.GetLabels()),
			AntiAffinity: c.GetAntiAffinity(),
			MaxPerChild:  maxPer,
		},
	}
	if err := interfaces.ValidateShard(s); err != nil {
		return interfaces.Shard{}, err
	}
	return s, nil
}

// ---- Child ----

// ChildToWire converts a child spec.
func ChildToWire(c interfaces.Child) *Child {
	return &Child{
		Id:       string(c.ID),
		Tier:     c.Tier,
		Capacity: LoadToWire(c.Capacity),
		Labels:   copyMap[string](c.Labels),
		State:    ChildState(c.State),
	}
}

// ChildFromWire converts and validates a child spec (interfaces.ValidateChild).
func ChildFromWire(m *Child) (interfaces.Child, error) {
	const field = "child"
	st, err := ChildStateFromWire(field+".state", m.GetState())
	if err != nil {
		return interfaces.Child{}, err
	}
	c := interfaces.Child{
		ID:       interfaces.ChildID(m.GetId()),
		Tier:     m.GetTier(),
		Capacity: decodeLoad(m.GetCapacity()),
		Labels:   copyMap[string](m.GetLabels()),
		State:    st,
	}
	if err := interfaces.ValidateChild(c); err != nil {
		return interfaces.Child{}, err
	}
	return c, nil
}

// ---- Assignment ----

// AssignmentToWire converts an assignment.
func AssignmentToWire(a interfaces.Assignment) *Assignment {
	return &Assignment{Shard: string(a.Shard), Child: string(a.Child), Epoch: uint64(a.Epoch)}
}

// AssignmentFromWire converts and validates an assignment: shard and child are
// required identifiers.
func AssignmentFromWire(m *Assignment) (interfaces.Assignment, error) {
	const field = "assignment"
	if err := interfaces.ValidateID(field+".shard", m.GetShard()); err != nil {
		return interfaces.Assignment{}, err
	}
	if err := interfaces.ValidateID(field+".child", m.GetChild()); err != nil {
		return interfaces.Assignment{}, err
	}
	return interfaces.Assignment{
		Shard: interfaces.ShardID(m.GetShard()),
		Child: interfaces.ChildID(m.GetChild()),
		Epoch: interfaces.Epoch(m.GetEpoch()),
	}, nil
}

// ---- Move ----

// MoveToWire converts a move.
func MoveToWire(mv interfaces.Move) *Move {
	return &Move{
		Shard:  string(mv.Shard),
		From:   string(mv.From),
		To:     string(mv.To),
		Epoch:  uint64(mv.Epoch),
		Reason: mv.Reason,
		Goal:   mv.Goal,
		Delta:  mv.Delta,
	}
}

// MoveFromWire converts and validates a move: shard and to are required
// identifiers, from is empty (a first placement) or an identifier other than to,
// delta is a finite number, and reason and goal are at most interfaces.MaxTextLen
// bytes: a move a tier could not commit is refused here, as malformed.
func MoveFromWire(m *Move) (interfaces.Move, error) {
	const field = "move"
	if err := interfaces.ValidateID(field+".shard", m.GetShard()); err != nil {
		return interfaces.Move{}, err
	}
	if err := checkOptionalID(field+".from", m.GetFrom()); err != nil {
		return interfaces.Move{}, err
	}
	if err := interfaces.ValidateID(field+".to", m.GetTo()); err != nil {
		return interfaces.Move{}, err
	}
	if m.GetFrom() == m.GetTo() {
		return interfaces.Move{}, fieldErr(field+".to", "must differ from "+field+".from", m.GetTo())
	}
	mv := interfaces.Move{
		Shard:  interfaces.ShardID(m.GetShard()),
		From:   interfaces.ChildID(m.GetFrom()),
		To:     interfaces.ChildID(m.GetTo()),
		Epoch:  interfaces.Epoch(m.GetEpoch()),
		Reason: m.GetReason(),
		Goal:   m.GetGoal(),
		Delta:  m.GetDelta(),
	}
	if err := interfaces.ValidateMoveFields(field, mv); err != nil {
		return interfaces.Move{}, err
	}
	return mv, nil
}

func movesToWire(in []interfaces.Move) []*Move {
	if len(in) == 0 {
		return nil
	}
	out := make([]*Move, len(in))
	for i, mv := range in {
		out[i] = MoveToWire(mv)
	}
	return out
}

func movesFromWire(field string, in []*Move) ([]interfaces.Move, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]interfaces.Move, len(in))
	for i, m := range in {
		mv, err := MoveFromWire(m)
		if err != nil {
			return nil, reroot(err, "move", fmt.Sprintf("%s[%d]", field, i))
		}
		out[i] = mv
	}
	return out, nil
}

// ---- Plan, Infeasible, Summary ----

// InfeasibleToWire converts the explanation of an unplaceable shard.
func InfeasibleToWire(inf interfaces.Infeasible) *Infeasible {
	return &Infeasible{Shard: string(inf.Shard), Excluded: copyMap[string](inf.Excluded)}
}

// InfeasibleFromWire converts and validates the explanation of an unplaceable
// shard: shard and every excluded child are identifiers.
func InfeasibleFromWire(m *Infeasible) (interfaces.Infeasible, error) {
	const field = "infeasible"
	if err := interfaces.ValidateID(field+".shard", m.GetShard()); err != nil {
		return interfaces.Infeasible{}, err
	}
	for _, k := range slices.Sorted(maps.Keys(m.GetExcluded())) {
		if err := interfaces.ValidateID(field+".excluded", k); err != nil {
			return interfaces.Infeasible{}, err
		}
	}
	return interfaces.Infeasible{
		Shard:    interfaces.ShardID(m.GetShard()),
		Excluded: copyMap[interfaces.ChildID](m.GetExcluded()),
	}, nil
}

// SummaryToWire converts the quality summary of a placement.
func SummaryToWire(s interfaces.Summary) *Summary {
	return &Summary{
		MaxOverMean:  copyMap[string](s.MaxOverMean),
		MaxOverLb:    copyMap[string](s.MaxOverLB),
		Lb:           copyMap[string](s.LB),
		Moves:        int64(s.Moves),
		BytesMoved:   s.BytesMoved,
		SolveSeconds: s.SolveSeconds,
		Objective:    s.Objective,
	}
}

func resourceMapFromWire(field string, m map[string]float64) (map[interfaces.Resource]float64, error) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if k == "" {
			return nil, fieldErr(field, "resource names must not be empty", nil)
		}
		if err := checkNotNaN(field+"."+k, m[k]); err != nil {
			return nil, err
		}
	}
	return copyMap[interfaces.Resource](m), nil
}

// SummaryFromWire converts and validates a quality summary: per-resource values are
// numbers (±Inf allowed, NaN not) under non-empty names, counts and solve time ≥ 0.
func SummaryFromWire(m *Summary) (interfaces.Summary, error) {
	const field = "summary"
	var s interfaces.Summary
	var err error
	if s.MaxOverMean, err = resourceMapFromWire(field+".max_over_mean", m.GetMaxOverMean()); err != nil {
		return interfaces.Summary{}, err
	}
	if s.MaxOverLB, err = resourceMapFromWire(field+".max_over_lb", m.GetMaxOverLb()); err != nil {
		return interfaces.Summary{}, err
	}
	if s.LB, err = resourceMapFromWire(field+".lb", m.GetLb()); err != nil {
		return interfaces.Summary{}, err
	}
	if s.Moves, err = checkNonNegInt(field+".moves", m.GetMoves()); err != nil {
		return interfaces.Summary{}, err
	}
	if m.GetBytesMoved() < 0 {
		return interfaces.Summary{}, fieldErr(field+".bytes_moved", "must be ≥ 0", m.GetBytesMoved())
	}
	s.BytesMoved = m.GetBytesMoved()
	if err := checkNonNeg(field+".solve_seconds", m.GetSolveSeconds()); err != nil {
		return interfaces.Summary{}, err
	}
	s.SolveSeconds = m.GetSolveSeconds()
	if err := checkNotNaN(field+".objective", m.GetObjective()); err != nil {
		return interfaces.Summary{}, err
	}
	s.Objective = m.GetObjective()
	return s, nil
}

// PlanToWire converts a plan.
func PlanToWire(p interfaces.Plan) *Plan {
	m := &Plan{
		Tier:    p.Tier,
		Status:  PlanStatus(p.Status),
		Moves:   movesToWire(p.Moves),
		Summary: SummaryToWire(p.Summary),
	}
	if len(p.Infeasible) > 0 {
		m.Infeasible = make([]*Infeasible, len(p.Infeasible))
		for i, inf := range p.Infeasible {
			m.Infeasible[i] = InfeasibleToWire(inf)
		}
	}
	return m
}

// PlanFromWire converts and validates a plan: a declared status, valid moves,
// infeasible entries and summary.
func PlanFromWire(m *Plan) (interfaces.Plan, error) {
	const field = "plan"
	st, err := StatusFromWire(field+".status", m.GetStatus())
	if err != nil {
		return interfaces.Plan{}, err
	}
	p := interfaces.Plan{Tier: m.GetTier(), Status: st}
	if p.Moves, err = movesFromWire(field+".moves", m.GetMoves()); err != nil {
		return interfaces.Plan{}, err
	}
	if n := len(m.GetInfeasible()); n > 0 {
		p.Infeasible = make([]interfaces.Infeasible, n)
		for i, x := range m.GetInfeasible() {
			if p.Infeasible[i], err = InfeasibleFromWire(x); err != nil {
				return interfaces.Plan{}, reroot(err, "infeasible", fmt.Sprintf("%s.infeasible[%d]", field, i))
			}
		}
	}
	if p.Summary, err = SummaryFromWire(m.GetSummary()); err != nil {
		return interfaces.Plan{}, reroot(err, "summary", field+".summary")
	}
	return p, nil
}

// ---- Constraint ----

// ConstraintToWire converts a tier-level constraint.
func ConstraintToWire(c interfaces.Constraint) *Constraint {
	return &Constraint{
		Kind:     ConstraintKind(c.Kind),
		Shards:   ids[string](c.Shards),
		Children: ids[string](c.Children),
		Limit:    LoadToWire(c.Limit),
		Max:      int64(c.Max),
		MaxBytes: c.MaxBytes,
		Reason:   c.Reason,
	}
}

// ConstraintFromWire converts and validates a tier-level constraint: a declared
// kind, identifiers for shards and children, a valid limit, max and max_bytes ≥ 0,
// and at least one child for a pin.
func ConstraintFromWire(m *Constraint) (interfaces.Constraint, error) {
	const field = "constraint"
	kind, err := ConstraintKindFromWire(field+".kind", m.GetKind())
	if err != nil {
		return interfaces.Constraint{}, err
	}
	if err := checkIDs(field+".shards", m.GetShards()); err != nil {
		return interfaces.Constraint{}, err
	}
	if err := checkIDs(field+".children", m.GetChildren()); err != nil {
		return interfaces.Constraint{}, err
	}
	if kind == interfaces.ConstraintPin && len(m.GetChildren()) == 0 {
		return interfaces.Constraint{}, fieldErr(field+".children", "must name the child to pin to", nil)
	}
	limit, err := loadFromWire(field+".limit", m.GetLimit())
	if err != nil {
		return interfaces.Constraint{}, err
	}
	maxN, err := checkNonNegInt(field+".max", m.GetMax())
	if err != nil {
		return interfaces.Constraint{}, err
	}
	if m.GetMaxBytes() < 0 {
		return interfaces.Constraint{}, fieldErr(field+".max_bytes", "must be ≥ 0", m.GetMaxBytes())
	}
	return interfaces.Constraint{
		Kind:     kind,
		Shards:   ids[interfaces.ShardID](m.GetShards()),
		Children: ids[interfaces.ChildID](m.GetChildren()),
		Limit:    limit,
		Max:      maxN,
		MaxBytes: m.GetMaxBytes(),
		Reason:   m.GetReason(),
	}, nil
}

func constraintsToWire(in []interfaces.Constraint) []*Constraint {
	if len(in) == 0 {
		return nil
	}
	out := make([]*Constraint, len(in))
	for i, c := range in {
		out[i] = ConstraintToWire(c)
	}
	return out
}

func constraintsFromWire(field string, in []*Constraint) ([]interfaces.Constraint, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]interfaces.Constraint, len(in))
	for i, m := range in {
		c, err := ConstraintFromWire(m)
		if err != nil {
			return nil, reroot(err, "constraint", fmt.Sprintf("%s[%d]", field, i))
		}
		out[i] = c
	}
	return out, nil
}

// ---- Hint ----

// HintToWire converts a hint. The constraint is absent exactly when h.Constraint
// is nil.
func HintToWire(h interfaces.Hint) *Hint {
	m := &Hint{
		Kind:   HintKind(h.Kind),
		Amount: LoadToWire(h.Amount),
		Shards: ids[string](h.Shards),
		Reason: h.Reason,
	}
	if h.Constraint != nil {
		m.Constraint = ConstraintToWire(*h.Constraint)
	}
	return m
}

// HintFromWire converts and validates a hint: a declared kind, a valid amount,
// shard identifiers, a valid constraint when present, and a constraint present for
// kind constraint.
func HintFromWire(m *Hint) (interfaces.Hint, error) {
	const field = "hint"
	kind, err := HintKindFromWire(field+".kind", m.GetKind())
	if err != nil {
		return interfaces.Hint{}, err
	}
	amount, err := loadFromWire(field+".amount", m.GetAmount())
	if err != nil {
		return interfaces.Hint{}, err
	}
	if err := checkIDs(field+".shards", m.GetShards()); err != nil {
		return interfaces.Hint{}, err
	}
	h := interfaces.Hint{Kind: kind, Amount: amount, Shards: ids[interfaces.ShardID](m.GetShards()), Reason: m.GetReason()}
	if m.GetConstraint() != nil {
		c, err := ConstraintFromWire(m.GetConstraint())
		if err != nil {
			return interfaces.Hint{}, reroot(err, "constraint", field+".constraint")
		}
		h.Constraint = &c
	} else if kind == interfaces.HintConstraint {
		return interfaces.Hint{}, fieldErr(field+".constraint", "is required for a hint of kind constraint", nil)
	}
	return h, nil
}

// ---- ShardLoad, Report ----

// ShardLoadToWire converts one shard's measured load.
func ShardLoadToWire(s interfaces.ShardLoad) *ShardLoad {
	return &ShardLoad{
		Shard:           string(s.Shard),
		Load:            LoadToWire(s.Load),
		Rate:            s.Rate,
		InputRate:       s.InputRate,
		LatencyP99Nanos: int64(s.LatencyP99),
		Lag:             s.Lag,
	}
}

// ShardLoadFromWire converts and validates one shard's measured load.
func ShardLoadFromWire(m *ShardLoad) (interfaces.ShardLoad, error) {
	const field = "shard_load"
	if err := interfaces.ValidateID(field+".shard", m.GetShard()); err != nil {
		return interfaces.ShardLoad{}, err
	}
	l, err := loadFromWire(field+".load", m.GetLoad())
	if err != nil {
		return interfaces.ShardLoad{}, err
	}
	if err := checkNonNeg(field+".rate", m.GetRate()); err != nil {
		return interfaces.ShardLoad{}, err
	}
	if err := checkNonNeg(field+".input_rate", m.GetInputRate()); err != nil {
		return interfaces.ShardLoad{}, err
	}
	p99, err := durationFromWire(field+".latency_p99", m.GetLatencyP99Nanos())
	if err != nil {
		return interfaces.ShardLoad{}, err
	}
	if err := checkNonNeg(field+".lag", m.GetLag()); err != nil {
		return interfaces.ShardLoad{}, err
	}
	return interfaces.ShardLoad{
		Shard:      interfaces.ShardID(m.GetShard()),
		Load:       l,
		Rate:       m.GetRate(),
		InputRate:  m.GetInputRate(),
		LatencyP99: p99,
		Lag:        m.GetLag(),
	}, nil
}

// ReportToWire converts a child's report.
func ReportToWire(r interfaces.Report) *Report {
	m := &Report{
		Child:           string(r.Child),
		Epoch:           r.Epoch,
		Capacity:        LoadToWire(r.Capacity),
		Used:            LoadToWire(r.Used),
		Headroom:        LoadToWire(r.Headroom),
		LatencyP50Nanos: int64(r.LatencyP50),
		LatencyP99Nanos: int64(r.LatencyP99),
		Throughput:      r.Throughput,
	}
	if len(r.Shards) > 0 {
		m.Shards = make([]*ShardLoad, len(r.Shards))
		for i, s := range r.Shards {
			m.Shards[i] = ShardLoadToWire(s)
		}
	}
	if len(r.Hints) > 0 {
		m.Hints = make([]*Hint, len(r.Hints))
		for i, h := range r.Hints {
			m.Hints[i] = HintToWire(h)
		}
	}
	if sh := r.Shape; sh != nil {
		m.Shape = &CapacityShape{Largest: LoadToWire(sh.Largest)}
		for _, k := range sh.Classes {
			m.Shape.Classes = append(m.Shape.Classes, &HostClass{Capacity: LoadToWire(k.Capacity), Count: uint32(k.Count)})
		}
	}
	return m
}

// shapeFromWire converts and validates a report's capacity shape: valid
// loads, each class counted at least once, at most MaxShapeClasses classes.
func shapeFromWire(field string, m *CapacityShape) (*interfaces.CapacityShape, error) {
	if m == nil {
		return nil, nil
	}
	sh := &interfaces.CapacityShape{}
	var err error
	if sh.Largest, err = loadFromWire(field+".largest", m.GetLargest()); err != nil {
		return nil, err
	}
	if n := len(m.GetClasses()); n > interfaces.MaxShapeClasses {
		return nil, fieldErr(field+".classes", fmt.Sprintf("must have at most %d entries", interfaces.MaxShapeClasses), n)
	}
	for i, k := range m.GetClasses() {
		f := fmt.Sprintf("%s.classes[%d]", field, i)
		c, err := loadFromWire(f+".capacity", k.GetCapacity())
		if err != nil {
			return nil, err
		}
		if k.GetCount() == 0 {
			return nil, fieldErr(f+".count", "must be ≥ 1", k.GetCount())
		}
		sh.Classes = append(sh.Classes, interfaces.HostClass{Capacity: c, Count: int(k.GetCount())})
	}
	return sh, nil
}

// ReportFromWire converts and validates a child's report: child is an identifier,
// capacity and used are valid loads, headroom is finite (it may be negative when
// the child is overloaded), latencies and throughput ≥ 0, and every shard load and
// hint is valid.
func ReportFromWire(m *Report) (interfaces.Report, error) {
	const field = "report"
	if err := interfaces.ValidateID(field+".child", m.GetChild()); err != nil {
		return interfaces.Report{}, err
	}
	r := interfaces.Report{Child: interfaces.ChildID(m.GetChild()), Epoch: m.GetEpoch()}
	var err error
	if r.Capacity, err = loadFromWire(field+".capacity", m.GetCapacity()); err != nil {
		return interfaces.Report{}, err
	}
	if r.Used, err = loadFromWire(field+".used", m.GetUsed()); err != nil {
		return interfaces.Report{}, err
	}
	if r.Headroom, err = signedLoadFromWire(field+".headroom", m.GetHeadroom()); err != nil {
		return interfaces.Report{}, err
	}
	if r.LatencyP50, err = durationFromWire(field+".latency_p50", m.GetLatencyP50Nanos()); err != nil {
		return interfaces.Report{}, err
	}
	if r.LatencyP99, err = durationFromWire(field+".latency_p99", m.GetLatencyP99Nanos()); err != nil {
		return interfaces.Report{}, err
	}
	if err := checkNonNeg(field+".throughput", m.GetThroughput()); err != nil {
		return interfaces.Report{}, err
	}
	r.Throughput = m.GetThroughput()
	if r.Shape, err = shapeFromWire(field+".shape", m.GetShape()); err != nil {
		return interfaces.Report{}, err
	}
	if n := len(m.GetShards()); n > 0 {
		r.Shards = make([]interfaces.ShardLoad, n)
		seen := make(map[interfaces.ShardID]struct{}, n)
		for i, s := range m.GetShards() {
			if r.Shards[i], err = ShardLoadFromWire(s); err != nil {
				return interfaces.Report{}, reroot(err, "shard_load", fmt.Sprintf("%s.shards[%d]", field, i))
			}
			// One entry per shard: repeated entries would count as many
			// shards (a straggler's peers, a region's sums).
			if _, dup := seen[r.Shards[i].Shard]; dup {
				return interfaces.Report{}, fieldErr(fmt.Sprintf("%s.shards[%d].shard", field, i), "must appear once in a report", r.Shards[i].Shard)
			}
			seen[r.Shards[i].Shard] = struct{}{}
		}
	}
	if n := len(m.GetHints()); n > 0 {
		r.Hints = make([]interfaces.Hint, n)
		for i, h := range m.GetHints() {
			if r.Hints[i], err = HintFromWire(h); err != nil {
				return interfaces.Report{}, reroot(err, "hint", fmt.Sprintf("%s.hints[%d]", field, i))
			}
		}
	}
	return r, nil
}

// ---- View ----

// The instants a time.Time can take on the wire: int64 Unix nanoseconds.
var (
	minWireTime = time.Unix(0, math.MinInt64)
	maxWireTime = time.Unix(0, math.MaxInt64)
)

// TimeToWire converts an instant to Unix nanoseconds; the zero time.Time is nil
// (absent). An instant that int64 nanoseconds cannot hold (before 1677 or after
// 2262) is an error naming field.
func TimeToWire(field string, t time.Time) (*int64, error) {
	if t.IsZero() {
		return nil, nil
	}
	if t.Before(minWireTime) || t.After(maxWireTime) {
		return nil, fieldErr(field, "must be between "+minWireTime.UTC().Format(time.RFC3339)+" and "+maxWireTime.UTC().Format(time.RFC3339), t.UTC().Format(time.RFC3339))
	}
	n := t.UnixNano()
	return &n, nil
}

// TimeFromWire converts Unix nanoseconds to an instant in UTC; nil (absent) is the
// zero time.Time.
func TimeFromWire(n *int64) time.Time {
	if n == nil {
		return time.Time{}
	}
	return time.Unix(0, *n).UTC()
}

// ViewToWire converts a view. It fails only when v is nil or v.Now cannot be held
// in int64 Unix nanoseconds.
func ViewToWire(v *interfaces.View) (*View, error) {
	if v == nil {
		return nil, fieldErr("view", "is required", nil)
	}
	now, err := TimeToWire("view.now", v.Now)
	if err != nil {
		return nil, err
	}
	m := &View{
		Tier:         v.Tier,
		Instance:     v.Instance,
		NowUnixNanos: now,
		Seed:         v.Seed,
		InFlight:     movesToWire(v.InFlight),
		Constraints:  constraintsToWire(v.Constraints),
	}
	if len(v.Children) > 0 {
		m.Children = make([]*Child, len(v.Children))
		for i, c := range v.Children {
			m.Children[i] = ChildToWire(c)
		}
	}
	if len(v.Shards) > 0 {
		m.Shards = make([]*Shard, len(v.Shards))
		for i, s := range v.Shards {
			m.Shards[i] = ShardToWire(s)
		}
	}
	if len(v.Assignments) > 0 {
		m.Assignments = make([]*Assignment, len(v.Assignments))
		for i, a := range v.Assignments {
			m.Assignments[i] = AssignmentToWire(a)
		}
	}
	if len(v.Reports) > 0 {
		m.Reports = make(map[string]*Report, len(v.Reports))
		for k, r := range v.Reports {
			m.Reports[string(k)] = ReportToWire(r)
		}
	}
	return m, nil
}

// ViewFromWire converts and validates a view: tier is required, and every child,
// shard, assignment, in-flight move, constraint and report is valid, each report
// filed under its own child's id. It does not check references between them (an
// assignment to an unknown child): that is the policy's input check.
func ViewFromWire(m *View) (*interfaces.View, error) {
	const field = "view"
	if m.GetTier() == "" {
		return nil, fieldErr(field+".tier", "is required", nil)
	}
	v := &interfaces.View{
		Tier:     m.GetTier(),
		Instance: m.GetInstance(),
		Now:      TimeFromWire(m.NowUnixNanos), // m is not nil here: GetTier was non-empty
		Seed:     m.GetSeed(),
	}
	var err error
	if n := len(m.GetChildren()); n > 0 {
		v.Children = make([]interfaces.Child, n)
		for i, c := range m.GetChildren() {
			if v.Children[i], err = ChildFromWire(c); err != nil {
				return nil, reroot(err, "child", fmt.Sprintf("%s.children[%d]", field, i))
			}
		}
	}
	if n := len(m.GetShards()); n > 0 {
		v.Shards = make([]interfaces.Shard, n)
		for i, s := range m.GetShards() {
			if v.Shards[i], err = ShardFromWire(s); err != nil {
				return nil, reroot(err, "shard", fmt.Sprintf("%s.shards[%d]", field, i))
			}
		}
	}
	if n := len(m.GetAssignments()); n > 0 {
		v.Assignments = make([]interfaces.Assignment, n)
		for i, a := range m.GetAssignments() {
			if v.Assignments[i], err = AssignmentFromWire(a); err != nil {
				return nil, reroot(err, "assignment", fmt.Sprintf("%s.assignments[%d]", field, i))
			}
		}
	}
	if v.InFlight, err = movesFromWire(field+".in_flight", m.GetInFlight()); err != nil {
		return nil, err
	}
	if v.Constraints, err = constraintsFromWire(field+".constraints", m.GetConstraints()); err != nil {
		return nil, err
	}
	if len(m.GetReports()) > 0 {
		v.Reports = make(map[interfaces.ChildID]interfaces.Report, len(m.GetReports()))
		for _, k := range slices.Sorted(maps.Keys(m.GetReports())) {
			if err := interfaces.ValidateID(field+".reports", k); err != nil {
				return nil, reroot(err, field+".reports", fmt.Sprintf("%s.reports[%q]", field, k))
			}
			r, err := ReportFromWire(m.GetReports()[k])
			if err != nil {
				return nil, reroot(err, "report", fmt.Sprintf("%s.reports[%q]", field, k))
			}
			if string(r.Child) != k {
				return nil, fieldErr(fmt.Sprintf("%s.reports[%q].child", field, k), "must equal its key in "+field+".reports", r.Child)
			}
			v.Reports[interfaces.ChildID(k)] = r
		}
	}
	return v, nil
}
