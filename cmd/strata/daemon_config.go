package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/strata-sched/strata/coordinator/tierd"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/internal/units"
	"github.com/strata-sched/strata/internal/yamlerr"
	"github.com/strata-sched/strata/tiers/control"
	"github.com/strata-sched/strata/tiers/coop"
)

// Daemon configuration files are YAML, decoded strictly: an unknown key or a
// value of the wrong type is an error naming the key and its line. See
// docs/operations.md for every key, and deploy/examples/ for samples.

// tierFile is the configuration of "strata global" and "strata region".
type tierFile struct {
	Tier      string       `yaml:"tier"`
	Chain     []string     `yaml:"chain"`
	Instance  string       `yaml:"instance"`
	NodeID    string       `yaml:"node_id"`
	DataDir   string       `yaml:"data_dir"`
	Listen    listenFile   `yaml:"listen"`
	Bootstrap bool         `yaml:"bootstrap"`
	Peers     []tierd.Peer `yaml:"peers"`
	Parent    []string     `yaml:"parent"`
	Policy    policyFile   `yaml:"policy"`
	Control   controlFile  `yaml:"control"`

	// ControlPolicies selects the control policies (tiers/control: straggler,
	// doctor, autoscale — the default; [] runs none); ControlPolicyConfig
	// configures them by name.
	ControlPolicies     []string                          `yaml:"control_policies"`
	ControlPolicyConfig map[string]control.PolicySettings `yaml:"control_policy_config"`
	// Integration (decoupled, manual, collaborative: the default), operator
	// constraints for manual mode, collaborative mode's settings, and the
	// labels this instance announces to its parent.
	Integration string            `yaml:"integration"`
	Constraints []constraintFile  `yaml:"constraints"`
	Coop        coopFile          `yaml:"coop"`
	Labels      map[string]string `yaml:"labels"`

	// TLS (required: the files, or "disabled") and the parent tier instance
	// whose certificate the parent must present (default global under the
	// global tier).
	TLS            tlsFile `yaml:"tls"`
	ParentInstance string  `yaml:"parent_instance"`
	// ACL (required outside 'strata dev': the Admin API's tokens, or
	// "disabled"; acl_config.go); Children says which children may register
	// and when failed ones are forgotten (docs/security.md).
	ACL      aclFile      `yaml:"acl"`
	Children childrenFile `yaml:"children"`
}

// childrenFile is the children section of a tier config (tierd.ChildrenConfig).
type childrenFile struct {
	Allow    []string          `yaml:"allow"`
	Selector map[string]string `yaml:"selector"`
	GCAfter  duration          `yaml:"gc_after"`
}

// constraintFile is an operator constraint (integration: manual).
type constraintFile struct {
	Kind     string   `yaml:"kind"`
	Shards   []string `yaml:"shards"`
	Children []string `yaml:"children"`
	Limit    loadFile `yaml:"limit"`
	Max      int      `yaml:"max"`
	MaxBytes quantity `yaml:"max_bytes"`
	Reason   string   `yaml:"reason"`
}

// coopFile tunes collaborative mode (tiers/coop; 0 = its default).
type coopFile struct {
	Target         float64  `yaml:"target"`
	MaxShards      int      `yaml:"max_shards"`
	Hold           duration `yaml:"hold"`
	BudgetFraction float64  `yaml:"budget_fraction"`
	MinBudget      int      `yaml:"min_budget"`
}

func (f tierFile) constraints() ([]interfaces.Constraint, error) {
	var out []interfaces.Constraint
	for i, c := range f.Constraints {
		field := fmt.Sprintf("constraints[%d]", i)
		kind, ok := interfaces.ParseConstraintKind(c.Kind)
		if !ok {
			names := interfaces.ConstraintKindNames()
			return nil, fmt.Errorf("%s.kind: must be %s or %s (got %q): %w", field, strings.Join(names[:len(names)-1], ", "), names[len(names)-1], c.Kind, interfaces.ErrInvalid)
		}
		limit, err := c.Limit.load(field + ".limit")
		if err != nil {
			return nil, err
		}
		k := interfaces.Constraint{Kind: kind, Limit: limit, Max: c.Max, MaxBytes: int64(c.MaxBytes), Reason: c.Reason}
		for _, s := range c.Shards {
			k.Shards = append(k.Shards, interfaces.ShardID(s))
		}
		for _, ch := range c.Children {
			k.Children = append(k.Children, interfaces.ChildID(ch))
		}
		if k.Reason == "" {
			k.Reason = "operator constraint (" + field + ")"
		}
		out = append(out, k)
	}
	return out, nil
}

type listenFile struct {
	Raft  string `yaml:"raft"`
	GRPC  string `yaml:"grpc"`
	HTTP  string `yaml:"http"`
	Admin string `yaml:"admin"`
}

type policyFile struct {
	Name   string            `yaml:"name"`
	Config map[string]string `yaml:"config"`
}

type controlFile struct {
	Interval       duration `yaml:"interval"`
	LeaseTTL       duration `yaml:"lease_ttl"`
	Grace          duration `yaml:"grace"`
	DriftMargin    duration `yaml:"drift_margin"`
	SolveTimeout   duration `yaml:"solve_timeout"`
	ReportInterval duration `yaml:"report_interval"`
	StepDownAfter  duration `yaml:"step_down_after"`
	MaxMoves       int      `yaml:"max_moves"`
}

// hostFile is the configuration of "strata host".
type hostFile struct {
	Host     string            `yaml:"host"`
	DataDir  string            `yaml:"data_dir"`
	Parent   []string          `yaml:"parent"`
	Listen   listenFile        `yaml:"listen"`
	Capacity loadFile          `yaml:"capacity"`
	Labels   map[string]string `yaml:"labels"`
	Driver   driverFile        `yaml:"driver"`
	// TLS (required: the files, or "disabled"), and the parent tier instance
	// (and its tier, default region) whose certificate the parent must present.
	TLS            tlsFile `yaml:"tls"`
	ParentInstance string  `yaml:"parent_instance"`
	ParentTier     string  `yaml:"parent_tier"`
}

type driverFile struct {
	Kind      string        `yaml:"kind"`
	Synthetic syntheticFile `yaml:"synthetic"`
	Exec      execFile      `yaml:"exec"`
	Callback  callbackFile  `yaml:"callback"`
}

type syntheticFile struct {
	Seed        uint64   `yaml:"seed"`
	Wave        float64  `yaml:"wave"`
	Period      duration `yaml:"period"`
	Noise       float64  `yaml:"noise"`
	BaseLatency duration `yaml:"base_latency"`
	// Execute runs the shards' work on the host's capacity cpu cores in the
	// order of Discipline (llf or fifo) and reports measured latency.
	Execute    bool   `yaml:"execute"`
	Discipline string `yaml:"discipline"`
}

type execFile struct {
	Command     []string `yaml:"command"`
	Env         []string `yaml:"env"`
	EnvPass     []string `yaml:"env_pass"`
	Dir         string   `yaml:"dir"`
	StopTimeout duration `yaml:"stop_timeout"`
}

type callbackFile struct {
	Listen     string   `yaml:"listen"`
	AckTimeout duration `yaml:"ack_timeout"`
}

// loadFile is a load or capacity vector: cpu in cores, mem in bytes (or with a
// binary or decimal suffix: 512Mi, 64Gi, 2G), net in bytes/s (same suffixes),
// tasks as a count, and further dimensions by name.
type loadFile map[string]quantity

func (l loadFile) load(field string) (interfaces.Load, error) {
	var out interfaces.Load
	for k, v := range l {
		out = out.With(k, float64(v))
	}
	if err := interfaces.ValidateLoad(field, out); err != nil {
		return interfaces.Load{}, err
	}
	return out, nil
}

// quantity and duration are read by internal/units, the one parser that job
// files and simulator scenarios use too.
type (
	quantity = units.Quantity
	duration = units.Duration
)

// decodeStrict decodes YAML into v, refusing unknown keys; its errors name the
// file, the line and the key (yamlerr).
func decodeStrict(path string, data []byte, v any) error {
	return yamlerr.Decode(path, data, v)
}

func readConfig(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	return decodeStrict(path, data, v)
}

// tierConfig turns a tier file into the daemon's configuration; it opens the
// TLS files (reloads are logged to logOut).
func (f tierFile) tierConfig(logOut io.Writer) (tierd.Config, error) {
	if f.Tier == "" {
		return tierd.Config{}, fmt.Errorf("tier: is required (global, region, or a custom tier's name): %w", interfaces.ErrInvalid)
	}
	c := tierd.Config{
		Tier: f.Tier, Chain: f.Chain, Instance: f.Instance, NodeID: f.NodeID, DataDir: f.DataDir,
		RaftAddr: f.Listen.Raft, GRPCAddr: f.Listen.GRPC, HTTPAddr: f.Listen.HTTP, AdminAddr: f.Listen.Admin,
		Bootstrap: f.Bootstrap, Peers: f.Peers, Parent: f.Parent,
		Policy: f.Policy.Name, PolicyConfig: f.Policy.Config,
		Interval: time.Duration(f.Control.Interval), LeaseTTL: time.Duration(f.Control.LeaseTTL),
		Grace: time.Duration(f.Control.Grace), DriftMargin: time.Duration(f.Control.DriftMargin), SolveTimeout: time.Duration(f.Control.SolveTimeout),
		ReportInterval: time.Duration(f.Control.ReportInterval), StepDownAfter: time.Duration(f.Control.StepDownAfter), MaxMoves: f.Control.MaxMoves,
		ControlPolicies: f.ControlPolicies, ControlPolicyConfig: f.ControlPolicyConfig,
	}
	if c.Instance == "" && c.Tier == interfaces.TierGlobal {
		c.Instance = "global"
	}
	c.Integration, c.Labels, c.ParentInstance = f.Integration, f.Labels, f.ParentInstance
	var err error
	if c.ACL, err = f.ACL.config(); err != nil {
		return tierd.Config{}, err
	}
	c.Children = tierd.ChildrenConfig{Allow: f.Children.Allow, Selector: f.Children.Selector, GCAfter: time.Duration(f.Children.GCAfter)}
	c.Coop = coop.Config{Target: f.Coop.Target, MaxShards: f.Coop.MaxShards, Hold: time.Duration(f.Coop.Hold), BudgetFraction: f.Coop.BudgetFraction, MinBudget: f.Coop.MinBudget}
	if c.Constraints, err = f.constraints(); err != nil {
		return tierd.Config{}, err
	}
	if c.TLS, err = f.TLS.open(logOut); err != nil {
		return tierd.Config{}, err
	}
	c = c.Defaults()
	return c, c.Validate()
}
