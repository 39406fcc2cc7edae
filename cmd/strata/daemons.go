package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/strata-sched/strata/coordinator/hostagent"
	"github.com/strata-sched/strata/coordinator/hostagent/driver"
	"github.com/strata-sched/strata/coordinator/hostagent/driver/callback"
	"github.com/strata-sched/strata/coordinator/hostagent/driver/execdriver"
	"github.com/strata-sched/strata/coordinator/hostagent/driver/synthetic"
	synexec "github.com/strata-sched/strata/coordinator/hostagent/driver/synthetic/exec"
	"github.com/strata-sched/strata/coordinator/hostd"
	"github.com/strata-sched/strata/coordinator/telemetry"
	"github.com/strata-sched/strata/coordinator/tierd"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/tlsutil"
	"github.com/strata-sched/strata/tiers"
)

func init() {
	commands = append(commands,
		func(g *globalOptions) *cobra.Command { return newTierDaemonCmd(g, interfaces.TierGlobal) },
		func(g *globalOptions) *cobra.Command { return newTierDaemonCmd(g, interfaces.TierRegion) },
		newTierCmd, newHostDaemonCmd)
}

// tierOverrides are the flags that override a tier config file.
type tierOverrides struct {
	config, nodeID, dataDir, raft, grpcAddr, http, instance string
	parent                                                  []string
	bootstrap, checkConfig                                  bool
}

func (o *tierOverrides) register(cmd *cobra.Command, withInstance bool) {
	f := cmd.Flags()
	f.StringVarP(&o.config, "config", "c", "", "YAML configuration file (required)")
	f.StringVar(&o.nodeID, "node-id", "", "override node_id")
	f.StringVar(&o.dataDir, "data-dir", "", "override data_dir")
	f.StringVar(&o.raft, "listen-raft", "", "override listen.raft")
	f.StringVar(&o.grpcAddr, "listen-grpc", "", "override listen.grpc")
	f.StringVar(&o.http, "listen-http", "", "override listen.http")
	f.StringSliceVar(&o.parent, "parent", nil, "override parent (the parent tier's gRPC addresses, comma-separated)")
	f.BoolVar(&o.bootstrap, "bootstrap", false, "bootstrap a new Raft group with the configured peers (only on first start)")
	f.BoolVar(&o.checkConfig, "check-config", false, "check the configuration (keys, values, chain, policy) and exit: 0 when it is valid; binds nothing, opens nothing")
	if withInstance {
		f.StringVar(&o.instance, "instance", "", "override instance")
	}
	_ = cmd.MarkFlagRequired("config")
}

func (o *tierOverrides) apply(f *tierFile, cmd *cobra.Command) {
	set := func(flag string, dst *string, v string) {
		if cmd.Flags().Changed(flag) {
			*dst = v
		}
	}
	set("node-id", &f.NodeID, o.nodeID)
	set("data-dir", &f.DataDir, o.dataDir)
	set("listen-raft", &f.Listen.Raft, o.raft)
	set("listen-grpc", &f.Listen.GRPC, o.grpcAddr)
	set("listen-http", &f.Listen.HTTP, o.http)
	set("instance", &f.Instance, o.instance)
	if cmd.Flags().Changed("parent") {
		f.Parent = o.parent
	}
	if cmd.Flags().Changed("bootstrap") {
		f.Bootstrap = o.bootstrap
	}
}

func newTierDaemonCmd(g *globalOptions, tier string) *cobra.Command {
	var o tierOverrides
	short := map[string]string{
		interfaces.TierGlobal: "Run a replica of the global tier: places shards onto regions",
		interfaces.TierRegion: "Run a replica of a region tier: places its shards onto hosts",
	}[tier]
	cmd := &cobra.Command{
		Use:   tier + " --config FILE",
		Short: short,
		Long: short + `.

The configuration file is YAML (see docs/operations.md and deploy/examples/); flags
override its keys. The replica serves the session protocol and the Admin API on
listen.grpc, Raft on listen.raft, and /healthz, /readyz and /metrics on listen.http.
SIGTERM or SIGINT stops it gracefully.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var f tierFile
			if err := readConfig(o.config, &f); err != nil {
				return err
			}
			if f.Tier == "" {
				f.Tier = tier
			}
			if f.Tier != tier {
				return fmt.Errorf("%s: tier: is %q, but this is 'strata %s' (use 'strata tier' for custom tiers)", o.config, f.Tier, tier)
			}
			o.apply(&f, cmd)
			if o.checkConfig {
				return checkTierConfig(g, o.config, f)
			}
			return runTier(cmd.Context(), g, f)
		},
	}
	o.register(cmd, tier != interfaces.TierGlobal)
	if tier == interfaces.TierRegion {
		cmd.Use = "region --config FILE | region drain|undrain REGION"
		cmd.Long += `

"strata region drain REGION" and "strata region undrain REGION" act on a running
cluster (see their --help).`
		addDrainCommands(g, cmd, interfaces.TierRegion)
	}
	return cmd
}

func newTierCmd(g *globalOptions) *cobra.Command {
	var o tierOverrides
	cmd := &cobra.Command{
		Use:   "tier --config FILE | tier drain|undrain CHILD",
		Short: "Run a replica of any tier named in its config (global, region or a custom tier), or drain and undrain a child of any tier",
		Long: `Run a replica of any tier named in its config (global, region or a custom tier).

"strata tier drain CHILD" and "strata tier undrain CHILD" act on a running
cluster: CHILD is a child of any tier instance (a region, a host, a rack).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var f tierFile
			if err := readConfig(o.config, &f); err != nil {
				return err
			}
			o.apply(&f, cmd)
			if o.checkConfig {
				return checkTierConfig(g, o.config, f)
			}
			return runTier(cmd.Context(), g, f)
		},
	}
	o.register(cmd, true)
	addDrainCommands(g, cmd, "")
	return cmd
}

// signalContext returns a context cancelled by SIGINT or SIGTERM.
func signalContext(parent context.Context) (context.Context, context.CancelFunc) {
	if parent == nil {
		parent = context.Background()
	}
	return signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
}

func runTier(ctx context.Context, g *globalOptions, f tierFile) error {
	cfg, err := f.tierConfig(g.stderr)
	if err != nil {
		return err
	}
	ctx, stop := signalContext(ctx)
	defer stop()
	if !cfg.ACL.Enabled {
		fmt.Fprintf(g.stderr, "strata %s %s/%s: warning: acl: disabled: the Admin API at %s (jobs, drains, plans, Raft membership) accepts every call from anyone who can reach it; see docs/security.md\n",
			cfg.Tier, cfg.Instance, cfg.NodeID, cfg.GRPCAddr)
	}
	telemetry.OneDaemonProcess() // raft's own metrics are this daemon's
	d, err := tierd.Start(cfg, g.stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(g.stderr, "strata %s %s/%s: serving on %s (grpc)", cfg.Tier, cfg.Instance, cfg.NodeID, d.GRPCAddr())
	if a := d.HTTPAddr(); a != "" {
		fmt.Fprintf(g.stderr, ", %s (http)", a)
	}
	fmt.Fprintln(g.stderr)
	<-ctx.Done()
	fmt.Fprintln(g.stderr, "shutting down")
	return d.Close()
}

type hostOverrides struct {
	config, host, dataDir, http string
	parent                      []string
	checkConfig                 bool
}

func newHostDaemonCmd(g *globalOptions) *cobra.Command {
	var o hostOverrides
	cmd := &cobra.Command{
		Use:   "host --config FILE | host drain|undrain HOST",
		Short: "Run a host agent (--config), or drain and undrain a host",
		Long: `Run a host agent: it connects to the leader of its parent tier, runs the shards
assigned to it through its driver (synthetic, exec or callback), keeps what it owns in
a local bbolt file so a restart resumes without asking anyone, and stops its shards
when its lease expires. SIGTERM or SIGINT stops it gracefully.

"strata host drain HOST" and "strata host undrain HOST" act on a running cluster
(see their --help).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var f hostFile
			if err := readConfig(o.config, &f); err != nil {
				return err
			}
			fl := cmd.Flags()
			if fl.Changed("host") {
				f.Host = o.host
			}
			if fl.Changed("data-dir") {
				f.DataDir = o.dataDir
			}
			if fl.Changed("listen-http") {
				f.Listen.HTTP = o.http
			}
			if fl.Changed("parent") {
				f.Parent = o.parent
			}
			if o.checkConfig {
				if err := checkHostFile(f, g.stderr); err != nil {
					return usageErr(fmt.Errorf("%s: %w", o.config, err))
				}
				fmt.Fprintf(g.stdout, "config ok: host %s, parent %v, driver %s\n", f.Host, f.Parent, driverKind(f.Driver))
				return nil
			}
			return runHost(cmd.Context(), g, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&o.config, "config", "c", "", "YAML configuration file (required)")
	fl.StringVar(&o.host, "host", "", "override host")
	fl.StringVar(&o.dataDir, "data-dir", "", "override data_dir")
	fl.StringVar(&o.http, "listen-http", "", "override listen.http")
	fl.StringSliceVar(&o.parent, "parent", nil, "override parent (the region's gRPC addresses, comma-separated)")
	fl.BoolVar(&o.checkConfig, "check-config", false, "check the configuration and exit: 0 when it is valid; binds nothing, opens nothing")
	_ = cmd.MarkFlagRequired("config")
	addDrainCommands(g, cmd, interfaces.TierHost)
	return cmd
}

// hostDriver builds the driver a host file names; stop releases what it holds.
// With TLS (store non-nil) the callback Worker service takes only workers with
// a worker certificate of the CA; without, it must listen on loopback.
func hostDriver(f driverFile, host string, cpu float64, store *tlsutil.Store) (drv driver.Driver, stop func(), err error) {
	if err := validateDriver(f, store != nil); err != nil {
		return nil, nil, err
	}
	clock := hostagent.WallClock{}
	stop = func() {}
	switch f.Kind {
	case "", "synthetic":
		var cores float64
		if f.Synthetic.Execute {
			cores = cpu
		}
		drv, err = synthetic.New(synthetic.Config{Clock: clock, Seed: f.Synthetic.Seed, Wave: f.Synthetic.Wave,
			Period: time.Duration(f.Synthetic.Period), Noise: f.Synthetic.Noise, BaseLatency: time.Duration(f.Synthetic.BaseLatency),
			Cores: cores, Discipline: f.Synthetic.Discipline})
	case "exec":
		var ed *execdriver.Driver
		self, xerr := os.Executable()
		if xerr != nil {
			return nil, nil, fmt.Errorf("driver.exec: find this binary to run the shards' supervisors: %w", xerr)
		}
		ed, err = execdriver.New(execdriver.Config{Command: f.Exec.Command, Env: f.Exec.Env, EnvPass: f.Exec.EnvPass, Dir: f.Exec.Dir,
			Supervisor: []string{self, superviseCmd}, StopTimeout: time.Duration(f.Exec.StopTimeout), Clock: clock, Output: os.Stderr, Host: host})
		if err == nil {
			if ed.Reaped > 0 {
				fmt.Fprintf(os.Stderr, "strata: killed %d process group(s) a previous run of host %s left running\n", ed.Reaped, host)
			}
			drv = ed
		}
	case "callback":
		cb, cerr := callback.New(callback.Config{AckTimeout: time.Duration(f.Callback.AckTimeout), Clock: clock})
		if cerr != nil {
			return nil, nil, cerr
		}
		lis, lerr := net.Listen("tcp", f.Callback.Listen)
		if lerr != nil {
			return nil, nil, fmt.Errorf("driver.callback.listen %s: %w", f.Callback.Listen, lerr)
		}
		sopts := callback.ServerOptions()
		if store != nil {
			sopts = append(sopts, grpc.Creds(store.ServerCredentials(tlsutil.IsRole(tlsutil.RoleWorker), func(format string, args ...any) {
				fmt.Fprintf(os.Stderr, "host %s: callback: "+format+"\n", append([]any{host}, args...)...)
			})))
		}
		srv := grpc.NewServer(sopts...)
		wire.RegisterWorkerServer(srv, cb)
		go func() { _ = srv.Serve(lis) }()
		drv, stop = cb, srv.Stop
	}
	return drv, stop, err
}

func runHost(ctx context.Context, g *globalOptions, f hostFile) error {
	cfg, err := f.hostConfig(g.stderr)
	if err != nil {
		return err
	}
	drv, stopDriver, err := hostDriver(f.Driver, string(cfg.Host), cfg.Capacity.CPU, cfg.TLS)
	if err != nil {
		return err
	}
	defer stopDriver()
	ctx, stop := signalContext(ctx)
	defer stop()
	cfg.Driver = drv
	telemetry.OneDaemonProcess()
	d, err := hostd.Start(cfg, g.stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(g.stderr, "strata host %s: connecting to %v\n", f.Host, f.Parent)
	<-ctx.Done()
	fmt.Fprintln(g.stderr, "shutting down")
	return d.Close()
}

// checkTierConfig validates a tier file as the daemon would at start-up,
// including its policy, without binding or opening anything.
func checkTierConfig(g *globalOptions, path string, f tierFile) error {
	cfg, err := f.tierConfig(g.stderr)
	var pol interfaces.Policy
	if err == nil {
		pol, err = tiers.New(cfg.Policy, cfg.PolicyConfig)
	}
	if err != nil {
		return usageErr(fmt.Errorf("%s: %w", path, err))
	}
	if c, ok := pol.(io.Closer); ok {
		defer c.Close() // a plugin policy holds a client connection
	}
	for _, w := range tierd.PolicyWarnings(cfg.Defaults(), pol) {
		fmt.Fprintf(g.stderr, "strata: warning: %s: %s\n", path, w)
	}
	fmt.Fprintf(g.stdout, "config ok: tier %s, instance %s, node %s, chain %s, policy %s\n",
		cfg.Tier, cfg.Instance, cfg.NodeID, tierd.ChainString(cfg.Chain), cfg.Policy)
	return nil
}

func driverKind(f driverFile) string {
	if f.Kind == "" {
		return "synthetic"
	}
	return f.Kind
}

// checkHostFile validates a host file as the daemon would at start-up.
func checkHostFile(f hostFile, logOut io.Writer) error {
	cfg, err := f.hostConfig(logOut)
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	return validateDriver(f.Driver, cfg.TLS != nil)
}

// hostConfig turns a host file into the daemon's configuration (no driver);
// it opens the TLS files (reloads are logged to logOut).
func (f hostFile) hostConfig(logOut io.Writer) (hostd.Config, error) {
	capacity, err := f.Capacity.load("capacity")
	if err != nil {
		return hostd.Config{}, err
	}
	store, err := f.TLS.open(logOut)
	if err != nil {
		return hostd.Config{}, err
	}
	return hostd.Config{Host: interfaces.ChildID(f.Host), Parents: f.Parent, DataDir: f.DataDir,
		Capacity: capacity, Labels: f.Labels, HTTPAddr: f.Listen.HTTP,
		TLS: store, ParentTier: f.ParentTier, ParentInstance: f.ParentInstance}, nil
}

// validateDriver checks a driver section without starting anything; withTLS
// tells whether the host runs with TLS (else a callback service must listen
// on loopback).
func validateDriver(f driverFile, withTLS bool) error {
	switch f.Kind {
	case "", "synthetic":
		if _, err := synexec.ParseDiscipline("driver.synthetic.discipline", f.Synthetic.Discipline); err != nil {
			return err
		}
	case "exec":
		if len(f.Exec.Command) == 0 {
			return fmt.Errorf("driver.exec.command: is required for driver kind exec: %w", interfaces.ErrInvalid)
		}
		if err := execdriver.CheckEnv(f.Exec.Env, f.Exec.EnvPass); err != nil {
			return fmt.Errorf("driver.%w", err)
		}
		if t := time.Duration(f.Exec.StopTimeout); t > driver.MaxStopTimeout {
			return fmt.Errorf("driver.exec.stop_timeout: must be at most %v (the region waits this long for a silent host's shards to stop before moving them; got %v): %w", driver.MaxStopTimeout, t, interfaces.ErrInvalid)
		}
	case "callback":
		if f.Callback.Listen == "" {
			return fmt.Errorf("driver.callback.listen: is required for driver kind callback: %w", interfaces.ErrInvalid)
		}
		if !withTLS {
			if err := checkLoopback("driver.callback.listen", f.Callback.Listen); err != nil {
				return err
			}
		}
		if t := time.Duration(f.Callback.AckTimeout); t > callback.MaxAckTimeout {
			return fmt.Errorf("driver.callback.ack_timeout: must be at most %v (the region waits three of them for a silent host's shards to stop before moving them; got %v): %w", callback.MaxAckTimeout, t, interfaces.ErrInvalid)
		}
	default:
		return fmt.Errorf("driver.kind: must be synthetic, exec or callback (got %q): %w", f.Kind, interfaces.ErrInvalid)
	}
	return nil
}
