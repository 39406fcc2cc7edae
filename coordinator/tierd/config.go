package tierd

import (
	"fmt"
	"net"
	"time"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/internal/tlsutil"
	"github.com/strata-sched/strata/tiers/control"
	"github.com/strata-sched/strata/tiers/coop"
)

// Peer is a replica of this tier instance, as configured.
type Peer struct {
	ID   string `yaml:"id"`
	Raft string `yaml:"raft"`
	GRPC string `yaml:"grpc"`
}

// Config configures one replica of a tier instance.
type Config struct {
	// Tier is the tier's name ("global", "region", or a custom tier); Instance the
	// tier instance ("eu-1"). ChildTier names the tier of the children.
	Tier      string
	Instance  string
	ChildTier string
	// Chain lists the tiers from the top down; default global → region → host.
	// A custom tier is inserted by name (global → region → rack → host). The
	// chain decides the tier of this instance's children (the next one) and of
	// its parent (the previous one).
	Chain []string
	// NodeID is this replica's Raft ID; DataDir holds its Raft data.
	NodeID  string
	DataDir string
	// RaftAddr, GRPCAddr, AdminAddr (raft's JSON admin) and HTTPAddr (/healthz,
	// /readyz, /metrics) are listen addresses.
	RaftAddr  string
	GRPCAddr  string
	AdminAddr string
	HTTPAddr  string
	// Bootstrap makes this replica start a new group with Peers as its voters.
	Bootstrap bool
	Peers     []Peer
	// Parent lists the gRPC addresses of the parent's replicas; empty for the
	// top tier.
	Parent []string
	// Policy names the tier policy (tiers registry); PolicyConfig configures it.
	Policy       string
	PolicyConfig interfaces.PolicyConfig
	// Interval is the control-loop period; LeaseTTL the lease granted to
	// children; Grace the extra wait before a silent child's shards move;
	// SolveTimeout bounds one round's solve; MaxMoves bounds rebalancing moves per
	// round (first placements and emergency moves are not bounded).
	Interval time.Duration
	LeaseTTL time.Duration
	Grace    time.Duration
	// DriftMargin is added to a silent child's lease (and its stop budget)
	// before its shards may move (control.drift_margin): it covers the rate
	// difference of the two clocks over a lease and the child's tick between
	// its lease's end and its fence. Default 200ms.
	DriftMargin  time.Duration
	SolveTimeout time.Duration
	MaxMoves     int
	// ReportInterval is how often children report (sent in LeaseGrant).
	ReportInterval time.Duration
	// StepDownAfter is how long most of the children this leader heard from
	// may stay silent before it hands leadership to another replica
	// (control.step_down_after; tiercore.CutOff): a leader cut off from its
	// children but not from its followers would otherwise lead on while the
	// children's leases run out. Default 3 report intervals; it must be
	// shorter than the lease, less the time to elect and reconnect.
	StepDownAfter time.Duration
	// ControlPolicies names the control policies (tiers/control registry:
	// straggler, doctor, autoscale) the leader runs after each round's
	// controller step; nil means control.DefaultPolicies(), an empty list none.
	// ControlPolicyConfig configures them by name.
	ControlPolicies     []string
	ControlPolicyConfig map[string]control.PolicySettings
	// Integration is how this tier cooperates with its parent and children
	// (coop.go): "decoupled" (nothing but assignments crosses the boundary),
	// "manual" (Constraints, given by an operator, join every round's view) or
	// "collaborative" (the default: hints up through the uplink, constraints
	// derived from the children's hints by tiers/coop, budgets and targets
	// down). Coop tunes collaborative mode (zero fields: tiers/coop defaults).
	Integration string
	Constraints []interfaces.Constraint
	Coop        coop.Config
	// Labels are this tier instance's labels, announced to its parent in
	// Hello (e.g. disk=ssd for a region that has ssd hosts): a shard that
	// needs a label is placed only on children that carry it.
	Labels map[string]string
	// Capacity of this tier instance, reported to the parent, is the sum of its
	// active children's capacities.

	// ACL configures the Admin API's tokens (acl.go); zero: off.
	ACL ACLConfig
	// Children says which children may register and when failed ones are
	// forgotten (admission.go); zero: any child, never forgotten.
	Children ChildrenConfig
	// TLS, when set, runs every connection of the replica over mutual TLS
	// (docs/security.md): the gRPC server (sessions from children, the Admin
	// API), the session to the parent, Raft, forwarded Admin calls and a
	// plugin policy. Its certificate must name this replica
	// (strata://TIER/INSTANCE/NODE). nil runs plaintext and logs a warning at
	// every start; the daemon's config file must then say "tls: disabled".
	TLS *tlsutil.Store
	// ParentInstance is the parent tier instance whose certificate the
	// parent's replicas must present ("global" by default under the global
	// tier; required with TLS otherwise).
	ParentInstance string
}

// ParentTier is the tier above this one in the chain ("" for the top tier).
func (c Config) ParentTier() string {
	for i, t := range c.Chain {
		if t == c.Tier && i > 0 {
			return c.Chain[i-1]
		}
	}
	return ""
}

// Defaults fills zero fields with the defaults and returns c.
func (c Config) Defaults() Config {
	if c.Interval == 0 {
		c.Interval = time.Second
	}
	if len(c.Chain) == 0 {
		c.Chain = DefaultChain()
	}
	c.ACL = c.ACL.defaults(c.DataDir)
	if c.ParentInstance == "" && c.ParentTier() == interfaces.TierGlobal {
		c.ParentInstance = "global"
	}
	if c.ChildTier == "" {
		for i, t := range c.Chain {
			if t == c.Tier && i+1 < len(c.Chain) {
				c.ChildTier = c.Chain[i+1]
			}
		}
	}
	hosts := c.ChildTier == interfaces.TierHost || c.ChildTier == ""
	if c.LeaseTTL == 0 {
		// Leases are per tier: hosts' short (a dead host's shards move
		// soon); a child tier's long, so that it outlives a failover of
		// this tier (an election and the children's reconnect) with room to
		// spare and a control-plane fault above never stops the hosts.
		c.LeaseTTL = DefaultTierLeaseTTL
		if hosts {
			c.LeaseTTL = DefaultHostLeaseTTL
		}
	}
	if c.Grace == 0 {
		c.Grace = time.Second
	}
	if c.DriftMargin == 0 {
		c.DriftMargin = 200 * time.Millisecond
	}
	if c.SolveTimeout == 0 {
		c.SolveTimeout = 2 * time.Second
	}
	if c.MaxMoves == 0 {
		c.MaxMoves = 64
	}
	if c.ReportInterval == 0 {
		// Every report renews the lease and a grant answers each: a child
		// gives its parent up when 1.5 intervals pass without one, so the
		// interval stays short even when the lease is long — shorter for
		// child tiers, which are few, than for hosts.
		c.ReportInterval = min(c.LeaseTTL/8, time.Second)
		if !hosts {
			c.ReportInterval = min(c.LeaseTTL/4, 500*time.Millisecond)
		}
	}
	if c.StepDownAfter == 0 {
		c.StepDownAfter = min(3*c.ReportInterval, c.LeaseTTL/2)
	}
	if c.Policy == "" {
		c.Policy = "local"
	}
	if c.ControlPolicies == nil {
		c.ControlPolicies = control.DefaultPolicies()
	}
	if c.Integration == "" {
		c.Integration = IntegrationCollaborative
	}
	return c
}

// The default leases (control.lease_ttl): DefaultHostLeaseTTL for a tier whose
// children are hosts, DefaultTierLeaseTTL for one whose children are tiers
// (the global tier's regions).
const (
	DefaultHostLeaseTTL = 4 * time.Second
	DefaultTierLeaseTTL = 20 * time.Second
)

// DefaultChain is global → region → host.
func DefaultChain() []string {
	return []string{interfaces.TierGlobal, interfaces.TierRegion, interfaces.TierHost}
}

// ValidateChain checks a tier chain: it starts with the global tier, ends with
// hosts, names every tier once (a repeat would be a cycle) and each name is a
// valid identifier.
func ValidateChain(chain []string) error {
	bad := func(rule string) error {
		return fmt.Errorf("chain %s: %s: %w", ChainString(chain), rule, interfaces.ErrInvalid)
	}
	if len(chain) < 2 {
		return bad("needs at least global and host")
	}
	if chain[0] != interfaces.TierGlobal {
		return bad(fmt.Sprintf("must start with %s (got %q)", interfaces.TierGlobal, chain[0]))
	}
	if chain[len(chain)-1] != interfaces.TierHost {
		return bad(fmt.Sprintf("must end with %s (got %q)", interfaces.TierHost, chain[len(chain)-1]))
	}
	seen := map[string]bool{}
	for i, t := range chain {
		if err := interfaces.ValidateID(fmt.Sprintf("chain[%d]", i), t); err != nil {
			return err
		}
		if seen[t] {
			return bad(fmt.Sprintf("tier %q appears twice (a cycle)", t))
		}
		seen[t] = true
	}
	return nil
}

// ChainString prints a chain as "global → region → host".
func ChainString(chain []string) string {
	out := ""
	for i, t := range chain {
		if i > 0 {
			out += " → "
		}
		out += t
	}
	return out
}

// Validate checks c (after Defaults), naming the field and the rule.
func (c Config) Validate() error {
	bad := func(field, rule string) error {
		return fmt.Errorf("%s: %s: %w", field, rule, interfaces.ErrInvalid)
	}
	if err := interfaces.ValidateID("tier", c.Tier); err != nil {
		return err
	}
	if err := interfaces.ValidateName("instance", c.Instance); err != nil {
		return err
	}
	if err := interfaces.ValidateName("node_id", c.NodeID); err != nil {
		return err
	}
	if err := ValidateChain(c.Chain); err != nil {
		return err
	}
	pos := -1
	for i, t := range c.Chain {
		if t == c.Tier {
			pos = i
		}
	}
	switch {
	case pos < 0:
		return bad("tier", fmt.Sprintf("unknown tier %q: the chain is %s", c.Tier, ChainString(c.Chain)))
	case pos == len(c.Chain)-1:
		return bad("tier", "hosts run 'strata host', not a tier daemon")
	case c.Tier == interfaces.TierGlobal && len(c.Parent) > 0:
		return bad("parent", "the global tier has no parent")
	case pos > 0 && len(c.Parent) == 0:
		return bad("parent", fmt.Sprintf("tier %s has no parent: give the gRPC addresses of the %s tier's replicas", c.Tier, c.Chain[pos-1]))
	case c.ChildTier != c.Chain[pos+1]:
		return bad("child_tier", fmt.Sprintf("must be %s, the next tier of the chain %s", c.Chain[pos+1], ChainString(c.Chain)))
	case c.DataDir == "":
		return bad("data_dir", "is required")
	case c.RaftAddr == "":
		return bad("listen.raft", "is required")
	case c.GRPCAddr == "":
		return bad("listen.grpc", "is required")
	}
	for _, l := range []struct{ key, addr string }{{"listen.raft", c.RaftAddr}, {"listen.grpc", c.GRPCAddr}} {
		if err := checkAdvertised(l.key, l.addr); err != nil {
			return err
		}
	}
	switch {
	case c.LeaseTTL < 100*time.Millisecond:
		return bad("control.lease_ttl", "must be ≥ 100ms")
	case c.Interval < 10*time.Millisecond:
		return bad("control.interval", "must be ≥ 10ms")
	case c.Grace < 0:
		return bad("control.grace", "must be ≥ 0")
	case c.DriftMargin < 0:
		return bad("control.drift_margin", "must be ≥ 0")
	case c.MaxMoves < 0:
		return bad("control.max_moves", "must be ≥ 0")
	case c.ReportInterval >= c.LeaseTTL:
		return bad("control.report_interval", fmt.Sprintf("must be shorter than control.lease_ttl (%v): each report renews the lease", c.LeaseTTL))
	case c.StepDownAfter <= c.ReportInterval:
		return bad("control.step_down_after", fmt.Sprintf("must be longer than control.report_interval (%v): one late report is not a cut-off", c.ReportInterval))
	case c.StepDownAfter >= c.LeaseTTL:
		return bad("control.step_down_after", fmt.Sprintf("must be shorter than control.lease_ttl (%v): the children must find the new leader before their leases end", c.LeaseTTL))
	}
	if _, err := control.NewPolicies(c.ControlPolicies, c.ControlPolicyConfig); err != nil {
		return err
	}
	if err := c.validateIntegration(); err != nil {
		return err
	}
	if err := c.ACL.validate(); err != nil {
		return err
	}
	if err := c.Children.validate(); err != nil {
		return err
	}
	if c.TLS != nil {
		want := tlsutil.Replica(c.Tier, c.Instance, c.NodeID)
		if got := c.TLS.Identity(); got != want {
			return bad("tls.cert", fmt.Sprintf("%s names %s, but this is %s (%s): issue it with 'strata tls cert --role %s'", c.TLS.Files().Cert, got, want.Describe(), want, certRoleHint(c)))
		}
		if len(c.Parent) > 0 {
			if c.ParentInstance == "" {
				return bad("parent_instance", fmt.Sprintf("is required with tls: the %s tier instance whose certificate the parent's replicas must present", c.ParentTier()))
			}
			if err := interfaces.ValidateID("parent_instance", c.ParentInstance); err != nil {
				return err
			}
		}
	}
	if c.Bootstrap {
		found := false
		for i, p := range c.Peers {
			if p.ID == "" || p.Raft == "" {
				return bad(fmt.Sprintf("peers[%d]", i), "needs id and raft")
			}
			if p.ID == c.NodeID {
				found = true
			}
		}
		if len(c.Peers) > 0 && !found {
			return bad("peers", "must include this node ("+c.NodeID+") when bootstrapping")
		}
	}
	return nil
}

// checkAdvertised checks an address that is bound and also given to peers,
// parents and the CLI (listen.raft, listen.grpc): host:port with a host they
// can dial, so not all interfaces (0.0.0.0, ::, or no host).
func checkAdvertised(key, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s: must be host:port (got %q): %w", key, addr, interfaces.ErrInvalid)
	}
	if port == "" {
		return fmt.Errorf("%s: must be host:port with a port (got %q): %w", key, addr, interfaces.ErrInvalid)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return fmt.Errorf("%s: must name an address others can dial, not all interfaces (got %q): it is bound and also advertised to peers, parents and the CLI: %w", key, addr, interfaces.ErrInvalid)
	}
	return nil
}

// certRoleHint is the 'strata tls cert' flags that issue this replica's
// certificate.
func certRoleHint(c Config) string {
	if c.Tier == interfaces.TierGlobal && c.Instance == "global" {
		return "global --id " + c.NodeID
	}
	return c.Tier + " --instance " + c.Instance + " --id " + c.NodeID
}
