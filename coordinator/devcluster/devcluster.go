package devcluster

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/strata-sched/strata/coordinator/hostagent"
	"github.com/strata-sched/strata/coordinator/hostagent/driver/synthetic"
	"github.com/strata-sched/strata/coordinator/hostagent/ledger"
	"github.com/strata-sched/strata/coordinator/hostd"
	"github.com/strata-sched/strata/coordinator/tierd"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/tiers/control"
)

// Options shape the cluster.
type Options struct {
	// Dir holds every daemon's data; required.
	Dir string
	// GlobalAddr is the global tier's gRPC (Admin) address; "127.0.0.1:0" picks
	// a free port. GlobalRaftAdmin, when set, is where the global replica serves
	// its Raft admin endpoint ("strata raft").
	GlobalAddr      string
	GlobalRaftAdmin string
	// GlobalHTTP is where the global replica serves /healthz, /readyz,
	// /metrics and the dashboard (/ui/); default "127.0.0.1:0" (a free port,
	// like every other daemon's: Endpoints lists them).
	GlobalHTTP string
	Regions    int
	// HostsPerRegion hosts, each with HostCapacity.
	HostsPerRegion int
	HostCapacity   interfaces.Load
	// Interval, LeaseTTL and Grace tune every tier's control loop (defaults:
	// 500ms, 3s, 500ms).
	Interval, LeaseTTL, Grace time.Duration
	// Policy of the global and region tiers (default "local").
	Policy string
	// RegionPolicy and RegionPolicyConfig, when set, replace the regions' policy
	// (e.g. an external "plugin").
	RegionPolicy       string
	RegionPolicyConfig interfaces.PolicyConfig
	// ControlPolicies and ControlPolicyConfig select and configure every
	// tier's control policies (nil: the daemons' default).
	ControlPolicies     []string
	ControlPolicyConfig map[string]control.PolicySettings
	// HostDriver, when set, gives a host's synthetic driver settings (e.g.
	// execution on, per host); Clock and Seed are filled in when zero.
	HostDriver func(host string) synthetic.Config
	// Log receives every daemon's log; nil discards.
	Log io.Writer
}

// Cluster is a running in-process hierarchy.
type Cluster struct {
	Global  *tierd.Daemon
	Regions map[string]*tierd.Daemon
	Hosts   map[string]*hostd.Daemon
	// Drivers are the hosts' synthetic workers (to change a shard's load).
	Drivers map[string]*synthetic.Driver
	// HostRegion maps each host to its region.
	HostRegion map[string]string
	opts       Options
	closed     bool
}

func (o Options) withDefaults() Options {
	if o.GlobalAddr == "" {
		o.GlobalAddr = "127.0.0.1:0"
	}
	if o.Regions == 0 {
		o.Regions = 2
	}
	if o.HostsPerRegion == 0 {
		o.HostsPerRegion = 4
	}
	if o.HostCapacity.IsZero() {
		o.HostCapacity = interfaces.Load{CPU: 16, Mem: 64 << 30, Net: 10 << 30, Tasks: 200}
	}
	if o.Interval == 0 {
		o.Interval = 500 * time.Millisecond
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = 3 * time.Second
	}
	if o.Grace == 0 {
		o.Grace = 500 * time.Millisecond
	}
	return o
}

func (o Options) tier(tier, instance, addr string, parent []string) tierd.Config {
	return tierd.Config{
		Tier: tier, Instance: instance, NodeID: instance + "-1",
		DataDir:  filepath.Join(o.Dir, tier, instance),
		RaftAddr: "127.0.0.1:0", GRPCAddr: addr, HTTPAddr: "127.0.0.1:0", Bootstrap: true,
		Parent: parent, Policy: o.Policy,
		Interval: o.Interval, LeaseTTL: o.LeaseTTL, Grace: o.Grace,
		ControlPolicies: o.ControlPolicies, ControlPolicyConfig: o.ControlPolicyConfig,
	}
}

// Start brings the hierarchy up and waits until every tier has a leader.
func Start(o Options) (*Cluster, error) {
	if o.Dir == "" {
		return nil, errors.New("devcluster: Dir is required")
	}
	o = o.withDefaults()
	c := &Cluster{Regions: map[string]*tierd.Daemon{}, Hosts: map[string]*hostd.Daemon{}, Drivers: map[string]*synthetic.Driver{}, HostRegion: map[string]string{}, opts: o}
	var err error
	gcfg := o.tier(interfaces.TierGlobal, "global", o.GlobalAddr, nil)
	gcfg.AdminAddr = o.GlobalRaftAdmin
	if o.GlobalHTTP != "" {
		gcfg.HTTPAddr = o.GlobalHTTP
	}
	c.Global, err = tierd.Start(gcfg, o.Log)
	if err != nil {
		return nil, fmt.Errorf("global: %w", err)
	}
	if err := waitLeader(c.Global); err != nil {
		c.Close()
		return nil, err
	}
	for r := 1; r <= o.Regions; r++ {
		name := fmt.Sprintf("region-%d", r)
		cfg := o.tier(interfaces.TierRegion, name, "127.0.0.1:0", []string{c.Global.GRPCAddr()})
		if o.RegionPolicy != "" {
			cfg.Policy, cfg.PolicyConfig = o.RegionPolicy, o.RegionPolicyConfig
		}
		d, err := tierd.Start(cfg, o.Log)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		c.Regions[name] = d
		if err := waitLeader(d); err != nil {
			c.Close()
			return nil, err
		}
		for h := 1; h <= o.HostsPerRegion; h++ {
			host := fmt.Sprintf("%s-host-%d", name, h)
			if err := c.StartHost(host, name); err != nil {
				c.Close()
				return nil, err
			}
		}
	}
	return c, nil
}

// StartHost starts (or restarts) a host under region, keeping its data dir.
func (c *Cluster) StartHost(host, region string) error {
	dir := filepath.Join(c.opts.Dir, "host", host)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	dc := synthetic.Config{}
	if c.opts.HostDriver != nil {
		dc = c.opts.HostDriver(host)
	}
	if dc.Clock == nil {
		dc.Clock = hostagent.WallClock{}
	}
	if dc.Seed == 0 {
		dc.Seed = uint64(len(host))
	}
	drv, err := synthetic.New(dc)
	if err != nil {
		return err
	}
	d, err := hostd.Start(hostd.Config{
		Host: interfaces.ChildID(host), Parents: []string{c.Regions[region].GRPCAddr()},
		DataDir: dir, Capacity: c.opts.HostCapacity, Driver: drv, HTTPAddr: "127.0.0.1:0",
		Labels: map[string]string{"region": region},
	}, c.opts.Log)
	if err != nil {
		return fmt.Errorf("%s: %w", host, err)
	}
	c.Hosts[host] = d
	c.Drivers[host] = drv
	c.HostRegion[host] = region
	return nil
}

// LedgerPaths lists every host's ownership ledger.
func (c *Cluster) LedgerPaths() []string {
	var out []string
	for h := range c.HostRegion {
		out = append(out, filepath.Join(c.opts.Dir, "host", h, "ledger.jsonl"))
	}
	return out
}

func waitLeader(d *tierd.Daemon) error {
	deadline := time.Now().Add(10 * time.Second)
	for !d.IsLeader() {
		if time.Now().After(deadline) {
			return errors.New("no leader after 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// Close stops hosts, then regions, then the global tier. Closing twice is a
// no-op.
func (c *Cluster) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	var errs []error
	for _, h := range c.Hosts {
		errs = append(errs, h.Close())
	}
	for _, r := range c.Regions {
		errs = append(errs, r.Close())
	}
	if c.Global != nil {
		errs = append(errs, c.Global.Close())
	}
	return errors.Join(errs...)
}

// CloseAndCheckLedger stops the cluster and checks the ownership ledgers of every
// host that ever ran in it: no shard ran on two hosts at once, and epochs never
// went back. It returns an error naming every violation.
func (c *Cluster) CloseAndCheckLedger() error {
	closeErr := c.Close()
	res, err := ledger.Check(c.LedgerPaths()...)
	if err != nil {
		return err
	}
	if err := res.Err(); err != nil {
		return fmt.Errorf("ownership ledger (%d events): %w", res.Events, err)
	}
	return closeErr
}

// Settle waits until no host's set of running shards has changed for quiet, or
// returns an error after timeout: the periodic rounds are done moving.
func (c *Cluster) Settle(quiet, timeout time.Duration) error {
	snapshot := func() string {
		names := make([]string, 0, len(c.Hosts))
		for name := range c.Hosts {
			names = append(names, name)
		}
		sort.Strings(names)
		out := ""
		for _, name := range names {
			out += fmt.Sprintf("%s:%v;", name, c.Hosts[name].Agent().Running())
		}
		return out
	}
	deadline := time.Now().Add(timeout)
	last, since := snapshot(), time.Now()
	for time.Since(since) < quiet {
		if time.Now().After(deadline) {
			return fmt.Errorf("placement did not settle within %v", timeout)
		}
		time.Sleep(50 * time.Millisecond)
		if now := snapshot(); now != last {
			last, since = now, time.Now()
		}
	}
	return nil
}

// Endpoint is one daemon of the cluster and where it listens.
type Endpoint struct {
	// Name is "global", a region's or a host's name; Tier is its tier.
	Name, Tier string
	// GRPC is the Admin (and session) address of a tier replica, "" for a
	// host; HTTP serves /healthz, /readyz, /metrics (and a tier's dashboard).
	GRPC, HTTP string
}

// Endpoints lists every daemon: the global tier, the regions, then the hosts,
// each group sorted by name.
func (c *Cluster) Endpoints() []Endpoint {
	out := []Endpoint{{Name: "global", Tier: interfaces.TierGlobal, GRPC: c.Global.GRPCAddr(), HTTP: c.Global.HTTPAddr()}}
	for _, name := range sortedKeys(c.Regions) {
		d := c.Regions[name]
		out = append(out, Endpoint{Name: name, Tier: interfaces.TierRegion, GRPC: d.GRPCAddr(), HTTP: d.HTTPAddr()})
	}
	for _, name := range sortedKeys(c.Hosts) {
		out = append(out, Endpoint{Name: name, Tier: interfaces.TierHost, HTTP: c.Hosts[name].HTTPAddr()})
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
