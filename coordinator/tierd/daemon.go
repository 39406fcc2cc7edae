package tierd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/strata-sched/strata/balancer"
	"github.com/strata-sched/strata/coordinator/dashboard"
	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/coordinator/raftnode"
	"github.com/strata-sched/strata/coordinator/session"
	"github.com/strata-sched/strata/coordinator/telemetry"
	"github.com/strata-sched/strata/coordinator/tiercore"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/logx"
	"github.com/strata-sched/strata/internal/tlsutil"
	"github.com/strata-sched/strata/tiers"
	"github.com/strata-sched/strata/tiers/control"
)

// Daemon is one running replica of a tier instance.
type Daemon struct {
	wire.UnimplementedSessionServer
	wire.UnimplementedAdminServer

	cfg     Config
	tier    *raftnode.Tier
	owned   ownedIndex // children's assignments, for report reconciliation (sessions.go)
	policy  interfaces.Policy
	grpc    *grpc.Server
	lis     net.Listener
	metrics *telemetry.Metrics
	scope   *telemetry.Scope
	http    *telemetry.Server
	ui      *dashboard.Server // the web dashboard at /ui/ (nil without listen.http)
	logger  *log.Logger

	// decide serialises the decisions that read the FSM and then commit and
	// send based on what they read: a control round, a revoke or assign from the
	// parent, a child's revoke ack, a child tier's capacity update, and the
	// Admin writes (docs/threads.md lists them). Without it a round could place
	// a shard that a concurrent revoke from the parent is deleting. Never held
	// while waiting on the network, only on Raft commits.
	decide sync.Mutex

	mu        sync.Mutex
	sessions  map[interfaces.ChildID]*childSession
	lastGrant map[interfaces.ChildID]time.Time
	// heard is when this replica last sent each child a grant, in any of
	// its terms (the cut-off watch, stepdown.go): unlike lastGrant it
	// survives a step-down, so a replica cut off from its children that Raft
	// elects again still knows whom it lost.
	heard       map[interfaces.ChildID]time.Time
	reports     map[interfaces.ChildID]interfaces.Report
	addrs       map[interfaces.ChildID]string // children's admin (gRPC) addresses, from Hello
	leader      bool
	leaderSince time.Time
	// leaderTerm is the Raft term this replica leads in (when leader): a grant
	// is sent only in it, and a change of term is a step-down (trackLeadership).
	leaderTerm uint64
	// declaring holds the children being declared failed (declareFailed):
	// no lease is granted to them meanwhile.
	declaring  map[interfaces.ChildID]bool
	revokeSent map[interfaces.ShardID]time.Time // in-flight moves: when Revoke was last sent
	assignSent tiercore.Assigns                 // the last Assign sent per shard, and its ack
	// refused holds the Assigns a child tier refused (e.g. a region without
	// a lease from us yet), to send again (retryRefused): unlike a host's, a
	// tier's reports do not list its shards, so nothing else would.
	refused map[interfaces.ShardID]time.Time
	deleted map[interfaces.ShardID]uint64 // shards deleted here: the wire epoch they had
	plans   map[string]pendingPlan        // what-if plans by token (Plan, ApplyPlan)
	// lastRejections are the moves the last verification refused, with why.
	lastRejections []balancer.Rejection
	alerts         []string // the controller's alerts of the last round

	// ctl is the leader's controller (tiers/control), made when this replica
	// becomes leader; only the control-loop goroutine uses it.
	ctl *control.Controller
	// pol holds the control policies (straggler, doctor, autoscale).
	pol policyState

	up *uplink // nil for the top tier
	// raftEvents wakes the uplink's leadership watcher on every Raft state
	// change of this replica (a raft observer; nil for the top tier).
	raftEvents chan raft.Observation
	observer   *raft.Observer

	coop coopState // cooperation between tiers (coop.go)

	acl aclState // the bootstrap token (acl.go)
	// failedSince is when the control loop first saw each failed child
	// (admission.go, children.gc_after); the loop's goroutine only.
	failedSince map[interfaces.ChildID]time.Time
	place       placementState // held moves and infeasible shards of the rounds (placement.go)

	wake   chan struct{}
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// Start opens the replica's Raft state, starts its servers and its control loop.
// logOut receives the daemon's log; nil discards it.
func Start(cfg Config, logOut io.Writer) (*Daemon, error) {
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logOut == nil {
		logOut = io.Discard
	}
	policy, err := tiers.New(cfg.Policy, cfg.PolicyConfig)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	d := &Daemon{
		cfg:        cfg,
		policy:     policy,
		logger:     log.New(logOut, fmt.Sprintf("%s/%s/%s ", cfg.Tier, cfg.Instance, cfg.NodeID), log.LstdFlags|log.Lmicroseconds),
		sessions:   map[interfaces.ChildID]*childSession{},
		lastGrant:  map[interfaces.ChildID]time.Time{},
		heard:      map[interfaces.ChildID]time.Time{},
		reports:    map[interfaces.ChildID]interfaces.Report{},
		addrs:      map[interfaces.ChildID]string{},
		revokeSent: map[interfaces.ShardID]time.Time{},
		refused:    map[interfaces.ShardID]time.Time{},
		deleted:    map[interfaces.ShardID]uint64{},
		declaring:  map[interfaces.ChildID]bool{},
		wake:       make(chan struct{}, 1),
	}
	if p, ok := policy.(redialer); ok && cfg.TLS != nil {
		// The plugin's server must hold a plugin certificate of our CA.
		if err := p.Redial(grpc.WithTransportCredentials(cfg.TLS.ClientCredentials(tlsutil.IsRole(tlsutil.RolePlugin)))); err != nil {
			closePolicy(policy)
			return nil, fmt.Errorf("policy: %w", err)
		}
	}
	if l, ok := policy.(interface{ SetLogger(*log.Logger) }); ok {
		l.SetLogger(d.logger) // a plugin logs its failures and recoveries
	}
	for _, w := range PolicyWarnings(cfg, policy) {
		d.logger.Printf("warning: %s", w)
	}
	if err := d.loadBootstrapToken(); err != nil {
		closePolicy(policy)
		return nil, err
	}
	// LeanRestore: a follower that installs a snapshot over a large state peaks at
	// about one state's memory instead of two (docs/benchmarks.md, "Coordinator
	// FSM"). Readers of the FSM wait for the restore, and a failed restore stops
	// the replica (raftnode), which restores from its own snapshots on restart.
	var wrap raftnode.ConnWrapper
	if cfg.TLS != nil {
		// A Raft peer must be a replica of this same tier instance.
		wrap = cfg.TLS.RaftWrapper(tlsutil.IsReplicaOf(cfg.Tier, cfg.Instance), d.logger.Printf)
		d.logger.Printf("tls: on (%s, certificate valid until %s)", cfg.TLS.Identity(), cfg.TLS.NotAfter().UTC().Format(time.RFC3339))
	} else {
		d.logger.Printf("warning: tls: disabled: sessions, the Admin API and Raft run in plaintext without authentication (docs/security.md)")
	}
	d.tier, err = raftnode.StartTier(raftnode.Config{
		ID:        cfg.NodeID,
		Dir:       filepath.Join(cfg.DataDir, "raft"),
		RaftBind:  cfg.RaftAddr,
		AdminBind: cfg.AdminAddr,
		// raft logs an ERROR per heartbeat backoff for as long as a peer is
		// down: one of each kind every 30s, with the count of the others.
		LogOutput: logx.Dedup(logOut, 30*time.Second, time.Now),
		Wrap:      wrap,
	}, fsm.Options{LeanRestore: true})
	if err != nil {
		closePolicy(policy)
		return nil, fmt.Errorf("raft: %w", err)
	}
	if cfg.Bootstrap {
		if err := d.bootstrap(); err != nil {
			d.tier.Shutdown()
			closePolicy(policy)
			return nil, err
		}
	}
	d.newMetrics()
	d.lis, err = net.Listen("tcp", cfg.GRPCAddr)
	if err != nil {
		d.tier.Shutdown()
		_ = d.metrics.Close()
		closePolicy(policy)
		return nil, fmt.Errorf("listen.grpc %s: %w", cfg.GRPCAddr, err)
	}
	// Every Admin call passes the token check, every session's Hello the
	// admission policy (acl.go, admission.go).
	sopts := append(ServerKeepalive(), grpc.ChainUnaryInterceptor(d.unaryAuth), grpc.ChainStreamInterceptor(d.streamAuth))
	if cfg.TLS != nil {
		// Children (hosts, child tier replicas), peers forwarding Admin calls
		// and operators; which child a session may be is checked at its Hello.
		sopts = append(sopts, grpc.Creds(cfg.TLS.ServerCredentials(tlsutil.IsRole(tlsutil.RoleReplica, tlsutil.RoleHost, tlsutil.RoleOperator), d.logger.Printf)))
	}
	d.grpc = grpc.NewServer(sopts...)
	wire.RegisterSessionServer(d.grpc, d)
	wire.RegisterAdminServer(d.grpc, d)
	telemetry.RegisterGRPC(d.grpc, d.ready) // grpc.health.v1 and reflection
	go func() { _ = d.grpc.Serve(d.lis) }()
	if cfg.HTTPAddr != "" {
		d.http, err = telemetry.ListenGuarded(cfg.HTTPAddr, d.ready, d.metrics, d.newDashboard(), d.httpGuard)
		if err != nil {
			d.Close()
			return nil, err
		}
	}
	if len(cfg.Parent) > 0 {
		d.up = newUplink(d)
		// Non-blocking: an event dropped while the channel is full is
		// covered by the one waiting in it (the watcher reads the state).
		d.raftEvents = make(chan raft.Observation, 4)
		d.observer = raft.NewObserver(d.raftEvents, false, func(o *raft.Observation) bool {
			_, ok := o.Data.(raft.RaftState)
			return ok
		})
		d.tier.Raft().RegisterObserver(d.observer)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	d.done.Add(1)
	go func() { defer d.done.Done(); d.loop(ctx) }()
	d.done.Add(1)
	go func() { defer d.done.Done(); d.watchChildren(ctx) }()
	return d, nil
}

func (d *Daemon) bootstrap() error {
	peers := d.cfg.Peers
	if len(peers) == 0 {
		peers = []Peer{{ID: d.cfg.NodeID, Raft: d.tier.RaftAddr()}}
	}
	servers := make([]raft.Server, 0, len(peers))
	for _, p := range peers {
		servers = append(servers, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Raft), Suffrage: raft.Voter})
	}
	err := d.tier.BootstrapServers(servers)
	if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("bootstrap: %w", err)
	}
	return nil
}

// GRPCAddr is the address the gRPC server (sessions and Admin) listens on.
func (d *Daemon) GRPCAddr() string { return d.lis.Addr().String() }

// advertisedGRPC is the gRPC address announced to the parent (Hello.address,
// which tools dial): listen.grpc as configured — the name this replica's
// certificate carries — unless it asks for any port (":0", tests), then the
// bound address.
func (d *Daemon) advertisedGRPC() string {
	if _, port, err := net.SplitHostPort(d.cfg.GRPCAddr); err == nil && port != "0" {
		return d.cfg.GRPCAddr
	}
	return d.GRPCAddr()
}

// HTTPAddr is the address of /healthz, /readyz and /metrics ("" when off).
func (d *Daemon) HTTPAddr() string {
	if d.http == nil {
		return ""
	}
	return d.http.Addr()
}

// Tier gives access to the replica's Raft node and FSM (tests, tools).
func (d *Daemon) Tier() *raftnode.Tier { return d.tier }

// IsLeader reports whether this replica leads its group.
func (d *Daemon) IsLeader() bool { return d.tier.IsLeader() }

// leaderReadyWait bounds how long an Admin call waits for a just-elected
// leader's barrier before it is refused with a retry (a barrier takes a
// round trip to a quorum and the apply of the log's tail).
const leaderReadyWait = 2 * time.Second

// waitApplied waits, at most limit and while ctx lasts, until applied holds.
func (d *Daemon) waitApplied(ctx context.Context, limit time.Duration) bool {
	if d.applied() {
		return true
	}
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	timeout := time.After(limit)
	for {
		select {
		case <-ctx.Done():
			return false
		case <-timeout:
			return false
		case <-t.C:
			if !d.tier.IsLeader() {
				return false
			}
			if d.applied() {
				return true
			}
		}
	}
}

// applied reports whether this replica leads in Raft's current term and has
// applied its log up to its own election (the barrier trackLeadership waits
// for): only then does its state machine answer for the group.
func (d *Daemon) applied() bool {
	term := d.tier.Raft().CurrentTerm()
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.leader && d.leaderTerm == term
}

func (d *Daemon) ready() error {
	if _, id := d.tier.Raft().LeaderWithID(); id == "" {
		return errors.New("no Raft leader known")
	}
	if d.up != nil && d.IsLeader() && d.up.client.Connected() == "" {
		return errors.New("no session with the parent tier")
	}
	return nil
}

// Close stops the replica: the control loop, the sessions, the servers and Raft.
func (d *Daemon) Close() error {
	if d.cancel != nil {
		d.cancel()
	}
	d.done.Wait()
	if d.grpc != nil {
		d.grpc.Stop()
	}
	if d.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = d.http.Shutdown(ctx)
		cancel()
	}
	if d.ui != nil {
		d.ui.Close()
	}
	if d.metrics != nil {
		_ = d.metrics.Close()
	}
	closePolicy(d.policy)
	if d.observer != nil {
		d.tier.Raft().DeregisterObserver(d.observer)
	}
	return d.tier.Shutdown()
}

// redialer is a policy that talks to a server of its own (an out-of-process
// plugin) and can be told how to dial it: with TLS, the plugin's server must
// hold a plugin certificate of this replica's CA.
type redialer interface {
	Redial(opts ...grpc.DialOption) error
}

// leadsIn reports whether this replica leads its group in Raft term term.
func (d *Daemon) leadsIn(term uint64) bool {
	return d.tier.IsLeader() && d.tier.Raft().CurrentTerm() == term
}

// closePolicy releases what a policy holds (a plugin's client connection).
func closePolicy(p interfaces.Policy) {
	if c, ok := p.(io.Closer); ok {
		_ = c.Close()
	}
}

// PolicyWarnings returns what is valid but likely a mistake in how cfg (with
// its defaults) configures pol: a plugin time-out at or above the solve timeout
// (a plugin call gets at most half of the round's solve timeout, so that the
// fallback keeps the other half: the configured time-out is then never reached).
func PolicyWarnings(cfg Config, pol interfaces.Policy) []string {
	var out []string
	if p, ok := pol.(interfaces.CallTimeouter); ok && cfg.SolveTimeout > 0 && p.CallTimeout() > cfg.SolveTimeout/2 {
		out = append(out, fmt.Sprintf("policy.config.timeout %v is above half of control.solve_timeout %v: a plugin call gets at most half the solve timeout (%v), so that its fallback keeps the rest, and the longer timeout never applies; set it to %v or less",
			p.CallTimeout(), cfg.SolveTimeout, cfg.SolveTimeout/2, cfg.SolveTimeout/2))
	}
	return out
}

// policyStatus names the policy and, for an external plugin, its health.
func (d *Daemon) policyStatus() string {
	if p, ok := d.policy.(interfaces.HealthReporter); ok {
		return d.policy.Name() + ": " + p.Health().Describe
	}
	return d.policy.Name()
}

// leaderGRPC returns the gRPC address of the current leader, from the configured
// peers, or "" when unknown.
func (d *Daemon) leaderGRPC() (addr, id string) {
	_, lid := d.tier.Raft().LeaderWithID()
	for _, p := range d.cfg.Peers {
		if p.ID == string(lid) {
			return p.GRPC, p.ID
		}
	}
	return "", string(lid)
}

// dialPeer opens a connection to another replica of this tier instance (the
// leader, to forward an Admin call); with TLS its certificate must name this
// tier instance.
func (d *Daemon) dialPeer(addr string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	if d.cfg.TLS != nil {
		creds = d.cfg.TLS.ClientCredentials(tlsutil.IsReplicaOf(d.cfg.Tier, d.cfg.Instance))
	}
	return grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(creds)}, opts...)...)
}

// parentCredentials are the credentials of the session to the parent: with
// TLS the parent's replicas must present a certificate of the configured
// parent instance (a rogue server on a parent's address is refused before
// any Assign); nil (plaintext) without.
func (d *Daemon) parentCredentials() credentials.TransportCredentials {
	if d.cfg.TLS == nil {
		return nil
	}
	return d.cfg.TLS.ClientCredentials(tlsutil.IsReplicaOf(d.cfg.ParentTier(), d.cfg.ParentInstance))
}

// checkChildIdentity refuses a Hello whose client certificate does not name
// the child it claims (with TLS; without, anyone may claim anything).
func (d *Daemon) checkChildIdentity(ctx context.Context, child interfaces.Child) error {
	if d.cfg.TLS == nil {
		return nil
	}
	id, ok, err := tlsutil.PeerIdentity(ctx)
	if err == nil && !ok {
		err = errors.New("the connection carries no client certificate")
	}
	if err == nil {
		err = tlsutil.IsChild(child.Tier, string(child.ID))(id)
	}
	if err != nil {
		d.scope.Counter("sessions_refused_total").Inc(1)
		d.logger.Printf("session: refused a Hello claiming %s %s: %v", child.Tier, child.ID, err)
		return status.Errorf(codes.PermissionDenied, "hello: refused: the Hello claims %s %s, but %v", child.Tier, child.ID, err)
	}
	return nil
}

// exec commits a command and returns its result; the error covers both the commit
// and a rejection of its single operation.
func (d *Daemon) exec(ctx context.Context, c fsm.Command) (*fsm.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return d.tier.Exec(ctx, c)
}

// commit commits c and returns the first rejection of its operations as the
// error: for commands whose operations must all succeed.
func (d *Daemon) commit(ctx context.Context, c fsm.Command) (*fsm.Result, error) {
	res, err := d.exec(ctx, c)
	if err != nil {
		return nil, err
	}
	return res, res.Err()
}

func (d *Daemon) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

var (
	_ session.Handler      = uplinkHandler{}
	_ session.BatchHandler = uplinkHandler{}
)

// LastRejections returns the moves the last verification refused, with why.
func (d *Daemon) LastRejections() []balancer.Rejection {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]balancer.Rejection(nil), d.lastRejections...)
}
