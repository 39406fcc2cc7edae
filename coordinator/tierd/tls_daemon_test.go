package tierd_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/strata-sched/strata/coordinator/hostagent"
	"github.com/strata-sched/strata/coordinator/hostagent/driver/synthetic"
	"github.com/strata-sched/strata/coordinator/hostd"
	"github.com/strata-sched/strata/coordinator/tierd"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/testutil"
	"github.com/strata-sched/strata/internal/tlsutil"
	"github.com/strata-sched/strata/internal/tlsutil/tlstest"
)

// tlsCluster is a global tier, region eu-1 and hosts h-1 and h-2, every
// connection over mutual TLS with certificates of one CA.
type tlsCluster struct {
	pki    *tlstest.PKI
	files  map[string]tlsutil.Files // each daemon's certificate files, by instance or host
	global *tierd.Daemon
	region *tierd.Daemon
	hosts  map[string]*hostd.Daemon
	logs   map[string]*testutil.Buffer
	admin  wire.AdminClient // an operator's
}

func startTLSTier(t *testing.T, pki *tlstest.PKI, dir, tier, instance string, parent []string, log *testutil.Buffer) *tierd.Daemon {
	t.Helper()
	node := instance + "-1"
	return startTLSTierWith(t, pki.Issue(t, tlsutil.Replica(tier, instance, node)), dir, tier, instance, parent, log)
}

// openLogged opens files with the store's reloads logged to log.
func openLogged(t *testing.T, files tlsutil.Files, log *testutil.Buffer) *tlsutil.Store {
	t.Helper()
	st, err := tlsutil.Open(files, func(format string, args ...any) { fmt.Fprintf(log, format+"\n", args...) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func startTLSTierWith(t *testing.T, files tlsutil.Files, dir, tier, instance string, parent []string, log *testutil.Buffer) *tierd.Daemon {
	t.Helper()
	node := instance + "-1"
	cfg := tierd.Config{Tier: tier, Instance: instance, NodeID: node, DataDir: filepath.Join(dir, instance),
		RaftAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", Bootstrap: true, Parent: parent,
		Interval: 100 * time.Millisecond, LeaseTTL: 3 * time.Second, Grace: 500 * time.Millisecond,
		TLS: openLogged(t, files, log)}
	d, err := tierd.Start(cfg.Defaults(), log)
	if err != nil {
		t.Fatalf("%s: %v", instance, err)
	}
	t.Cleanup(func() { d.Close() })
	testutil.Until(t, instance+": leader", 10*time.Second, d.IsLeader)
	return d
}

func startTLSHost(t *testing.T, pki *tlstest.PKI, dir, name, parentInstance string, parents []string, log *testutil.Buffer) *hostd.Daemon {
	t.Helper()
	drv, err := synthetic.New(synthetic.Config{Clock: hostagent.WallClock{}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	hd, err := hostd.Start(hostd.Config{Host: interfaces.ChildID(name), Parents: parents, DataDir: filepath.Join(dir, name),
		Capacity: interfaces.Load{CPU: 16, Mem: 64 << 30, Tasks: 100}, Driver: drv,
		TLS: tlstest.Store(t, pki.Issue(t, tlsutil.Named(tlsutil.RoleHost, name))), ParentInstance: parentInstance}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hd.Close() })
	return hd
}

const tlsShards = 20

func startTLSCluster(t *testing.T) *tlsCluster {
	t.Helper()
	dir := t.TempDir()
	c := &tlsCluster{pki: tlstest.New(t), hosts: map[string]*hostd.Daemon{}, logs: map[string]*testutil.Buffer{}, files: map[string]tlsutil.Files{}}
	for _, n := range []string{"global", "eu-1", "h-1", "h-2"} {
		c.logs[n] = &testutil.Buffer{}
	}
	c.global = startTLSTier(t, c.pki, dir, interfaces.TierGlobal, "global", nil, c.logs["global"])
	c.files["eu-1"] = c.pki.Issue(t, tlsutil.Replica(interfaces.TierRegion, "eu-1", "eu-1-1"))
	c.region = startTLSTierWith(t, c.files["eu-1"], dir, interfaces.TierRegion, "eu-1", []string{c.global.GRPCAddr()}, c.logs["eu-1"])
	for _, h := range []string{"h-1", "h-2"} {
		c.hosts[h] = startTLSHost(t, c.pki, dir, h, "eu-1", []string{c.region.GRPCAddr()}, c.logs[h])
	}
	op := tlstest.Store(t, c.pki.Issue(t, tlsutil.Named(tlsutil.RoleOperator, "alice")))
	cc, err := grpc.NewClient(c.global.GRPCAddr(), grpc.WithTransportCredentials(op.ClientCredentials(tlsutil.IsAnyReplica)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	c.admin = wire.NewAdminClient(cc)
	testutil.Eventually(t, "the global tier sees region eu-1 with both hosts' capacity", 20*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := c.admin.Status(ctx, &wire.StatusRequest{})
		if err != nil {
			return err
		}
		for _, tier := range st.GetTiers() {
			for _, in := range tier.GetInstances() {
				for _, ch := range in.GetChildren() {
					if ch.GetChild().GetId() == "eu-1" && ch.GetChild().GetCapacity().GetCpu() == 32 {
						return nil
					}
				}
			}
		}
		return fmt.Errorf("status %v", st)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.admin.SubmitJob(ctx, &wire.SubmitJobRequest{Job: &wire.JobSpec{Id: "etl", Parallelism: tlsShards,
		ShardTemplate: &wire.Shard{Load: &wire.Load{Cpu: 0.5, Tasks: 1}}}}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "every shard runs on one host", 30*time.Second, c.checkOwners)
	return c
}

// children lists the children of the tier instance served at addr, sorted.
func (c *tlsCluster) children(t *testing.T, addr string) []string {
	t.Helper()
	op := tlstest.Store(t, c.pki.Issue(t, tlsutil.Named(tlsutil.RoleOperator, "carol")))
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(op.ClientCredentials(tlsutil.IsAnyReplica)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := wire.NewAdminClient(cc).Status(ctx, &wire.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tier := range st.GetTiers() {
		for _, in := range tier.GetInstances() {
			for _, ch := range in.GetChildren() {
				out = append(out, ch.GetChild().GetId())
			}
		}
	}
	sort.Strings(out)
	return out
}

// checkOwners: every shard of the job runs on exactly one host.
func (c *tlsCluster) checkOwners() error {
	owners := map[interfaces.ShardID][]string{}
	for name, h := range c.hosts {
		for _, s := range h.Agent().Running() {
			owners[s] = append(owners[s], name)
		}
	}
	if len(owners) != tlsShards {
		return fmt.Errorf("%d of %d shards run", len(owners), tlsShards)
	}
	for s, hs := range owners {
		if len(hs) != 1 {
			return fmt.Errorf("shard %s runs on %v", s, hs)
		}
	}
	return nil
}

// hello opens a session to addr with creds claiming child id of tier and
// returns what the first Recv gives: a refusal, or a LeaseGrant/Redirect.
func hello(t *testing.T, addr string, creds credentials.TransportCredentials, tier, id string) (*wire.ParentMessage, error) {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := wire.NewSessionClient(cc).Connect(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.Send(&wire.ChildMessage{Msg: &wire.ChildMessage_Hello{Hello: &wire.Hello{ChildId: id, Tier: tier,
		Capacity: &wire.Load{Cpu: 1e9, Mem: 1e15, Tasks: 1e6}}}}); err != nil {
		return nil, err
	}
	return s.Recv()
}

// rawCreds are TLS credentials from a certificate's files, trusting ca: what
// an attacker holding those files would use.
func rawCreds(t *testing.T, ca tlsutil.Files, cert *tlsutil.Files) credentials.TransportCredentials {
	t.Helper()
	c := tlstest.Store(t, ca).ClientConfig("127.0.0.1", nil)
	c.GetClientCertificate = nil
	if cert != nil {
		pair, err := tls.LoadX509KeyPair(cert.Cert, cert.Key)
		if err != nil {
			t.Fatal(err)
		}
		// Sent whatever CAs the server asks for (Go's default sends none
		// when no certificate matches them).
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
	}
	return credentials.NewTLS(c)
}

// TestTLSRefusals reruns issue 22's attacks on a cluster with mutual TLS:
// each connection is refused with a clear error, and nothing changes — every
// shard still runs on exactly the one host it ran on, and no child was added.
func TestTLSRefusals(t *testing.T) {
	c := startTLSCluster(t)
	before := map[string][]interfaces.ShardID{}
	for name, h := range c.hosts {
		before[name] = h.Agent().Running()
	}
	addr := c.region.GRPCAddr()
	trust := c.pki.Issue(t, tlsutil.Named(tlsutil.RoleHost, "trust-only"))
	h2 := c.pki.Issue(t, tlsutil.Named(tlsutil.RoleHost, "h-2"))
	other := tlstest.New(t).Issue(t, tlsutil.Named(tlsutil.RoleHost, "h-1"))
	now := time.Now()
	expired := c.pki.IssueValid(t, tlsutil.Named(tlsutil.RoleHost, "h-1"), now.Add(-48*time.Hour), now.Add(-time.Hour))
	regionCert := c.pki.Issue(t, tlsutil.Replica(interfaces.TierRegion, "eu-1", "eu-1-9"))

	for _, tt := range []struct {
		name  string
		creds credentials.TransportCredentials
		claim string
		// want is in the caller's error (Hello refusals) or the region's log
		// (handshake refusals: in TLS 1.3 the client learns only that the
		// server hung up).
		want string
	}{
		{"plaintext", insecure.NewCredentials(), "h-1", "tls: first record does not look like a TLS handshake"},
		{"no certificate", rawCreds(t, trust, nil), "h-1", "client didn't provide a certificate"},
		{"a certificate from another CA", rawCreds(t, trust, &other), "h-1", "certificate signed by unknown authority"},
		{"an expired certificate", rawCreds(t, trust, &expired), "h-1", "certificate has expired"},
		// The impersonation of issue 22: a client claiming h-1's ID.
		{"a host certificate claiming another host's ID", rawCreds(t, trust, &h2), "h-1",
			"hello: refused: the Hello claims host h-1, but peer certificate names host h-2 (strata://host/h-2), want host h-1"},
		{"a region certificate used as a host", rawCreds(t, trust, &regionCert), "eu-1",
			"hello: refused: the Hello claims host eu-1, but peer certificate names region eu-1 replica eu-1-9 (strata://region/eu-1/eu-1-9), want host eu-1"},
		// The fake host of issue 22: a new ID with a huge capacity.
		{"a fake host with another host's certificate", rawCreds(t, trust, &h2), "evil",
			"hello: refused: the Hello claims host evil, but peer certificate names host h-2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, err := hello(t, addr, tt.creds, interfaces.TierHost, tt.claim)
			if err == nil {
				t.Fatalf("accepted: got %v", m)
			}
			if !strings.Contains(err.Error(), tt.want) {
				// The server logs its side once its handshake returns,
				// which may be after the client saw the hang-up.
				testutil.Until(t, fmt.Sprintf("the error %q or the region's log says %q", err, tt.want), 10*time.Second, func() bool {
					return strings.Contains(c.logs["eu-1"].String(), tt.want)
				})
			}
			if strings.HasPrefix(tt.want, "hello:") && status.Code(err) != codes.PermissionDenied {
				t.Fatalf("code %v, want PermissionDenied", status.Code(err))
			}
		})
	}
	// The fake region of issue 22: region eu-1's certificate claiming a new
	// region evil-region at the global tier.
	_, err := hello(t, c.global.GRPCAddr(), rawCreds(t, trust, &regionCert), interfaces.TierRegion, "evil-region")
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "hello: refused: the Hello claims region evil-region, but peer certificate names region eu-1 replica eu-1-9 (strata://region/eu-1/eu-1-9), want a replica of region evil-region") {
		t.Errorf("a fake region: %v", err)
	}
	// Nothing changed: the same shards on the same hosts, no new child.
	if err := c.checkOwners(); err != nil {
		t.Fatal(err)
	}
	for name, h := range c.hosts {
		if got := h.Agent().Running(); fmt.Sprint(got) != fmt.Sprint(before[name]) {
			t.Errorf("%s ran %v, now %v", name, before[name], got)
		}
	}
	for addr, want := range map[string]string{c.global.GRPCAddr(): "eu-1", c.region.GRPCAddr(): "h-1 h-2"} {
		if got := strings.Join(c.children(t, addr), " "); got != want {
			t.Errorf("children at %s: %s, want %s", addr, got, want)
		}
	}
	if !strings.Contains(c.logs["eu-1"].String(), "session: refused a Hello claiming host h-1: peer certificate names host h-2") {
		t.Errorf("the region did not log the refused impersonation:\n%s", c.logs["eu-1"])
	}
}

// TestRogueParentIsRefused: a host whose parent address is served by a
// server with a valid certificate for another identity (another region), or
// by one without TLS, never opens a session there, so it takes no Assign.
func TestRogueParentIsRefused(t *testing.T) {
	c := startTLSCluster(t)
	dir := t.TempDir()
	rogue := startTLSTier(t, c.pki, dir, interfaces.TierRegion, "us-1", []string{c.global.GRPCAddr()}, &testutil.Buffer{})
	log := &testutil.Buffer{}
	h := startTLSHost(t, c.pki, dir, "h-3", "eu-1", []string{rogue.GRPCAddr()}, log)
	testutil.Until(t, "h-3 logs the refused parent", 20*time.Second, func() bool {
		return strings.Contains(log.String(), "peer certificate names region us-1 replica us-1-1 (strata://region/us-1/us-1-1), want a replica of region eu-1")
	})
	if h.Agent().Running() != nil && len(h.Agent().Running()) > 0 {
		t.Fatalf("h-3 runs %v", h.Agent().Running())
	}
	if got := c.children(t, rogue.GRPCAddr()); len(got) > 0 {
		t.Errorf("the rogue region registered %v", got)
	}
	// A parent address served without TLS is refused too.
	plainLog := &testutil.Buffer{}
	_ = startTLSHost(t, c.pki, dir, "h-4", "eu-1", []string{startPlaintextTier(t, dir)}, plainLog)
	testutil.Until(t, "h-4 logs the refused plaintext parent", 20*time.Second, func() bool {
		return strings.Contains(plainLog.String(), "session: ") && strings.Contains(plainLog.String(), "tls")
	})
}

func startPlaintextTier(t *testing.T, dir string) string {
	t.Helper()
	d, err := tierd.Start(tierd.Config{Tier: interfaces.TierGlobal, Instance: "global", NodeID: "p1", DataDir: filepath.Join(dir, "plain"),
		RaftAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", Bootstrap: true, Chain: []string{interfaces.TierGlobal, interfaces.TierHost}}.Defaults(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d.GRPCAddr()
}

// TestChildTierAdvertisesItsConfiguredAddress: a region announces listen.grpc
// as configured (the name its certificate carries), not the address the
// listener resolved it to, so that the client commands walking the tree can
// verify its certificate. Before, it announced the resolved IP, which a
// certificate for a DNS name does not list (the compose cluster: "cannot
// validate certificate for 172.19.0.5 because it doesn't contain any IP SANs").
func TestChildTierAdvertisesItsConfiguredAddress(t *testing.T) {
	pki := tlstest.New(t)
	dir := t.TempDir()
	global := startTLSTier(t, pki, dir, interfaces.TierGlobal, "global", nil, &testutil.Buffer{})
	_, port, _ := strings.Cut(testutil.FreeAddr(t), ":")
	addr := "localhost:" + port
	cfg := tierd.Config{Tier: interfaces.TierRegion, Instance: "eu-1", NodeID: "eu-1-1", DataDir: filepath.Join(dir, "eu-1"),
		RaftAddr: "127.0.0.1:0", GRPCAddr: addr, Bootstrap: true, Parent: []string{global.GRPCAddr()},
		Interval: 100 * time.Millisecond, TLS: tlstest.Store(t, pki.Issue(t, tlsutil.Replica(interfaces.TierRegion, "eu-1", "eu-1-1")))}
	d, err := tierd.Start(cfg.Defaults(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	c := &tlsCluster{pki: pki}
	testutil.Eventually(t, "the global tier lists eu-1 at its configured address", 20*time.Second, func() error {
		op := tlstest.Store(t, pki.Issue(t, tlsutil.Named(tlsutil.RoleOperator, "dave")))
		cc, err := grpc.NewClient(global.GRPCAddr(), grpc.WithTransportCredentials(op.ClientCredentials(tlsutil.IsAnyReplica)))
		if err != nil {
			return err
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := wire.NewAdminClient(cc).Status(ctx, &wire.StatusRequest{})
		if err != nil {
			return err
		}
		for _, tier := range st.GetTiers() {
			for _, in := range tier.GetInstances() {
				for _, ch := range in.GetChildren() {
					if ch.GetChild().GetId() == "eu-1" {
						if ch.GetAddress() != addr {
							return fmt.Errorf("eu-1 at %q, want %q", ch.GetAddress(), addr)
						}
						return nil
					}
				}
			}
		}
		return fmt.Errorf("no eu-1 yet")
	})
	// And the address works for a client that checks the certificate.
	if got := c.children(t, addr); len(got) != 0 {
		t.Fatalf("eu-1 has children %v", got)
	}
}

// TestRotationWithoutDowntime: replacing a region's certificate files on
// disk rotates its certificate for every new connection without a restart,
// while the hosts' open sessions carry on and every shard keeps running where
// it ran.
func TestRotationWithoutDowntime(t *testing.T) {
	c := startTLSCluster(t)
	before := map[string][]interfaces.ShardID{}
	for name, h := range c.hosts {
		before[name] = h.Agent().Running()
	}
	serial := func() string {
		op := tlstest.Store(t, c.pki.Issue(t, tlsutil.Named(tlsutil.RoleOperator, "erin")))
		cc, err := grpc.NewClient(c.region.GRPCAddr(), grpc.WithTransportCredentials(op.ClientCredentials(tlsutil.IsReplicaOf(interfaces.TierRegion, "eu-1"))))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var p peer.Peer
		if _, err := wire.NewAdminClient(cc).Status(ctx, &wire.StatusRequest{}, grpc.Peer(&p)); err != nil {
			t.Fatal(err)
		}
		return p.AuthInfo.(credentials.TLSInfo).State.PeerCertificates[0].SerialNumber.String()
	}
	old := serial()
	now := time.Now()
	dir := filepath.Dir(c.files["eu-1"].Cert)
	c.pki.IssueTo(t, dir, tlsutil.Replica(interfaces.TierRegion, "eu-1", "eu-1-1"), now.Add(-time.Hour), now.Add(48*time.Hour))
	rotated, err := tlsutil.ReadCertPEM(c.files["eu-1"].Cert)
	if err != nil {
		t.Fatal(err)
	}
	if got := serial(); got != rotated.SerialNumber.String() || got == old {
		t.Fatalf("after rotation the region presents serial %s; before %s, on disk %s", got, old, rotated.SerialNumber)
	}
	if !strings.Contains(c.logs["eu-1"].String(), "tls: reloaded") {
		t.Errorf("the reload was not logged:\n%s", c.logs["eu-1"])
	}
	for name, h := range c.hosts {
		if got := h.Agent().Running(); fmt.Sprint(got) != fmt.Sprint(before[name]) {
			t.Errorf("%s ran %v, now %v", name, before[name], got)
		}
	}
	if err := c.checkOwners(); err != nil {
		t.Fatal(err)
	}
}
