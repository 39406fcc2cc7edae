package tierd

import (
	"fmt"
	"time"

	"github.com/strata-sched/strata/interfaces"
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
	Interval     time.Duration
	LeaseTTL     time.Duration
	Grace        time.Duration
	SolveTimeout time.Duration
	MaxMoves     int
	// ReportInterval is how often children report (sent in LeaseGrant).
	ReportInterval time.Duration
	// Capacity of this tier instance, reported to the parent, is the sum of its
	// active children's capacities.
}

// Defaults fills zero fields with the defaults and returns c.
func (c Config) Defaults() Config {
	if c.Interval == 0 {
		c.Interval = time.Second
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = 4 * time.Second
	}
	if c.Grace == 0 {
		c.Grace = time.Second
	}
	if c.SolveTimeout == 0 {
		c.SolveTimeout = 2 * time.Second
	}
	if c.MaxMoves == 0 {
		c.MaxMoves = 64
	}
	if c.ReportInterval == 0 {
		c.ReportInterval = c.LeaseTTL / 4
	}
	if c.Policy == "" {
		c.Policy = "local"
	}
	if c.ChildTier == "" {
		switch c.Tier {
		case interfaces.TierGlobal:
			c.ChildTier = interfaces.TierRegion
		default:
			c.ChildTier = interfaces.TierHost
		}
	}
	return c
}

// Validate checks c (after Defaults), naming the field and the rule.
func (c Config) Validate() error {
	bad := func(field, rule string) error {
		return fmt.Errorf("%s: %s: %w", field, rule, interfaces.ErrInvalid)
	}
	if err := interfaces.ValidateID("tier", c.Tier); err != nil {
		return err
	}
	if err := interfaces.ValidateID("instance", c.Instance); err != nil {
		return err
	}
	if err := interfaces.ValidateID("node_id", c.NodeID); err != nil {
		return err
	}
	switch {
	case c.DataDir == "":
		return bad("data_dir", "is required")
	case c.RaftAddr == "":
		return bad("listen.raft", "is required")
	case c.GRPCAddr == "":
		return bad("listen.grpc", "is required")
	case c.LeaseTTL < 100*time.Millisecond:
		return bad("control.lease_ttl", "must be ≥ 100ms")
	case c.Interval < 10*time.Millisecond:
		return bad("control.interval", "must be ≥ 10ms")
	case c.Grace < 0:
		return bad("control.grace", "must be ≥ 0")
	case c.MaxMoves < 0:
		return bad("control.max_moves", "must be ≥ 0")
	case c.Tier == interfaces.TierGlobal && len(c.Parent) > 0:
		return bad("parent", "the global tier has no parent")
	case c.Tier != interfaces.TierGlobal && len(c.Parent) == 0:
		return bad("parent", "is required for every tier below global")
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
