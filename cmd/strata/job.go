package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/units"
)

func init() { commands = append(commands, newJobCmd) }

// jobFileHelp documents the job file; it is part of "strata job submit --help"
// and docs/operations.md repeats it.
const jobFileHelp = `The job file is YAML (.yaml, .yml, or "-" for standard input) or JSON (.json).
Every key but name and parallelism is optional; unknown keys are errors.

  name: wordcount          # the job id; shards are named <name>/0 .. <name>/N-1
  parallelism: 8           # number of shards (1 .. 1048576)
  labels: {team: data}     # labels of the job (sent; "job list" does not show them yet)
  load:                    # demand of EACH shard
    cpu: 0.5               # cores
    mem: 512Mi             # bytes; units Ki Mi Gi Ti (×1024) or k K M G T (×1000)
    net: 10Mi              # bytes per second, same units
    tasks: 1               # count
    extra: {gpu: 1}        # further dimensions, by name
  input_rate: 2000         # records per second arriving for each shard
  state_bytes: 64Mi        # state size of each shard (moving it costs this)
  latency_slo: 50ms        # target p99 latency (a Go duration: 50ms, 1s, 1m30s)
  constraints:             # where each shard may run; each tier applies them to its children
    pinned: region-1       # the only child allowed (satisfied within region-1 itself)
    allowed: [region-1, region-2]
    labels: {zone: a}      # labels the child must carry
    anti_affinity: wc      # group name: at most max_per_child of the group per child
    max_per_child: 2`

func newJobCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "job",
		Short: "Submit, list and delete streaming jobs",
		Long: `Submit, list and delete streaming jobs. A job is a number of shards with the same
per-shard load; the global tier (--addr) places them on regions, each region on
its hosts.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newJobSubmitCmd(g), newJobListCmd(g), newJobDeleteCmd(g), newJobAdviseCmd(g))
	return cmd
}

// jobSubmitJSON is the output of "job submit".
type jobSubmitJSON struct {
	Job        string   `json:"job"`
	ShardCount int      `json:"shard_count"`
	Shards     []string `json:"shards"`
	StateIndex uint64   `json:"state_index,omitempty"`
	DryRun     bool     `json:"dry_run,omitempty"`
}

func newJobSubmitCmd(g *globalOptions) *cobra.Command {
	var cf clientFlags
	var out outputFlag
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "submit FILE",
		Short: "Submit a job described by a YAML or JSON file",
		Long: `Submit a job to the global tier (--addr). The job is added whole or not at all: a
job whose name is taken, or any invalid value, changes nothing. Prints the job
and the number of its shards.

` + jobFileHelp + `

With --dry-run the file is only checked and the shards it would make are
printed; the cluster is not contacted.`,
		Example: `  strata job submit deploy/examples/job.yaml
  cat job.yaml | strata job submit -
  strata job submit --dry-run -o json job.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return usageErr(err)
			}
			if !dryRun {
				if err := cf.check(); err != nil {
					return err
				}
			}
			spec, err := readJobFile(args[0], cmd.InOrStdin())
			if err != nil {
				return usageErr(err)
			}
			res := jobSubmitJSON{Job: spec.GetId(), DryRun: dryRun}
			if dryRun {
				for i := int64(0); i < spec.GetParallelism(); i++ {
					res.Shards = append(res.Shards, fmt.Sprintf("%s/%d", spec.GetId(), i))
				}
			} else {
				ctx, c, done, err := cf.admin()
				if err != nil {
					return err
				}
				defer done()
				resp, err := c.SubmitJob(ctx, &wire.SubmitJobRequest{Job: spec})
				if err != nil {
					return remoteCallErr(cf.addr, err)
				}
				res.Job, res.Shards, res.StateIndex = resp.GetJob(), resp.GetShards(), resp.GetStateIndex()
				// A child may join later: the job is submitted, but say
				// that its shards wait (infeasible) until then.
				if st, err := c.Status(ctx, &wire.StatusRequest{}); err == nil && len(st.GetTiers()) > 0 && len(st.GetTiers()[0].GetInstances()) > 0 {
					top := st.GetTiers()[0]
					var ids []string
					for _, ch := range top.GetInstances()[0].GetChildren() {
						ids = append(ids, ch.GetChild().GetId())
					}
					for _, w := range unknownChildWarnings(spec, top.GetTier(), ids) {
						fmt.Fprintf(g.stderr, "strata: warning: %s\n", w)
					}
				}
			}
			res.ShardCount = len(res.Shards)
			return out.print(g.stdout, res, func(w io.Writer) error {
				verb := "submitted"
				if dryRun {
					verb = "is valid (dry run, not submitted)"
				}
				fmt.Fprintf(w, "job %s %s: %d shards", res.Job, verb, res.ShardCount)
				if n := len(res.Shards); n > 0 {
					if n == 1 {
						fmt.Fprintf(w, " (%s)", res.Shards[0])
					} else {
						fmt.Fprintf(w, " (%s … %s)", res.Shards[0], res.Shards[n-1])
					}
				}
				if !dryRun {
					fmt.Fprintf(w, ", committed at state index %d", res.StateIndex)
				}
				_, err := fmt.Fprintf(w, "\n  per shard: %s\n", formatLoad(spec.GetShardTemplate().GetLoad()))
				return err
			})
		},
	}
	cf.register(cmd)
	out.register(cmd)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "check the file and print what would be submitted, without contacting the cluster")
	return cmd
}

// unknownChildWarnings says which of spec's pinned and allowed children the
// top tier (tier, with children ids) does not have: its shards are then
// infeasible there — placed once such a child joins — and nothing else is
// held up. An allowed list with one child of the tier is fine.
func unknownChildWarnings(spec *wire.JobSpec, tier string, ids []string) []string {
	c := spec.GetShardTemplate().GetConstraints()
	has := func(id string) bool { return slices.Contains(ids, id) }
	var out []string
	if p := c.GetPinned(); p != "" && !has(p) {
		out = append(out, fmt.Sprintf("constraints.pinned: %q is not a child of the %s tier now (children: %s); the job's shards stay unplaced (infeasible) until it joins", p, tier, strings.Join(ids, ", ")))
	}
	if a := c.GetAllowed(); len(a) > 0 && !slices.ContainsFunc(a, has) {
		out = append(out, fmt.Sprintf("constraints.allowed: none of %s is a child of the %s tier now (children: %s); the job's shards stay unplaced (infeasible) until one joins", strings.Join(a, ", "), tier, strings.Join(ids, ", ")))
	}
	return out
}

// jobListJSON is one row of "job list".
type jobListJSON struct {
	Job    string             `json:"job"`
	Shards int64              `json:"shards"`
	Placed int64              `json:"placed"`
	Load   map[string]float64 `json:"load"`
	Labels map[string]string  `json:"labels,omitempty"`
}

func newJobListCmd(g *globalOptions) *cobra.Command {
	var cf clientFlags
	var out outputFlag
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the jobs of the cluster",
		Long: `List the jobs the global tier (--addr) holds: for each, its number of shards, how
many of them the global tier has placed on a region (PLACED; see "strata shards"
for the host of each shard), and the sum of its shards' loads.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return usageErr(err)
			}
			if err := cf.check(); err != nil {
				return err
			}
			ctx, c, done, err := cf.admin()
			if err != nil {
				return err
			}
			defer done()
			resp, err := c.ListJobs(ctx, &wire.ListJobsRequest{})
			if err != nil {
				return remoteCallErr(cf.addr, err)
			}
			rows := []jobListJSON{}
			for _, j := range resp.GetJobs() {
				load := map[string]float64{}
				for _, r := range interfaces.BuiltinResources {
					load[r] = wireLoadGet(j.GetLoad(), r)
				}
				for k, v := range j.GetLoad().GetExtra() {
					load[k] = v
				}
				rows = append(rows, jobListJSON{Job: j.GetId(), Shards: j.GetShards(), Placed: j.GetPlaced(), Load: load, Labels: j.GetLabels()})
			}
			sort.Slice(rows, func(i, k int) bool { return naturalLess(rows[i].Job, rows[k].Job) })
			return out.print(g.stdout, rows, func(w io.Writer) error {
				if len(rows) == 0 {
					_, err := fmt.Fprintln(w, "no jobs")
					return err
				}
				tw := newTable(w)
				fmt.Fprintln(tw, "JOB\tSHARDS\tPLACED\tTOTAL LOAD\tLABELS")
				for i, r := range rows {
					fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", r.Job, r.Shards, r.Placed, formatLoad(resp.GetJobs()[i].GetLoad()), formatLabels(r.Labels))
				}
				return tw.Flush()
			})
		},
	}
	cf.register(cmd)
	out.register(cmd)
	return cmd
}

// jobDeleteJSON is the output of "job delete".
type jobDeleteJSON struct {
	Job           string `json:"job"`
	ShardsRemoved int64  `json:"shards_removed"`
	StateIndex    uint64 `json:"state_index"`
}

func newJobDeleteCmd(g *globalOptions) *cobra.Command {
	var cf clientFlags
	var out outputFlag
	cmd := &cobra.Command{
		Use:   "delete JOB",
		Short: "Delete a job: its shards are stopped and forgotten",
		Long: `Delete a job at the global tier (--addr): its shards are removed from the
placement and the hosts running them are told to stop them. An unknown job is
an error (exit code 1).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return usageErr(err)
			}
			if err := cf.check(); err != nil {
				return err
			}
			if err := interfaces.ValidateID("JOB", args[0]); err != nil {
				return usageErr(err)
			}
			ctx, c, done, err := cf.admin()
			if err != nil {
				return err
			}
			defer done()
			resp, err := c.DeleteJob(ctx, &wire.DeleteJobRequest{Job: args[0]})
			if err != nil {
				return remoteCallErr(cf.addr, err)
			}
			res := jobDeleteJSON{Job: args[0], ShardsRemoved: resp.GetShardsRemoved(), StateIndex: resp.GetStateIndex()}
			return out.print(g.stdout, res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "job %s deleted: %d shards removed, committed at state index %d\n", res.Job, res.ShardsRemoved, res.StateIndex)
				return err
			})
		},
	}
	cf.register(cmd)
	out.register(cmd)
	return cmd
}

func formatLabels(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}

// ---- the job file ----

// readJobFile reads and checks a job file: "-" is standard input (YAML);
// otherwise the extension says YAML (.yaml, .yml) or JSON (.json).
func readJobFile(name string, stdin io.Reader) (*wire.JobSpec, error) {
	var data []byte
	var err error
	isJSON := false
	if name == "-" {
		data, err = io.ReadAll(stdin)
		name = "<stdin>"
	} else {
		switch strings.ToLower(filepath.Ext(name)) {
		case ".yaml", ".yml":
		case ".json":
			isJSON = true
		default:
			return nil, fmt.Errorf("FILE %q: must end in .yaml, .yml or .json (or be - for YAML on standard input): %w", name, interfaces.ErrInvalid)
		}
		data, err = os.ReadFile(name)
	}
	if err != nil {
		return nil, fmt.Errorf("FILE: %w", err)
	}
	return parseJobSpec(name, data, isJSON)
}

// jobFileError is a problem in a job file: the key (a dotted path) and the
// line it is on (0 when unknown), and the rule broken. It wraps ErrInvalid.
type jobFileError struct {
	File string
	Line int
	Key  string
	Msg  string
}

func (e *jobFileError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ": line %d", e.Line)
	}
	if e.Key != "" {
		b.WriteString(": " + e.Key)
	}
	b.WriteString(": " + e.Msg)
	return b.String()
}

func (e *jobFileError) Unwrap() error { return interfaces.ErrInvalid }

// jobParser walks the YAML node tree of a job file. Walking nodes (rather than
// decoding into a struct) lets every message name the full key path and its
// line, and refuses unknown and repeated keys at every level.
type jobParser struct {
	file  string
	lines map[string]int // key path → line, for errors found after parsing
}

func (p *jobParser) errAt(n *yaml.Node, key, format string, args ...any) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return &jobFileError{File: p.file, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)}
}

func jobKeyJoin(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func jobDeref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func jobKindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "empty"
		}
		return strconv.Quote(n.Value)
	}
	return "something else"
}

// mapping calls fn for each key of the mapping n, in file order; keys outside
// known are errors that list the known ones.
func (p *jobParser) mapping(n *yaml.Node, path string, known []string, fn func(key string, v *yaml.Node) error) error {
	n = jobDeref(n)
	if n.Kind != yaml.MappingNode {
		return p.errAt(n, path, "must be a mapping of keys (got %s)", jobKindName(n))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := jobDeref(n.Content[i]), jobDeref(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			return p.errAt(k, path, "keys must be plain strings")
		}
		key := jobKeyJoin(path, k.Value)
		if seen[k.Value] {
			return p.errAt(k, key, "appears twice")
		}
		seen[k.Value] = true
		if known != nil && !jobContains(known, k.Value) {
			return p.errAt(k, key, "unknown key (known here: %s)", strings.Join(known, ", "))
		}
		p.lines[key] = k.Line
		if err := fn(k.Value, v); err != nil {
			return err
		}
	}
	return nil
}

func jobContains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (p *jobParser) scalar(n *yaml.Node, key, want string) (string, error) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return "", p.errAt(n, key, "must be %s (got %s)", want, jobKindName(n))
	}
	return n.Value, nil
}

func (p *jobParser) str(n *yaml.Node, key string) (string, error) {
	return p.scalar(n, key, "a string")
}

// number reads a finite number ≥ 0.
func (p *jobParser) number(n *yaml.Node, key, unit string) (float64, error) {
	want := "a number ≥ 0"
	if unit != "" {
		want += " (" + unit + ")"
	}
	s, err := p.scalar(n, key, want)
	if err != nil {
		return 0, err
	}
	v, perr := strconv.ParseFloat(s, 64)
	if perr != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, p.errAt(n, key, "must be %s (got %q)", want, s)
	}
	return v, nil
}

// quantity reads a number ≥ 0 with an optional unit: 512Mi, 2Gi, 1.5G, 1048576.
func (p *jobParser) quantity(n *yaml.Node, key, what string) (float64, error) {
	want := what + " ≥ 0, a number with an optional unit Ki Mi Gi Ti (×1024) or k K M G T (×1000), like 512Mi or 2G"
	s, err := p.scalar(n, key, want)
	if err != nil {
		return 0, err
	}
	v, perr := units.ParseQuantity(s)
	if perr != nil || math.IsInf(v, 0) {
		return 0, p.errAt(n, key, "must be %s (got %q)", want, s)
	}
	return v, nil
}

func (p *jobParser) stringMap(n *yaml.Node, key string) (map[string]string, error) {
	out := map[string]string{}
	err := p.mapping(n, key, nil, func(k string, v *yaml.Node) error {
		if k == "" {
			return p.errAt(v, key, "keys must not be empty")
		}
		s, err := p.scalar(v, jobKeyJoin(key, k), "a string")
		out[k] = s
		return err
	})
	return out, err
}

// parseJobSpec turns the text of a job file into the job spec sent to the
// global tier, checking every key and value.
func parseJobSpec(file string, data []byte, isJSON bool) (*wire.JobSpec, error) {
	p := &jobParser{file: file, lines: map[string]int{}}
	if isJSON {
		if err := checkJSONSyntax(data); err != nil {
			return nil, &jobFileError{File: file, Line: err.line, Msg: err.msg}
		}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, p.errAt(nil, "", "the file is empty")
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, p.errAt(nil, "", "the file holds no document")
		}
		return nil, &jobFileError{File: file, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, p.errAt(&extra, "", "must hold one document (found a second one)")
	} else if !errors.Is(err, io.EOF) {
		return nil, &jobFileError{File: file, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}

	spec := &wire.JobSpec{}
	tmpl := &wire.Shard{Load: &wire.Load{}}
	var haveName, haveParallelism bool
	err := p.mapping(root, "", []string{"name", "parallelism", "labels", "load", "input_rate", "state_bytes", "latency_slo", "constraints"}, func(key string, v *yaml.Node) error {
		var err error
		switch key {
		case "name":
			haveName = true
			if spec.Id, err = p.str(v, key); err == nil {
				if verr := interfaces.ValidateName(key, spec.Id); verr != nil {
					return p.errAt(v, key, "%s (got %q)", interfaces.IDRule, spec.Id)
				}
			}
		case "parallelism":
			haveParallelism = true
			s, serr := p.scalar(v, key, "a whole number of shards")
			if serr != nil {
				return serr
			}
			n, perr := strconv.ParseInt(s, 10, 64)
			if perr != nil || n < 1 || n > fsm.MaxBatch {
				return p.errAt(v, key, "must be a whole number of shards from 1 to %d (got %q)", fsm.MaxBatch, s)
			}
			spec.Parallelism = n
		case "labels":
			spec.Labels, err = p.stringMap(v, key)
		case "load":
			tmpl.Load, err = p.load(v, key)
		case "input_rate":
			tmpl.InputRate, err = p.number(v, key, "records per second")
		case "state_bytes":
			var b float64
			if b, err = p.quantity(v, key, "a byte count"); err == nil {
				if b != math.Trunc(b) || b > math.MaxInt64/2 {
					return p.errAt(v, key, "must be a whole number of bytes (got %q)", v.Value)
				}
				tmpl.StateBytes = int64(b)
			}
		case "latency_slo":
			s, serr := p.scalar(v, key, "a duration like 50ms or 1s")
			if serr != nil {
				return serr
			}
			d, perr := units.ParseDuration(s)
			if perr != nil {
				return p.errAt(v, key, "%v", perr)
			}
			tmpl.LatencySloNanos = int64(d)
		case "constraints":
			tmpl.Constraints, err = p.constraints(v, key)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if !haveName {
		return nil, p.errAt(root, "name", "is required (the job id)")
	}
	if !haveParallelism {
		return nil, p.errAt(root, "parallelism", "is required (the number of shards)")
	}
	spec.ShardTemplate = tmpl
	// The rules the global tier applies to each shard, checked here so that the
	// message names the key of the file and its line.
	probe := &wire.Shard{
		Id: spec.Id + "/0", Job: spec.Id, Load: tmpl.Load, InputRate: tmpl.InputRate,
		StateBytes: tmpl.StateBytes, LatencySloNanos: tmpl.LatencySloNanos, Constraints: tmpl.Constraints,
	}
	s, err := wire.ShardFromWire(probe)
	if err == nil {
		err = interfaces.ValidateShard(s)
	}
	if err != nil {
		var fe *interfaces.FieldError
		if errors.As(err, &fe) {
			key := strings.TrimPrefix(fe.Field, "shard.")
			if key == "id" {
				key = "name"
			}
			msg := fe.Rule
			if fe.Value != "" {
				msg += " (got " + fe.Value + ")"
			}
			return nil, &jobFileError{File: file, Line: p.lineOf(key), Key: key, Msg: msg}
		}
		return nil, &jobFileError{File: file, Msg: err.Error()}
	}
	return spec, nil
}

// lineOf returns the line of key or of its nearest parent key that has one.
func (p *jobParser) lineOf(key string) int {
	for key != "" {
		if l, ok := p.lines[key]; ok {
			return l
		}
		i := strings.LastIndexAny(key, ".[")
		if i < 0 {
			break
		}
		key = key[:i]
	}
	return 0
}

func (p *jobParser) load(n *yaml.Node, path string) (*wire.Load, error) {
	l := &wire.Load{}
	err := p.mapping(n, path, []string{"cpu", "mem", "net", "tasks", "extra"}, func(key string, v *yaml.Node) error {
		var err error
		k := jobKeyJoin(path, key)
		switch key {
		case "cpu":
			l.Cpu, err = p.number(v, k, "cores")
		case "mem":
			l.Mem, err = p.quantity(v, k, "bytes")
		case "net":
			l.Net, err = p.quantity(v, k, "bytes per second")
		case "tasks":
			l.Tasks, err = p.number(v, k, "a count")
		case "extra":
			l.Extra = map[string]float64{}
			err = p.mapping(v, k, nil, func(dim string, dv *yaml.Node) error {
				dk := jobKeyJoin(k, dim)
				switch dim {
				case "":
					return p.errAt(dv, k, "dimension names must not be empty")
				case interfaces.CPU, interfaces.Mem, interfaces.Net, interfaces.Tasks:
					return p.errAt(dv, dk, "is a built-in dimension: set it as %s.%s", path, dim)
				}
				x, err := p.quantity(dv, dk, "a number")
				l.Extra[dim] = x
				return err
			})
		}
		return err
	})
	return l, err
}

func (p *jobParser) constraints(n *yaml.Node, path string) (*wire.ShardConstraints, error) {
	c := &wire.ShardConstraints{}
	err := p.mapping(n, path, []string{"pinned", "allowed", "labels", "anti_affinity", "max_per_child"}, func(key string, v *yaml.Node) error {
		var err error
		k := jobKeyJoin(path, key)
		switch key {
		case "pinned":
			c.Pinned, err = p.str(v, k)
		case "allowed":
			if v.Kind != yaml.SequenceNode {
				return p.errAt(v, k, "must be a list of child ids (got %s)", jobKindName(v))
			}
			for i, item := range v.Content {
				ik := fmt.Sprintf("%s[%d]", k, i)
				s, err := p.str(jobDeref(item), ik)
				if err != nil {
					return err
				}
				p.lines[ik] = item.Line
				c.Allowed = append(c.Allowed, s)
			}
		case "labels":
			c.Labels, err = p.stringMap(v, k)
		case "anti_affinity":
			c.AntiAffinity, err = p.str(v, k)
		case "max_per_child":
			s, serr := p.scalar(v, k, "a whole number ≥ 0")
			if serr != nil {
				return serr
			}
			m, perr := strconv.ParseInt(s, 10, 64)
			if perr != nil || m < 0 {
				return p.errAt(v, k, "must be a whole number ≥ 0 (got %q)", s)
			}
			c.MaxPerChild = m
		}
		return err
	})
	return c, err
}

type jsonSyntaxErr struct {
	line int
	msg  string
}

// checkJSONSyntax checks that data is one JSON value, so that a .json file is
// held to JSON's syntax (the keys are then checked by the same walk as YAML).
func checkJSONSyntax(data []byte) *jsonSyntaxErr {
	dec := json.NewDecoder(bytes.NewReader(data))
	var v any
	err := dec.Decode(&v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			return &jsonSyntaxErr{line: jobLineAt(data, dec.InputOffset()), msg: "must hold one JSON value (found more after it)"}
		}
		return nil
	}
	if errors.Is(err, io.EOF) {
		return &jsonSyntaxErr{msg: "the file is empty"}
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return &jsonSyntaxErr{line: jobLineAt(data, se.Offset), msg: "invalid JSON: " + se.Error()}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return &jsonSyntaxErr{line: jobLineAt(data, int64(len(data))), msg: "invalid JSON: unexpected end of file"}
	}
	return &jsonSyntaxErr{msg: "invalid JSON: " + err.Error()}
}

func jobLineAt(data []byte, off int64) int {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	return bytes.Count(data[:off], []byte("\n")) + 1
}
