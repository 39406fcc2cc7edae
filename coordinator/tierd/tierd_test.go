package tierd

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/testutil"
)

func start(t *testing.T, tier string, parent []string) *Daemon {
	t.Helper()
	d, err := Start(Config{
		Tier: tier, Instance: tier + "-x", NodeID: "n1", DataDir: t.TempDir(),
		RaftAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", Bootstrap: true, Parent: parent,
		Interval: 50 * time.Millisecond,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	// Leader in Raft, and in the control loop (after its barrier): only then
	// does the replica accept sessions.
	testutil.Until(t, tier+": leader", 10*time.Second, func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.leader && d.IsLeader()
	})
	return d
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func code(err error) codes.Code { return status.Code(err) }

func TestConfigValidate(t *testing.T) {
	base := Config{Tier: "region", Instance: "eu-1", NodeID: "n1", DataDir: "/tmp/x", RaftAddr: "127.0.0.1:1", GRPCAddr: "localhost:2", Parent: []string{"p"}}
	tests := []struct {
		mutate func(*Config)
		want   string
	}{
		{func(c *Config) { c.Tier = "" }, "tier: is required"},
		{func(c *Config) { c.Instance = "bad name" }, "instance: must be"},
		{func(c *Config) { c.DataDir = "" }, "data_dir: is required"},
		{func(c *Config) { c.RaftAddr = "" }, "listen.raft: is required"},
		{func(c *Config) { c.GRPCAddr = "" }, "listen.grpc: is required"},
		{func(c *Config) { c.RaftAddr = "0.0.0.0:7300" }, `listen.raft: must name an address others can dial, not all interfaces (got "0.0.0.0:7300")`},
		{func(c *Config) { c.RaftAddr = ":7300" }, `listen.raft: must name an address others can dial`},
		{func(c *Config) { c.GRPCAddr = "[::]:7400" }, `listen.grpc: must name an address others can dial`},
		{func(c *Config) { c.GRPCAddr = "h1" }, `listen.grpc: must be host:port (got "h1")`},
		{func(c *Config) { c.LeaseTTL = time.Millisecond }, "control.lease_ttl: must be ≥ 100ms"},
		{func(c *Config) { c.DriftMargin = -time.Millisecond }, "control.drift_margin: must be ≥ 0"},
		{func(c *Config) { c.Parent = nil }, "parent: tier region has no parent: give the gRPC addresses of the global tier's replicas"},
		{func(c *Config) { c.Tier = "rack" }, `tier: unknown tier "rack": the chain is global → region → host`},
		{func(c *Config) { c.Chain = []string{"global", "region", "rack", "region", "host"} }, `tier "region" appears twice (a cycle)`},
		{func(c *Config) { c.Chain = []string{"region", "host"} }, "must start with global"},
		{func(c *Config) { c.Chain = []string{"global", "region"} }, "must end with host"},
		{func(c *Config) { c.Tier = "host" }, "hosts run 'strata host'"},
		{func(c *Config) { c.Tier = "global" }, "parent: the global tier has no parent"},
		{func(c *Config) { c.MaxMoves = -1 }, "control.max_moves: must be ≥ 0"},
		{func(c *Config) {
			c.Bootstrap = true
			c.Peers = []Peer{{ID: "other", Raft: "x"}}
		}, "peers: must include this node (n1) when bootstrapping"},
	}
	for _, tt := range tests {
		c := base
		tt.mutate(&c)
		err := c.Defaults().Validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, interfaces.ErrInvalid) {
			t.Errorf("got %v, want an ErrInvalid containing %q", err, tt.want)
		}
	}
	if err := base.Defaults().Validate(); err != nil {
		t.Errorf("valid config rejected: %v", err)
	}
}

// TestLeaseDefaultsPerTier: leases are set per tier. The global tier's
// children, the regions, get a lease long enough to outlive a failover of the
// global tier (it was 4s, as for hosts: a global leader pause made every
// region's lease run out, and every host stop, before the regions reached the
// new leader); a region's hosts keep the short one. Reports stay frequent
// whatever the lease: the children's silence watchdog counts in report
// intervals.
func TestLeaseDefaultsPerTier(t *testing.T) {
	global := Config{Tier: interfaces.TierGlobal}.Defaults()
	region := Config{Tier: interfaces.TierRegion}.Defaults()
	rack := Config{Tier: interfaces.TierRegion, Chain: []string{"global", "region", "rack", "host"}}.Defaults()
	for _, c := range []struct {
		name            string
		got             Config
		lease, interval time.Duration
	}{
		{"global (children: regions)", global, DefaultTierLeaseTTL, 500 * time.Millisecond},
		{"region (children: hosts)", region, DefaultHostLeaseTTL, 500 * time.Millisecond},
		{"region (children: racks)", rack, DefaultTierLeaseTTL, 500 * time.Millisecond},
	} {
		if c.got.LeaseTTL != c.lease || c.got.ReportInterval != c.interval {
			t.Errorf("%s: lease %v, report interval %v; want %v, %v", c.name, c.got.LeaseTTL, c.got.ReportInterval, c.lease, c.interval)
		}
		// A leader cut off from its children steps down after 3 silent
		// report intervals, with more than half the lease left for the
		// children to find the new one.
		if want := 3 * c.interval; c.got.StepDownAfter != want || c.got.StepDownAfter > c.lease/2 {
			t.Errorf("%s: step_down_after %v; want %v, at most half the lease %v", c.name, c.got.StepDownAfter, want, c.lease)
		}
	}
	if DefaultTierLeaseTTL <= 2*DefaultHostLeaseTTL {
		t.Errorf("a child tier's default lease %v is not well above a host's %v", DefaultTierLeaseTTL, DefaultHostLeaseTTL)
	}
	set := Config{Tier: interfaces.TierGlobal, LeaseTTL: time.Second}.Defaults()
	if set.LeaseTTL != time.Second || set.ReportInterval != 250*time.Millisecond {
		t.Errorf("a configured lease of 1s: lease %v, report interval %v; want 1s, 250ms", set.LeaseTTL, set.ReportInterval)
	}
}

func TestSessionRejectsBadHello(t *testing.T) {
	d := start(t, interfaces.TierGlobal, nil)
	client := wire.NewSessionClient(dial(t, d.GRPCAddr()))
	open := func(first *wire.ChildMessage) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := client.Connect(ctx)
		if err != nil {
			return err
		}
		if err := s.Send(first); err != nil {
			return err
		}
		_, err = s.Recv()
		return err
	}
	hello := func(h *wire.Hello) *wire.ChildMessage {
		return &wire.ChildMessage{Msg: &wire.ChildMessage_Hello{Hello: h}}
	}
	tests := []struct {
		name string
		msg  *wire.ChildMessage
		code codes.Code
		want string
	}{
		{"report first", &wire.ChildMessage{Msg: &wire.ChildMessage_Report{Report: &wire.Report{}}}, codes.InvalidArgument, "first message must be a Hello"},
		{"negative capacity", hello(&wire.Hello{ChildId: "r1", ProtocolVersion: 1, Capacity: &wire.Load{Cpu: -1}}), codes.InvalidArgument, "hello.capacity.cpu"},
		{"zero capacity", hello(&wire.Hello{ChildId: "r1", ProtocolVersion: 1, Capacity: &wire.Load{}}), codes.InvalidArgument, "hello.capacity: must be > 0"},
		{"bad id", hello(&wire.Hello{ChildId: "r 1", ProtocolVersion: 1, Capacity: &wire.Load{Cpu: 1}}), codes.InvalidArgument, "hello.child_id"},
		{"tier not next in the chain", hello(&wire.Hello{ChildId: "h1", Tier: "host", ProtocolVersion: 1, Capacity: &wire.Load{Cpu: 1}}), codes.FailedPrecondition, "a host cannot be a child of global"},
		{"no common version", hello(&wire.Hello{ChildId: "r1", ProtocolVersion: 99, MinProtocolVersion: 50, Capacity: &wire.Load{Cpu: 1}}), codes.FailedPrecondition, "version"},
		{"negative stop budget", hello(&wire.Hello{ChildId: "r1", ProtocolVersion: 1, Capacity: &wire.Load{Cpu: 1}, StopBudgetNanos: -1}), codes.InvalidArgument, "hello.stop_budget: must be in [0, 1h0m0s]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := open(tt.msg)
			if code(err) != tt.code || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want %s containing %q", err, tt.code, tt.want)
			}
		})
	}
	// Nothing was registered by the refused sessions.
	if n := len(d.Tier().FSM.Children()); n != 0 {
		t.Errorf("%d children registered by refused sessions", n)
	}
}

func TestAdminErrorsChangeNothing(t *testing.T) {
	d := start(t, interfaces.TierGlobal, nil)
	a := wire.NewAdminClient(dial(t, d.GRPCAddr()))
	ctx := context.Background()
	tmpl := &wire.Shard{Load: &wire.Load{Cpu: 1}}
	tests := []struct {
		name string
		job  *wire.JobSpec
		code codes.Code
		want string
	}{
		{"no job", nil, codes.InvalidArgument, "job: is required"},
		{"bad id", &wire.JobSpec{Id: "a b", Parallelism: 1, ShardTemplate: tmpl}, codes.InvalidArgument, "job.id"},
		{"no shards", &wire.JobSpec{Id: "j"}, codes.InvalidArgument, "needs shards, or parallelism"},
		{"both", &wire.JobSpec{Id: "j", Parallelism: 1, Shards: []*wire.Shard{{Id: "j/0"}}}, codes.InvalidArgument, "either shards or parallelism"},
		{"negative load", &wire.JobSpec{Id: "j", Parallelism: 3, ShardTemplate: &wire.Shard{Load: &wire.Load{Mem: -5}}}, codes.InvalidArgument, "load.mem: must be ≥ 0"},
		{"duplicate shard", &wire.JobSpec{Id: "j", Shards: []*wire.Shard{{Id: "j/0", Load: &wire.Load{Cpu: 1}}, {Id: "j/0", Load: &wire.Load{Cpu: 1}}}}, codes.InvalidArgument, "appears twice"},
		{"wrong job", &wire.JobSpec{Id: "j", Shards: []*wire.Shard{{Id: "x/0", Job: "x", Load: &wire.Load{Cpu: 1}}}}, codes.InvalidArgument, "must be the job's id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := a.SubmitJob(ctx, &wire.SubmitJobRequest{Job: tt.job})
			if code(err) != tt.code || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want %s containing %q", err, tt.code, tt.want)
			}
		})
	}
	jobs, err := a.ListJobs(ctx, &wire.ListJobsRequest{})
	if err != nil || len(jobs.Jobs) != 0 {
		t.Fatalf("refused submissions left jobs behind: %v %v", jobs, err)
	}
	if _, err := a.SubmitJob(ctx, &wire.SubmitJobRequest{Job: &wire.JobSpec{Id: "j", Parallelism: 4, ShardTemplate: tmpl}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SubmitJob(ctx, &wire.SubmitJobRequest{Job: &wire.JobSpec{Id: "j", Parallelism: 4, ShardTemplate: tmpl}}); code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("duplicate job: got %v", err)
	}
	for name, call := range map[string]func() error{
		"drain unknown":   func() error { _, err := a.Drain(ctx, &wire.DrainRequest{Child: "nope"}); return err },
		"undrain unknown": func() error { _, err := a.Undrain(ctx, &wire.UndrainRequest{Child: "nope"}); return err },
		"explain unknown": func() error { _, err := a.Explain(ctx, &wire.ExplainRequest{Shard: "nope"}); return err },
		"delete unknown":  func() error { _, err := a.DeleteJob(ctx, &wire.DeleteJobRequest{Job: "nope"}); return err },
		"shards of unknown job": func() error {
			_, err := a.ListShards(ctx, &wire.ListShardsRequest{Job: "nope"})
			return err
		},
	} {
		if err := call(); code(err) != codes.NotFound || !strings.Contains(err.Error(), "nope") {
			t.Errorf("%s: got %v, want NotFound naming it", name, err)
		}
	}
	jobs, _ = a.ListJobs(ctx, &wire.ListJobsRequest{})
	if len(jobs.Jobs) != 1 || jobs.Jobs[0].Shards != 4 {
		t.Errorf("jobs after the errors: %v", jobs)
	}
	del, err := a.DeleteJob(ctx, &wire.DeleteJobRequest{Job: "j"})
	if err != nil || del.ShardsRemoved != 4 {
		t.Errorf("delete: %v %v", del, err)
	}
}

func TestUplinkRefusesStaleEpochs(t *testing.T) {
	// A region whose parent is unreachable: its uplink handler is driven directly.
	d := start(t, interfaces.TierRegion, []string{"127.0.0.1:1"})
	h := uplinkHandler{d.up}
	spec := &wire.Shard{Id: "j/0", Job: "j", Load: &wire.Load{Cpu: 1}}
	if a := h.OnAssign(&wire.Assign{Shard: spec, Epoch: 5}); !a.GetOk() {
		t.Fatalf("assign at epoch 5: %v", a)
	}
	if _, ok := d.Tier().FSM.Shard("j/0"); !ok {
		t.Fatal("assigned shard not in the region's state")
	}
	for _, tt := range []struct {
		name string
		ack  *wire.Ack
	}{
		{"older assign", h.OnAssign(&wire.Assign{Shard: spec, Epoch: 4})},
		{"older revoke", h.OnRevoke(&wire.Revoke{Shard: "j/0", Epoch: 3})},
	} {
		if tt.ack.GetOk() || !strings.Contains(tt.ack.GetError(), "stale epoch") || !strings.Contains(tt.ack.GetError(), "older than the 5 held") {
			t.Errorf("%s: ack %v, want a refusal naming the stale epoch", tt.name, tt.ack)
		}
	}
	if _, ok := d.Tier().FSM.Shard("j/0"); !ok {
		t.Error("a stale revoke removed the shard")
	}
	// The current epoch's revoke of an unplaced shard completes at once.
	if a := h.OnRevoke(&wire.Revoke{Shard: "j/0", Epoch: 5}); !a.GetOk() {
		t.Errorf("revoke at epoch 5: %v", a)
	}
	if _, ok := d.Tier().FSM.Shard("j/0"); ok {
		t.Error("revoked shard still in the region's state")
	}
	// A region submits no jobs.
	a := wire.NewAdminClient(dial(t, d.GRPCAddr()))
	if _, err := a.SubmitJob(context.Background(), &wire.SubmitJobRequest{Job: &wire.JobSpec{Id: "j", Parallelism: 1, ShardTemplate: spec}}); code(err) != codes.InvalidArgument {
		t.Errorf("submit to a region: got %v", err)
	}
}

func TestWireEpochs(t *testing.T) {
	d := start(t, interfaces.TierRegion, []string{"127.0.0.1:1"})
	if _, ok := d.wireEpoch("s", 1); ok {
		t.Error("wire epoch known without the parent's epoch")
	}
	d.up.core.Assigned("s", 3)
	w, ok := d.wireEpoch("s", 2)
	if !ok || w != 3<<16|2 {
		t.Errorf("wire epoch = %d %v, want %d", w, ok, 3<<16|2)
	}
	// A later stay (parent epoch 4) starts above anything of the earlier one.
	d.up.core.Assigned("s", 4)
	if w2, _ := d.wireEpoch("s", 1); w2 <= w {
		t.Errorf("epoch went down across stays: %d then %d", w, w2)
	}
	if _, ok := d.wireEpoch("s", localMask+1); ok {
		t.Error("local epoch overflow accepted")
	}
}

// TestAdminWritesDoNotRace: concurrent submissions of one job add it once
// (the others are refused, none overwrites it), and a failed child cannot be
// drained (that would hide the failure from the control loop).
func TestAdminWritesDoNotRace(t *testing.T) {
	d := start(t, interfaces.TierGlobal, nil)
	a := wire.NewAdminClient(dial(t, d.GRPCAddr()))
	ctx := context.Background()
	job := &wire.JobSpec{Id: "j", Parallelism: 4, ShardTemplate: &wire.Shard{Load: &wire.Load{Cpu: 1}}}
	const n = 8
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			_, err := a.SubmitJob(ctx, &wire.SubmitJobRequest{Job: job})
			errs <- err
		}()
	}
	ok := 0
	for i := 0; i < n; i++ {
		err := <-errs
		switch {
		case err == nil:
			ok++
		case code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "already exists"):
			t.Errorf("concurrent submit: %v", err)
		}
	}
	if ok != 1 {
		t.Errorf("%d of %d concurrent submissions of one job succeeded, want 1", ok, n)
	}

	c := interfaces.Child{ID: "r1", Tier: interfaces.TierRegion, Capacity: interfaces.Load{CPU: 8}, State: interfaces.ChildFailed}
	if _, err := d.Tier().Exec(ctx, &fsm.PutChild{Child: c}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Drain(ctx, &wire.DrainRequest{Child: "r1"}); code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), `child "r1" is failed`) {
		t.Errorf("drain of a failed child: %v", err)
	}
	if got, _ := d.Tier().FSM.Child("r1"); got.State != interfaces.ChildFailed {
		t.Errorf("the failed child is %s after the refused drain", got.State)
	}
}

// TestStopBudgetExtendsTheLease: a child that announces it may take 3s to
// stop its shards after its fence is not silent until its lease plus 3s have
// passed; the budget is kept with its replicated record (a new leader waits
// too), a configured label of that name is replaced, and a tier announces
// the largest budget of its children to its own parent.
func TestStopBudgetExtendsTheLease(t *testing.T) {
	d := start(t, interfaces.TierGlobal, nil)
	client := wire.NewSessionClient(dial(t, d.GRPCAddr()))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := client.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h := &wire.Hello{ChildId: "r1", ProtocolVersion: 1, Capacity: &wire.Load{Cpu: 1}, Labels: map[string]string{StopBudgetLabel: "1h", "zone": "a"}, StopBudgetNanos: int64(3 * time.Second)}
	if err := s.Send(&wire.ChildMessage{Msg: &wire.ChildMessage_Hello{Hello: h}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil { // the lease grant
		t.Fatal(err)
	}
	c, ok := d.Tier().FSM.Child("r1")
	if !ok || c.Labels[StopBudgetLabel] != "3s" || c.Labels["zone"] != "a" {
		t.Fatalf("registered child %+v, want the budget label 3s (the configured one replaced)", c)
	}
	d.mu.Lock()
	granted := d.lastGrant["r1"]
	d.mu.Unlock()
	ttl := d.cfg.LeaseTTL + d.cfg.DriftMargin // the child's lease, and the margin for its clock
	if _, silent := d.silent(granted.Add(ttl + 2*time.Second))["r1"]; silent {
		t.Error("silent 2s after its lease, within its 3s stop budget")
	}
	exp, silent := d.silent(granted.Add(ttl + 4*time.Second))["r1"]
	if !silent || !exp.Equal(granted.Add(ttl+3*time.Second)) {
		t.Errorf("4s after its lease: silent %v since %v, want since lease + drift margin + 3s (%v)", silent, exp, granted.Add(ttl+3*time.Second))
	}
	if got := (&uplink{d: d}).childrenStopBudget(); got != 3*time.Second {
		t.Errorf("the tier announces a stop budget of %v, want its child's 3s", got)
	}
}
