package hostd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/strata-sched/strata/coordinator/hostagent"
	"github.com/strata-sched/strata/coordinator/hostagent/driver"
	"github.com/strata-sched/strata/coordinator/session"
	"github.com/strata-sched/strata/coordinator/telemetry"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/tlsutil"
)

// Config configures a host daemon.
type Config struct {
	// Host is the host's id in its parent tier.
	Host interfaces.ChildID
	// Parents are the gRPC addresses of the parent tier's replicas.
	Parents []string
	// DataDir holds the agent's bbolt store (host.db) and its ownership ledger
	// (ledger.jsonl).
	DataDir  string
	Capacity interfaces.Load
	Labels   map[string]string
	// Driver runs the shards.
	Driver driver.Driver
	// HTTPAddr serves /healthz, /readyz and /metrics; empty for none.
	HTTPAddr string
	// Clock is the wall clock in production, a fake in tests (nil = wall clock).
	Clock interfaces.Clock
	// Seed seeds the reconnect jitter.
	Seed uint64
	// TLS, when set, runs the session to the parent over mutual TLS: the
	// host's certificate must name it (strata://host/HOST) and the parent's
	// replicas must present a certificate of ParentTier (default region)
	// instance ParentInstance, so a rogue server on a parent's address is
	// refused before it can send an Assign. nil runs plaintext and logs a
	// warning at every start.
	TLS            *tlsutil.Store
	ParentTier     string
	ParentInstance string
}

// Validate checks what a host needs to start (the driver apart), naming the
// key and the rule.
func (cfg Config) Validate() error {
	if err := interfaces.ValidateName("host", string(cfg.Host)); err != nil {
		return err
	}
	if len(cfg.Parents) == 0 {
		return fmt.Errorf("parent: at least one address is required: %w", interfaces.ErrInvalid)
	}
	if cfg.DataDir == "" {
		return fmt.Errorf("data_dir: is required: %w", interfaces.ErrInvalid)
	}
	if cfg.TLS != nil {
		want := tlsutil.Named(tlsutil.RoleHost, string(cfg.Host))
		if got := cfg.TLS.Identity(); got != want {
			return fmt.Errorf("tls.cert: %s names %s, but this is host %s (%s): issue it with 'strata tls cert --role host --id %s': %w", cfg.TLS.Files().Cert, got, cfg.Host, want, cfg.Host, interfaces.ErrInvalid)
		}
		if cfg.ParentInstance == "" {
			return fmt.Errorf("parent_instance: is required with tls: the %s tier instance (e.g. eu-1) whose certificate the parent's replicas must present: %w", cfg.parentTier(), interfaces.ErrInvalid)
		}
		if err := interfaces.ValidateID("parent_instance", cfg.ParentInstance); err != nil {
			return err
		}
		if err := interfaces.ValidateID("parent_tier", cfg.parentTier()); err != nil {
			return err
		}
	}
	return interfaces.ValidateCapacity("capacity", cfg.Capacity)
}

func (cfg Config) parentTier() string {
	if cfg.ParentTier == "" {
		return interfaces.TierRegion
	}
	return cfg.ParentTier
}

// Daemon is a running host.
type Daemon struct {
	cfg     Config
	agent   *hostagent.Agent
	client  *session.Client
	metrics *telemetry.Metrics
	http    *telemetry.Server
	logger  *log.Logger
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// Start opens the agent's state and connects to the parent.
func Start(cfg Config, logOut io.Writer) (*Daemon, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Driver == nil {
		return nil, fmt.Errorf("driver: is required: %w", interfaces.ErrInvalid)
	}
	if cfg.Clock == nil {
		cfg.Clock = hostagent.WallClock{}
	}
	if logOut == nil {
		logOut = io.Discard
	}
	// Like a tier replica's, the directory is created on first start.
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("data_dir: %w", err)
	}
	d := &Daemon{cfg: cfg, logger: log.New(logOut, fmt.Sprintf("host/%s ", cfg.Host), log.LstdFlags|log.Lmicroseconds)}
	var err error
	d.agent, err = hostagent.Open(hostagent.Config{
		Host:       cfg.Host,
		StorePath:  filepath.Join(cfg.DataDir, "host.db"),
		LedgerPath: filepath.Join(cfg.DataDir, "ledger.jsonl"),
		Driver:     cfg.Driver,
		Clock:      cfg.Clock,
		Capacity:   cfg.Capacity,
	})
	if err != nil {
		return nil, err
	}
	if t := d.agent.LedgerRepair(); t != nil {
		d.logger.Printf("repaired: %s: cut off", t)
	}
	var creds credentials.TransportCredentials
	if cfg.TLS != nil {
		creds = cfg.TLS.ClientCredentials(tlsutil.IsReplicaOf(cfg.parentTier(), cfg.ParentInstance))
		d.logger.Printf("tls: on (%s, certificate valid until %s; parent must be %s %s)", cfg.TLS.Identity(), cfg.TLS.NotAfter().UTC().Format(time.RFC3339), cfg.parentTier(), cfg.ParentInstance)
	} else {
		d.logger.Printf("warning: tls: disabled: the session to the parent runs in plaintext; any server on a parent's address is believed (docs/security.md)")
	}
	d.client, err = session.NewClient(session.Config{
		Parents:     cfg.Parents,
		Hello:       d.hello,
		Report:      d.report,
		Seed:        cfg.Seed,
		Logf:        d.logger.Printf,
		Credentials: creds,
		Now:         cfg.Clock.Now, // the clock the agent's lease runs on
	}, handler{d})
	if err != nil {
		d.agent.Close()
		return nil, err
	}
	d.metrics = telemetry.NewMetrics(map[string]string{"tier": interfaces.TierHost, "host": string(cfg.Host)})
	d.metrics.Init("host")
	if cfg.HTTPAddr != "" {
		d.http, err = telemetry.Listen(cfg.HTTPAddr, d.ready, d.metrics, nil)
		if err != nil {
			d.agent.Close()
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	d.wg.Add(2)
	go func() { defer d.wg.Done(); _ = d.client.Run(ctx) }()
	go func() {
		defer d.wg.Done()
		_ = d.agent.Run(ctx, func(err error) { d.logger.Printf("tick: %v", err) })
	}()
	return d, nil
}

// Agent exposes the host agent (tests, tools).
func (d *Daemon) Agent() *hostagent.Agent { return d.agent }

// HTTPAddr is where /healthz, /readyz and /metrics are served ("" when off).
func (d *Daemon) HTTPAddr() string {
	if d.http == nil {
		return ""
	}
	return d.http.Addr()
}

func (d *Daemon) ready() error {
	if d.client.Connected() == "" {
		return errors.New("no session with the parent tier")
	}
	if _, ok := d.agent.LeaseDeadline(d.cfg.Clock.Now()); !ok {
		return errors.New("no valid lease")
	}
	return nil
}

// Close stops the session, then stops every shard and closes the agent.
func (d *Daemon) Close() error {
	d.cancel()
	d.wg.Wait()
	if d.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = d.http.Shutdown(ctx)
		cancel()
	}
	d.metrics.Close()
	return d.agent.Close()
}

func (d *Daemon) hello() *wire.Hello {
	return d.agent.HelloMessage(interfaces.TierHost, d.cfg.Labels).GetHello()
}

func (d *Daemon) report() *wire.Report {
	r := d.agent.Report(d.cfg.Clock.Now())
	s := d.metrics.Scope
	s.Gauge("host_shards_running").Update(float64(len(r.Shards)))
	s.Gauge("host_cpu_cores").Update(r.Used.CPU)
	s.Gauge("host_mem_bytes").Update(r.Used.Mem)
	s.Gauge("host_net_bytes_per_second").Update(r.Used.Net)
	s.Gauge("host_tasks").Update(r.Used.Tasks)
	for name, v := range r.Used.Extra {
		s.Tagged(map[string]string{"resource": name}).Gauge("host_extra_load").Update(v)
	}
	for name, v := range map[string]float64{"cpu": r.Capacity.CPU, "mem": r.Capacity.Mem, "net": r.Capacity.Net, "tasks": r.Capacity.Tasks} {
		s.Tagged(map[string]string{"resource": name}).Gauge("host_capacity").Update(v)
	}
	var in, done, growth float64
	for _, sl := range r.Shards {
		in += sl.InputRate
		done += sl.Rate
		if sl.InputRate > sl.Rate {
			growth += sl.InputRate - sl.Rate
		}
	}
	s.Gauge("host_input_records_per_second").Update(in)
	s.Gauge("host_processed_records_per_second").Update(done)
	s.Gauge("host_lag_growth_records_per_second").Update(growth)
	s.Gauge("host_latency_p99_seconds").Update(r.LatencyP99.Seconds())
	// What a stream worker reads from its broker (sdk/stream): the records
	// waiting; and the shards' Rate summed under the name stream workers
	// document (records per busy second: the true processing rate).
	var lag float64
	for _, sl := range r.Shards {
		lag += sl.Lag
	}
	s.Gauge("host_lag_records").Update(lag)
	s.Gauge("host_rate_records_per_second").Update(r.Throughput)
	return wire.ReportToWire(r)
}

type handler struct{ d *Daemon }

func (h handler) OnLease(g *wire.LeaseGrant, from time.Time) {
	// The lease runs from our own send of the report (or Hello) the grant
	// answers (the session client reads it from cfg.Clock), never from the
	// grant's receipt: a grant that arrives late renews only what is left of
	// it. A grant too short to keep the safety margin renews nothing, quietly.
	if err := h.d.agent.LeaseGrant(context.Background(), from, time.Duration(g.GetTtlNanos()), nil); err != nil {
		h.d.logger.Printf("lease: %v", err)
	}
}

func (h handler) OnAssign(a *wire.Assign) *wire.Ack {
	spec, err := wire.ShardFromWire(a.GetShard())
	if err == nil {
		err = h.d.agent.Assign(context.Background(), h.d.cfg.Clock.Now(), spec, interfaces.Epoch(a.GetEpoch()))
	}
	if err != nil {
		h.d.logger.Printf("assign %s@%d: %v", a.GetShard().GetId(), a.GetEpoch(), err)
	}
	return h.d.agent.AssignAck(interfaces.ShardID(a.GetShard().GetId()), interfaces.Epoch(a.GetEpoch()), err).GetAck()
}

func (h handler) OnRevoke(r *wire.Revoke) *wire.Ack {
	err := h.d.agent.Revoke(context.Background(), h.d.cfg.Clock.Now(), interfaces.ShardID(r.GetShard()), interfaces.Epoch(r.GetEpoch()))
	if err != nil {
		h.d.logger.Printf("revoke %s@%d: %v", r.GetShard(), r.GetEpoch(), err)
	}
	return wire.AckToWire(wire.AckKind_ACK_KIND_REVOKE, interfaces.ShardID(r.GetShard()), interfaces.Epoch(r.GetEpoch()), err).GetAck()
}

func (h handler) OnConstraints(*wire.Constraints) {}

func (h handler) OnDisconnect(err error) {
	h.d.logger.Printf("session ended: %v (shards keep running until the lease expires)", err)
}
