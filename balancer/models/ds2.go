package models

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/strata-sched/strata/interfaces"
)

// MaxParallelism bounds advice: a target needing more instances than this is
// an error (the job parallelism limit of Strata's job files).
const MaxParallelism = 1 << 20

// Parallelism is DS2's sizing rule for one operator: the number of instances
// that process target records/s when each processes perInstance records/s of
// busy time, ceil(target/perInstance), at least 1. exact is the unrounded
// ratio. Ratios within 1e-9 above an integer round down to it, so floating
// noise does not add an instance. perInstance must be > 0 and finite, target
// finite and ≥ 0.
func Parallelism(target, perInstance float64) (n int, exact float64, err error) {
	if !(perInstance > 0) || math.IsInf(perInstance, 0) {
		return 0, 0, fmt.Errorf("true processing rate per instance: must be finite and > 0 records/s, got %v: %w", perInstance, interfaces.ErrInvalid)
	}
	if !(target >= 0) || math.IsInf(target, 0) {
		return 0, 0, fmt.Errorf("target rate: must be finite and >= 0 records/s, got %v: %w", target, interfaces.ErrInvalid)
	}
	exact = target / perInstance
	if exact > MaxParallelism {
		return 0, exact, fmt.Errorf("target rate %g records/s at %g records/s per instance needs %.0f instances, more than %d: %w", target, perInstance, math.Ceil(exact), MaxParallelism, interfaces.ErrInvalid)
	}
	n = int(math.Ceil(exact - 1e-9))
	if n < 1 {
		n = 1
	}
	return n, exact, nil
}

// JobAdvice is the advice for one Strata job: one operator whose shards each
// receive an input rate.
type JobAdvice struct {
	Current      int     `json:"current_shards"`
	Advised      int     `json:"advised_shards"`
	Exact        float64 `json:"exact"`
	TargetInput  float64 `json:"target_input_rate"`
	RatePerShard float64 `json:"true_rate_per_shard"`
	// Utilization is the share of the current shards' busy time the input
	// needs: TargetInput / (Current × RatePerShard); above 1 the job lags.
	Utilization float64 `json:"utilization"`
}

// AdviseJob sizes a job the way DS2 sizes an operator: the target input is the
// sum of its shards' input rates, each shard processes ratePerShard records/s
// of busy time, and the advice is Parallelism(target, ratePerShard).
func AdviseJob(shardInputRates []float64, ratePerShard float64) (JobAdvice, error) {
	if len(shardInputRates) == 0 {
		return JobAdvice{}, fmt.Errorf("shards: the job has none: %w", interfaces.ErrInvalid)
	}
	a := JobAdvice{Current: len(shardInputRates), RatePerShard: ratePerShard}
	for i, r := range shardInputRates {
		if !(r >= 0) || math.IsInf(r, 0) {
			return JobAdvice{}, fmt.Errorf("shards[%d].input_rate: must be finite and >= 0, got %v: %w", i, r, interfaces.ErrInvalid)
		}
		a.TargetInput += r
	}
	n, exact, err := Parallelism(a.TargetInput, ratePerShard)
	if err != nil {
		return JobAdvice{}, err
	}
	a.Advised, a.Exact = n, exact
	a.Utilization = a.TargetInput / (float64(a.Current) * ratePerShard)
	return a, nil
}

// Operator is one operator of a dataflow.
type Operator struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Instances int    `json:"instances"`
}

// Topology is a dataflow: operators and the edges between them, a DAG.
type Topology struct {
	// Operators in topological order: every operator after its upstream ones
	// (ties in the order the operators first appear).
	Operators []Operator
	// Upstream[i] are the indices in Operators of operator i's inputs.
	Upstream [][]int
	index    map[string]int
}

// Index returns the position of operator id in Operators.
func (t *Topology) Index(id string) (int, bool) {
	i, ok := t.index[id]
	return i, ok
}

// NewTopology builds a topology from operators and edges (from, to) between
// their IDs. IDs must be unique and non-empty, instances ≥ 1, edges between
// known operators, and the graph acyclic.
func NewTopology(ops []Operator, edges [][2]string) (*Topology, error) {
	idx := map[string]int{}
	for i, o := range ops {
		if o.ID == "" {
			return nil, fmt.Errorf("operators[%d].id: must not be empty: %w", i, interfaces.ErrInvalid)
		}
		if _, dup := idx[o.ID]; dup {
			return nil, fmt.Errorf("operators[%d].id: %q appears twice: %w", i, o.ID, interfaces.ErrInvalid)
		}
		if o.Instances < 1 {
			return nil, fmt.Errorf("operators[%d].instances: must be >= 1, got %d: %w", i, o.Instances, interfaces.ErrInvalid)
		}
		idx[o.ID] = i
	}
	up := make([][]int, len(ops))
	down := make([][]int, len(ops))
	indeg := make([]int, len(ops))
	for k, e := range edges {
		from, ok1 := idx[e[0]]
		to, ok2 := idx[e[1]]
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("edges[%d]: %q → %q names an unknown operator: %w", k, e[0], e[1], interfaces.ErrNotFound)
		}
		if from == to {
			return nil, fmt.Errorf("edges[%d]: %q feeds itself; the dataflow must be acyclic: %w", k, e[0], interfaces.ErrInvalid)
		}
		dup := false
		for _, u := range up[to] {
			dup = dup || u == from
		}
		if dup {
			continue // a repeated edge is the same edge
		}
		up[to] = append(up[to], from)
		down[from] = append(down[from], to)
		indeg[to]++
	}
	// Kahn's algorithm, always taking the earliest ready operator.
	order := make([]int, 0, len(ops))
	done := make([]bool, len(ops))
	for len(order) < len(ops) {
		next := -1
		for i := range ops {
			if !done[i] && indeg[i] == 0 {
				next = i
				break
			}
		}
		if next < 0 {
			var cyc []string
			for i, o := range ops {
				if !done[i] {
					cyc = append(cyc, o.ID)
				}
			}
			return nil, fmt.Errorf("edges: the dataflow has a cycle through %s; it must be acyclic: %w", strings.Join(cyc, ", "), interfaces.ErrInvalid)
		}
		done[next] = true
		order = append(order, next)
		for _, d := range down[next] {
			indeg[d]--
		}
	}
	pos := make([]int, len(ops))
	for p, i := range order {
		pos[i] = p
	}
	t := &Topology{Operators: make([]Operator, len(ops)), Upstream: make([][]int, len(ops)), index: map[string]int{}}
	for p, i := range order {
		t.Operators[p] = ops[i]
		t.index[ops[i].ID] = p
		for _, u := range up[i] {
			t.Upstream[p] = append(t.Upstream[p], pos[u])
		}
	}
	return t, nil
}

// csvPosError is a parse error at a line and column of a file.
type csvPosError struct {
	file      string
	line, col int
	field     string // "field 3 (instances)"
	msg       string
	sentinel  error
}

func (e *csvPosError) Error() string {
	if e.field == "" {
		return fmt.Sprintf("%s:%d:%d: %s", e.file, e.line, e.col, e.msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s: %s", e.file, e.line, e.col, e.field, e.msg)
}

func (e *csvPosError) Unwrap() error { return e.sentinel }

// csvRows reads the data rows of a DS2 file: comma-separated, '#' lines are
// comments, each row exactly len(names) fields. fn gets each row and a
// function making an error at one of its fields.
func csvRows(r io.Reader, file string, names []string, fn func(rec []string, line int, errAt func(field int, format string, args ...any) error) error) (rows int, err error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return rows, nil
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return rows, &csvPosError{file: file, line: pe.Line, col: pe.Column, msg: pe.Err.Error(), sentinel: interfaces.ErrInvalid}
			}
			return rows, fmt.Errorf("%s: %w", file, err)
		}
		errAt := func(field int, format string, args ...any) error {
			line, col := cr.FieldPos(field)
			e := &csvPosError{file: file, line: line, col: col, msg: fmt.Sprintf(format, args...), sentinel: interfaces.ErrInvalid}
			if field < len(names) {
				e.field = fmt.Sprintf("field %d (%s)", field+1, names[field])
			}
			return e
		}
		if len(rec) != len(names) {
			f := len(rec) - 1
			if len(rec) > len(names) {
				f = len(names)
			}
			line, col := cr.FieldPos(f)
			return rows, &csvPosError{file: file, line: line, col: col,
				msg:      fmt.Sprintf("has %d fields, want %d (%s)", len(rec), len(names), strings.Join(names, ",")),
				sentinel: interfaces.ErrInvalid}
		}
		rows++
		line, _ := cr.FieldPos(0)
		if err := fn(rec, line, errAt); err != nil {
			return rows, err
		}
	}
}

var topologyFields = []string{"operator_id1", "operator_name1", "total_number_of_operator_instances1", "operator_id2", "operator_name2", "total_number_of_operator_instances2"}

// ParseTopology reads DS2's topology CSV: one edge per line, "operator_id1,
// operator_name1, total_number_of_operator_instances1, operator_id2,
// operator_name2, total_number_of_operator_instances2" (the first operator
// feeds the second); '#' lines are comments. file names the input in errors,
// which give the line, column and field.
func ParseTopology(r io.Reader, file string) (*Topology, error) {
	var ops []Operator
	seen := map[string]int{}
	var edges [][2]string
	n, err := csvRows(r, file, topologyFields, func(rec []string, line int, errAt func(int, string, ...any) error) error {
		var ids [2]string
		for side := 0; side < 2; side++ {
			f := 3 * side
			id, name := strings.TrimSpace(rec[f]), strings.TrimSpace(rec[f+1])
			if id == "" {
				return errAt(f, "must not be empty")
			}
			inst, err := strconv.Atoi(strings.TrimSpace(rec[f+2]))
			if err != nil || inst < 1 {
				return errAt(f+2, "must be an integer >= 1, got %q", rec[f+2])
			}
			if k, ok := seen[id]; ok {
				if ops[k].Instances != inst {
					return errAt(f+2, "operator %q has %d instances here but %d on an earlier line", id, inst, ops[k].Instances)
				}
			} else {
				seen[id] = len(ops)
				ops = append(ops, Operator{ID: id, Name: name, Instances: inst})
			}
			ids[side] = id
		}
		edges = append(edges, ids)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("%s: no edges (every non-comment line is operator_id1,...,total_number_of_operator_instances2): %w", file, interfaces.ErrInvalid)
	}
	t, err := NewTopology(ops, edges)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return t, nil
}

// InstanceRate is one line of DS2's rates log: the rates of one operator
// instance in one measurement window, records/s. True rates are per unit of
// busy time.
type InstanceRate struct {
	Operator           string  `json:"operator"`
	Instance           int     `json:"instance"`
	Instances          int     `json:"instances"`
	Timestamp          int64   `json:"timestamp"`
	TrueProcessing     float64 `json:"true_processing_rate"`
	TrueOutput         float64 `json:"true_output_rate"`
	ObservedProcessing float64 `json:"observed_processing_rate"`
	ObservedOutput     float64 `json:"observed_output_rate"`
	// Line is the line of the log it came from (0 when not from a file).
	Line int `json:"line,omitempty"`
}

// Window is one measurement window: one InstanceRate per operator instance.
type Window struct {
	Rates []InstanceRate
}

var rateFields = []string{"operator_id", "operator_instance_id", "total_number_of_operator_instances", "epoch_timestamp", "true_processing_rate", "true_output_rate", "observed_processing_rate", "observed_output_rate"}

// ParseRates reads DS2's rates log: one line per operator instance and window,
// "operator_id, operator_instance_id, total_number_of_operator_instances,
// epoch_timestamp, true_processing_rate, true_output_rate,
// observed_processing_rate, observed_output_rate"; '#' lines are comments.
// Lines are grouped into windows in order: a line for an instance already seen
// in the current window starts the next window. Errors give the line, column
// and field.
func ParseRates(r io.Reader, file string) ([]Window, error) {
	var wins []Window
	cur := Window{}
	seen := map[string]bool{}
	n, err := csvRows(r, file, rateFields, func(rec []string, line int, errAt func(int, string, ...any) error) error {
		var ir InstanceRate
		ir.Operator = strings.TrimSpace(rec[0])
		if ir.Operator == "" {
			return errAt(0, "must not be empty")
		}
		var err error
		if ir.Instances, err = strconv.Atoi(strings.TrimSpace(rec[2])); err != nil || ir.Instances < 1 {
			return errAt(2, "must be an integer >= 1, got %q", rec[2])
		}
		if ir.Instance, err = strconv.Atoi(strings.TrimSpace(rec[1])); err != nil || ir.Instance < 1 || ir.Instance > ir.Instances {
			return errAt(1, "must be an integer in [1, %d] (total_number_of_operator_instances), got %q", ir.Instances, rec[1])
		}
		if ir.Timestamp, err = strconv.ParseInt(strings.TrimSpace(rec[3]), 10, 64); err != nil {
			return errAt(3, "must be an integer (ns), got %q", rec[3])
		}
		vals := []*float64{&ir.TrueProcessing, &ir.TrueOutput, &ir.ObservedProcessing, &ir.ObservedOutput}
		for k, p := range vals {
			v, err := strconv.ParseFloat(strings.TrimSpace(rec[4+k]), 64)
			if err != nil || !(v >= 0) || math.IsInf(v, 0) {
				return errAt(4+k, "must be a finite number >= 0 (records/s), got %q", rec[4+k])
			}
			*p = v
		}
		ir.Line = line
		key := ir.Operator + "\x00" + strconv.Itoa(ir.Instance)
		if seen[key] {
			wins = append(wins, cur)
			cur = Window{}
			seen = map[string]bool{}
		}
		seen[key] = true
		cur.Rates = append(cur.Rates, ir)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("%s: no rates (every non-comment line is operator_id,...,observed_output_rate): %w", file, interfaces.ErrInvalid)
	}
	wins = append(wins, cur)
	return wins, nil
}

// OperatorAdvice is DS2's result for one operator in one window.
type OperatorAdvice struct {
	Operator string `json:"operator"`
	// Source operators are not sized: their target output is their true output
	// rate and Advised is Current.
	Source  bool `json:"source"`
	Current int  `json:"current"`
	Advised int  `json:"advised"`
	// Exact is the unrounded parallelism TargetInput / TrueRatePerInstance.
	Exact        float64 `json:"exact"`
	TargetInput  float64 `json:"target_input_rate"`
	TargetOutput float64 `json:"target_output_rate"`
	// TrueProcessing and TrueOutput are the sums over the instances;
	// TrueRatePerInstance is TrueProcessing / Current; Selectivity is
	// TrueOutput / TrueProcessing (0 when nothing was processed).
	TrueProcessing      float64 `json:"true_processing_rate"`
	TrueOutput          float64 `json:"true_output_rate"`
	TrueRatePerInstance float64 `json:"true_rate_per_instance"`
	Selectivity         float64 `json:"selectivity"`
	// Note explains advice that is not a DS2 sizing (e.g. no processing
	// measured: the current parallelism is kept).
	Note string `json:"note,omitempty"`
}

// Advice is DS2's result for one window, operators in topological order.
type Advice struct {
	Window int `json:"window"`
	// Timestamp is the earliest epoch_timestamp of the window (ns).
	Timestamp int64            `json:"timestamp"`
	Operators []OperatorAdvice `json:"operators"`
}

// Advise applies DS2's model to one window, in one pass over the operators in
// topological order (no iteration):
//
//   - a source's target output rate is its true output rate (summed over its
//     instances); sources are not resized;
//   - every other operator's target input rate is the sum of its upstream
//     operators' target output rates; its parallelism is
//     ceil(target input / true processing rate per instance), the rate per
//     instance being the average over its instances (Parallelism); its target
//     output rate is target input × selectivity (true output / true
//     processing).
//
// The window must hold every instance of every operator of t exactly once,
// and only operators of t. The current parallelism is the instance count the
// rates log gives. An operator that processed nothing (true processing rate 0)
// keeps its current parallelism, with a Note, and has target output 0.
func Advise(t *Topology, w Window, window int) (Advice, error) {
	if t == nil {
		return Advice{}, fmt.Errorf("topology: missing: %w", interfaces.ErrInvalid)
	}
	nops := len(t.Operators)
	count := make([]int, nops)
	inst := make([]int, nops)
	seen := make([]map[int]bool, nops)
	adv := make([]OperatorAdvice, nops)
	a := Advice{Window: window}
	for k, r := range w.Rates {
		where := fmt.Sprintf("window %d, rate %d", window, k)
		if r.Line > 0 {
			where = fmt.Sprintf("window %d, line %d", window, r.Line)
		}
		i, ok := t.Index(r.Operator)
		if !ok {
			return Advice{}, fmt.Errorf("%s: operator %q is not in the topology: %w", where, r.Operator, interfaces.ErrNotFound)
		}
		if k == 0 || r.Timestamp < a.Timestamp {
			a.Timestamp = r.Timestamp
		}
		if seen[i] == nil {
			seen[i] = map[int]bool{}
			inst[i] = r.Instances
		}
		if r.Instances != inst[i] {
			return Advice{}, fmt.Errorf("%s: operator %q has %d instances here but %d on another line of the window: %w", where, r.Operator, r.Instances, inst[i], interfaces.ErrInvalid)
		}
		if r.Instance < 1 || r.Instance > r.Instances || seen[i][r.Instance] {
			return Advice{}, fmt.Errorf("%s: operator %q instance %d: must be in [1, %d] and appear once per window: %w", where, r.Operator, r.Instance, r.Instances, interfaces.ErrInvalid)
		}
		seen[i][r.Instance] = true
		count[i]++
		adv[i].TrueProcessing += r.TrueProcessing
		adv[i].TrueOutput += r.TrueOutput
	}
	for i, o := range t.Operators {
		if count[i] != inst[i] || count[i] == 0 {
			return Advice{}, fmt.Errorf("window %d: operator %q has rates for %d of its %d instances; a window needs them all: %w", window, o.ID, count[i], max(inst[i], o.Instances), interfaces.ErrInvalid)
		}
	}
	for i, o := range t.Operators {
		oa := &adv[i]
		oa.Operator = o.ID
		oa.Current = inst[i]
		oa.TrueRatePerInstance = oa.TrueProcessing / float64(oa.Current)
		if oa.TrueProcessing > 0 {
			oa.Selectivity = oa.TrueOutput / oa.TrueProcessing
		}
		if len(t.Upstream[i]) == 0 {
			oa.Source = true
			oa.Advised = oa.Current
			oa.Exact = float64(oa.Current)
			oa.TargetOutput = oa.TrueOutput
			continue
		}
		for _, u := range t.Upstream[i] {
			oa.TargetInput += adv[u].TargetOutput
		}
		if oa.TrueProcessing == 0 {
			oa.Advised = oa.Current
			oa.Note = "no true processing rate measured: kept the current parallelism"
			continue
		}
		n, exact, err := Parallelism(oa.TargetInput, oa.TrueRatePerInstance)
		if err != nil {
			return Advice{}, fmt.Errorf("window %d: operator %q: %w", window, o.ID, err)
		}
		oa.Advised, oa.Exact = n, exact
		oa.TargetOutput = oa.TargetInput * oa.Selectivity
	}
	a.Operators = adv
	return a, nil
}

// AdviseAll applies Advise to every window; windows are numbered from 1.
func AdviseAll(t *Topology, ws []Window) ([]Advice, error) {
	out := make([]Advice, 0, len(ws))
	for k, w := range ws {
		a, err := Advise(t, w, k+1)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}
