package tierd

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/strata-sched/strata/coordinator/acl"
	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/testutil"
)

// TestEveryAdminRPCHasAPolicy: the table acl.Methods names every RPC of the
// Admin service, and nothing else; an RPC added to admin.proto without a
// policy fails here (and is refused to every caller meanwhile).
func TestEveryAdminRPCHasAPolicy(t *testing.T) {
	names := map[string]bool{}
	for _, m := range wire.Admin_ServiceDesc.Methods {
		names[acl.AdminService+m.MethodName] = true
	}
	for _, s := range wire.Admin_ServiceDesc.Streams {
		names[acl.AdminService+s.StreamName] = true
	}
	for n := range names {
		if p, ok := acl.Methods[n]; !ok || !p.Valid() {
			t.Errorf("%s: no policy in acl.Methods", n)
		}
	}
	for n := range acl.Methods {
		if !names[n] {
			t.Errorf("acl.Methods names %s, which the Admin service does not have", n)
		}
	}
}

const testBootstrap = "strata_test-bootstrap-secret-0123456789"

// startACL starts a one-replica global tier with ACLs on and the bootstrap
// secret testBootstrap in its bootstrap file, and mod applied.
func startACL(t *testing.T, mod func(*Config)) *Daemon {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "bootstrap")
	if err := os.WriteFile(file, []byte(testBootstrap+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Tier: "global", Instance: "g", NodeID: "n1", DataDir: dir, RaftAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0",
		Bootstrap: true, Interval: 50 * time.Millisecond, ACL: ACLConfig{Enabled: true, BootstrapTokenFile: file}}
	if mod != nil {
		mod(&cfg)
	}
	d, err := Start(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	testutil.Until(t, "leader", 10*time.Second, func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.leader && d.IsLeader()
	})
	return d
}

func withToken(secret string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), acl.MetadataKey, acl.Bearer(secret))
}

// refused checks that err is a gRPC status with code c and a message that
// contains want.
func refused(t *testing.T, what string, err error, c codes.Code, want string) {
	t.Helper()
	if code(err) != c || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: %v; want %s containing %q", what, err, c, want)
	}
}

// TestACLRefusals: a missing token, a wrong one, a revoked one and a token
// whose policy is below the call's are refused with a clear error, and
// nothing changes; each policy allows what it should.
func TestACLRefusals(t *testing.T) {
	d := startACL(t, nil)
	r1 := &fakeChild{id: "r1"}
	connectChild(t, r1, d.GRPCAddr(), "g")
	t.Cleanup(r1.cancel)
	testutil.Until(t, "r1 registered", 10*time.Second, func() bool { _, ok := d.Tier().FSM.Child("r1"); return ok })
	a := wire.NewAdminClient(dial(t, d.GRPCAddr()))
	boot := withToken(testBootstrap)
	mk := func(id, policy string) string {
		t.Helper()
		r, err := a.CreateToken(boot, &wire.CreateTokenRequest{Id: id, Policy: policy})
		if err != nil {
			t.Fatalf("create %s: %v", id, err)
		}
		if !strings.HasPrefix(r.GetSecret(), acl.SecretPrefix) || r.GetPolicy() != policy {
			t.Fatalf("create %s: %+v", id, r)
		}
		return r.GetSecret()
	}
	read, operate, admin := withToken(mk("ro", "read")), withToken(mk("ops", "operate")), withToken(mk("root", "admin"))
	job := &wire.SubmitJobRequest{Job: &wire.JobSpec{Id: "j", Parallelism: 2, ShardTemplate: &wire.Shard{Load: &wire.Load{Cpu: 1}}}}

	_, err := a.Status(context.Background(), &wire.StatusRequest{})
	refused(t, "status without a token", err, codes.Unauthenticated, "requires an ACL token: give --token or STRATA_TOKEN")
	_, err = a.Drain(context.Background(), &wire.DrainRequest{Child: "r1"})
	refused(t, "drain without a token", err, codes.Unauthenticated, "requires an ACL token")
	_, err = a.Drain(withToken("strata_not-a-token-of-this-tier-at-all"), &wire.DrainRequest{Child: "r1"})
	refused(t, "drain with a wrong token", err, codes.Unauthenticated, "unknown or revoked ACL token")
	_, err = a.Drain(metadata.AppendToOutgoingContext(context.Background(), acl.MetadataKey, "Basic abc"), &wire.DrainRequest{Child: "r1"})
	refused(t, "drain with another scheme", err, codes.Unauthenticated, `must be "Bearer <secret>"`)
	_, err = a.Drain(read, &wire.DrainRequest{Child: "r1"})
	refused(t, "drain with a read token", err, codes.PermissionDenied, `Drain needs a token with policy operate; token "ro" has policy read`)
	_, err = a.SubmitJob(operate, job)
	refused(t, "submit with an operate token", err, codes.PermissionDenied, `SubmitJob needs a token with policy admin; token "ops" has policy operate`)
	_, err = a.CreateToken(operate, &wire.CreateTokenRequest{Id: "x", Policy: "admin"})
	refused(t, "create a token with an operate token", err, codes.PermissionDenied, "CreateToken needs a token with policy admin")
	_, err = a.RaftRemove(operate, &wire.RaftRemoveRequest{Id: "n1"})
	refused(t, "raft remove with an operate token", err, codes.PermissionDenied, "RaftRemove needs a token with policy admin")
	_, err = a.CreateToken(admin, &wire.CreateTokenRequest{Id: "ro", Policy: "admin"})
	refused(t, "a token ID twice", err, codes.FailedPrecondition, `token "ro" already exists`)
	_, err = a.CreateToken(admin, &wire.CreateTokenRequest{Id: "y", Policy: "root"})
	refused(t, "a bad policy", err, codes.InvalidArgument, "policy: must be read, operate or admin")
	_, err = a.SubmitJob(admin, &wire.SubmitJobRequest{Job: &wire.JobSpec{Id: "a/../../etc", Parallelism: 1, ShardTemplate: &wire.Shard{}}})
	refused(t, "a job ID with a path", err, codes.InvalidArgument, `job.id: must be 1-253 characters`)

	if n := len(d.Tier().FSM.Assignments()) + d.Tier().FSM.Stats().Shards; n != 0 {
		t.Errorf("the refused submits left %d shards", n)
	}
	if c, _ := d.Tier().FSM.Child("r1"); c.State != interfaces.ChildActive {
		t.Errorf("r1 is %v after the refused drains", c.State)
	}
	if n := len(d.Tier().FSM.Tokens()); n != 3 {
		t.Errorf("%d tokens after the refused creates, want 3", n)
	}

	// What each policy allows.
	if _, err := a.Status(read, &wire.StatusRequest{}); err != nil {
		t.Errorf("status with a read token: %v", err)
	}
	if _, err := a.Drain(operate, &wire.DrainRequest{Child: "r1"}); err != nil {
		t.Errorf("drain with an operate token: %v", err)
	}
	if _, err := a.SubmitJob(admin, job); err != nil {
		t.Errorf("submit with an admin token: %v", err)
	}
	l, err := a.ListTokens(admin, &wire.ListTokensRequest{})
	if err != nil || len(l.GetTokens()) != 4 || !l.GetTokens()[0].GetBootstrap() {
		t.Errorf("list: %v, %v", l, err)
	}
	for _, tk := range l.GetTokens() {
		if strings.Contains(tk.String(), acl.SecretPrefix) {
			t.Errorf("list shows a secret: %v", tk)
		}
	}
	// A revoked token is refused at once.
	if _, err := a.RevokeToken(admin, &wire.RevokeTokenRequest{Id: "ro"}); err != nil {
		t.Fatal(err)
	}
	_, err = a.Status(read, &wire.StatusRequest{})
	refused(t, "status with a revoked token", err, codes.Unauthenticated, "unknown or revoked")
	_, err = a.RevokeToken(admin, &wire.RevokeTokenRequest{Id: "bootstrap"})
	refused(t, "revoking the file's bootstrap token", err, codes.NotFound, "comes from acl.bootstrap_token_file")
}

// TestBootstrapTokenMadeOnce: with ACLs on and no bootstrap file, the first
// leader makes the bootstrap token, writes its secret to the file (0600) and
// stores only its hash; the token is an admin token. Once revoked it stays
// revoked, also after a restart that finds the file (a made file is not an
// operator's bootstrap file).
func TestBootstrapTokenMadeOnce(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Tier: "global", Instance: "g", NodeID: "n1", DataDir: dir, RaftAddr: testutil.FreeAddr(t), GRPCAddr: testutil.FreeAddr(t),
		Bootstrap: true, Interval: 50 * time.Millisecond, ACL: ACLConfig{Enabled: true}}
	d, err := Start(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { d.Close() }()
	file := filepath.Join(dir, "acl-bootstrap-token")
	testutil.Until(t, "the bootstrap token", 10*time.Second, func() bool { return len(d.Tier().FSM.Tokens()) == 1 })
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(file); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	secret := lines[len(lines)-1]
	tok := d.Tier().FSM.Tokens()[0]
	if tok.ID != BootstrapTokenID || tok.Policy != acl.PolicyAdmin || tok.Hash != acl.HashSecret(secret) {
		t.Fatalf("stored %+v", tok)
	}
	raw, _ := d.Tier().SnapshotBytes()
	if strings.Contains(string(raw), secret) {
		t.Error("the state holds the secret")
	}
	a := wire.NewAdminClient(dial(t, d.GRPCAddr()))
	root, err := a.CreateToken(withToken(secret), &wire.CreateTokenRequest{Id: "root", Policy: "admin"})
	if err != nil {
		t.Fatalf("the bootstrap token: %v", err)
	}
	// Later rounds find tokens in the state: no second bootstrap token.
	if n := len(d.Tier().FSM.Tokens()); n != 2 {
		t.Errorf("%d tokens, want bootstrap and root", n)
	}
	if _, err := a.RevokeToken(withToken(root.GetSecret()), &wire.RevokeTokenRequest{Id: BootstrapTokenID}); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if d, err = Start(cfg, nil); err != nil {
		t.Fatal(err)
	}
	testutil.Until(t, "leader again", 10*time.Second, func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.leader
	})
	a = wire.NewAdminClient(dial(t, d.GRPCAddr()))
	_, err = a.Status(withToken(secret), &wire.StatusRequest{})
	refused(t, "the revoked bootstrap token after a restart", err, codes.Unauthenticated, "unknown or revoked")
	if _, err := a.Status(withToken(root.GetSecret()), &wire.StatusRequest{}); err != nil {
		t.Errorf("root after the restart: %v", err)
	}
}

// TestFakeChildAndUnauthenticatedDrainsRefused reruns the attack of issue 22:
// a fake child "evil" with cpu 1e9 registers by its Hello, then two Drains
// without a token move every shard onto it. Without ACLs and an allow-list
// (the old behaviour, the control run) it takes the shards; with them its
// Hello is refused (PERMISSION_DENIED, nothing registered) and the Drains
// too (UNAUTHENTICATED, nothing drained), and no shard moves.
func TestFakeChildAndUnauthenticatedDrainsRefused(t *testing.T) {
	attack := func(t *testing.T, protect bool) (evilShards int, helloErr error) {
		d := startACL(t, func(c *Config) {
			if !protect {
				c.ACL = ACLConfig{}
				return
			}
			c.Children.Allow = []string{"r1", "r2"}
		})
		r1, r2 := &fakeChild{id: "r1"}, &fakeChild{id: "r2"}
		connectChild(t, r1, d.GRPCAddr(), "g")
		connectChild(t, r2, d.GRPCAddr(), "g")
		t.Cleanup(r1.cancel)
		t.Cleanup(r2.cancel)
		testutil.Until(t, "children", 10*time.Second, func() bool { return len(d.Tier().FSM.Children()) == 2 })
		a := wire.NewAdminClient(dial(t, d.GRPCAddr()))
		if _, err := a.SubmitJob(withToken(testBootstrap), &wire.SubmitJobRequest{Job: &wire.JobSpec{Id: "j", Parallelism: 40, ShardTemplate: &wire.Shard{Load: &wire.Load{Cpu: 1}}}}); err != nil {
			t.Fatal(err)
		}
		testutil.Until(t, "placed", 15*time.Second, func() bool { return len(d.Tier().FSM.Assignments()) == 40 })

		// The attacker: a Hello with a huge capacity, then two Drains.
		st, err := wire.NewSessionClient(dial(t, d.GRPCAddr())).Connect(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		h := wire.HelloToWire(interfaces.Child{ID: "evil", Tier: interfaces.TierRegion, Capacity: interfaces.Load{CPU: 1e9}}, nil)
		if err := st.Send(&wire.ChildMessage{Msg: &wire.ChildMessage_Hello{Hello: h}}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != nil {
			helloErr = err
		}
		drain := func(child string) error {
			_, err := a.Drain(context.Background(), &wire.DrainRequest{Child: child})
			return err
		}
		if protect {
			refused(t, "evil's Hello", helloErr, codes.PermissionDenied, `hello.child_id: "evil" is not in children.allow`)
			refused(t, "drain r1 without a token", drain("r1"), codes.Unauthenticated, "requires an ACL token")
			refused(t, "drain r2 without a token", drain("r2"), codes.Unauthenticated, "requires an ACL token")
			if _, ok := d.Tier().FSM.Child("evil"); ok {
				t.Error("evil was registered")
			}
			for _, id := range []interfaces.ChildID{"r1", "r2"} {
				if c, _ := d.Tier().FSM.Child(id); c.State != interfaces.ChildActive {
					t.Errorf("%s is %v", id, c.State)
				}
			}
		} else {
			testutil.Until(t, "evil registered", 10*time.Second, func() bool { _, ok := d.Tier().FSM.Child("evil"); return ok })
			if err := drain("r1"); err != nil {
				t.Fatal(err)
			}
			if err := drain("r2"); err != nil {
				t.Fatal(err)
			}
			testutil.Until(t, "shards moved to evil", 20*time.Second, func() bool {
				n := 0
				for _, as := range d.Tier().FSM.Assignments() {
					if as.Child == "evil" {
						n++
					}
				}
				return n > 0
			})
		}
		for _, as := range d.Tier().FSM.Assignments() {
			if as.Child == "evil" {
				evilShards++
			}
		}
		return evilShards, helloErr
	}
	t.Run("unprotected: the attack works", func(t *testing.T) {
		if n, _ := attack(t, false); n == 0 {
			t.Fatal("evil got no shard: the control run does not show the attack")
		}
	})
	t.Run("acl and allow-list: refused", func(t *testing.T) {
		if n, _ := attack(t, true); n != 0 {
			t.Fatalf("evil got %d shards", n)
		}
	})
}

// TestAdmissionBySelector: with children.selector a child must carry the
// labels; one that does not is refused naming the label, and registers
// nothing.
func TestAdmissionBySelector(t *testing.T) {
	d := startACL(t, func(c *Config) { c.Children.Selector = map[string]string{"pool": "prod"} })
	open := func(labels map[string]string) error {
		st, err := wire.NewSessionClient(dial(t, d.GRPCAddr())).Connect(context.Background())
		if err != nil {
			return err
		}
		h := wire.HelloToWire(interfaces.Child{ID: "r9", Tier: interfaces.TierRegion, Capacity: interfaces.Load{CPU: 1}, Labels: labels}, nil)
		if err := st.Send(&wire.ChildMessage{Msg: &wire.ChildMessage_Hello{Hello: h}}); err != nil {
			return err
		}
		_, err = st.Recv()
		return err
	}
	refused(t, "no label", open(nil), codes.PermissionDenied, `hello.labels: child "r9" must carry pool=prod`)
	refused(t, "another value", open(map[string]string{"pool": "dev"}), codes.PermissionDenied, "it has pool=dev")
	if _, ok := d.Tier().FSM.Child("r9"); ok {
		t.Fatal("a refused child was registered")
	}
	if err := open(map[string]string{"pool": "prod"}); err != nil {
		t.Fatalf("a child with the label: %v", err)
	}
}

// TestFailedChildrenForgotten: children.gc_after forgets a child failed for
// that long on the control loop's clock, never one that still holds a shard
// and never earlier. The region has no parent lease, so its own rounds change
// nothing; the test drives gcChildren with its own clock.
func TestFailedChildrenForgotten(t *testing.T) {
	d, _ := revokeRegion(t, "h1", "h2", "h3")
	must(t, d, &fsm.Assign{Shard: "j/0", Child: "h1"})
	for _, id := range []interfaces.ChildID{"h1", "h2"} {
		must(t, d, &fsm.PutChild{Child: interfaces.Child{ID: id, Tier: interfaces.TierHost, Capacity: interfaces.Load{CPU: 8}, State: interfaces.ChildFailed}})
	}
	ctx := context.Background()
	t0 := time.Unix(1000, 0)
	const after = time.Hour
	d.gcChildren(ctx, t0, after) // first seen failed: h1, h2
	d.gcChildren(ctx, t0.Add(after-time.Nanosecond), after)
	for _, id := range []interfaces.ChildID{"h1", "h2", "h3"} {
		if _, ok := d.Tier().FSM.Child(id); !ok {
			t.Fatalf("%s forgotten before children.gc_after", id)
		}
	}
	d.gcChildren(ctx, t0.Add(after), after)
	if _, ok := d.Tier().FSM.Child("h2"); ok {
		t.Error("h2 (failed for gc_after, no shard) is still known")
	}
	if _, ok := d.Tier().FSM.Child("h1"); !ok {
		t.Error("h1 holds j/0 and was forgotten")
	}
	if _, ok := d.Tier().FSM.Child("h3"); !ok {
		t.Error("h3 is active and was forgotten")
	}
	d.gcChildren(ctx, t0.Add(10*after), after)
	if a, ok := d.Tier().FSM.Assignment("j/0"); !ok || a.Child != "h1" {
		t.Errorf("j/0: %+v, %v", a, ok)
	}
}

// TestHTTPEndpointsBehindTokens: with ACLs on, the HTTP endpoints need a read
// token unless acl.anonymous_http lists them.
func TestHTTPEndpointsBehindTokens(t *testing.T) {
	d := startACL(t, func(c *Config) {
		c.HTTPAddr = "127.0.0.1:0"
		c.ACL.AnonymousHTTP = []string{"healthz"}
	})
	get := func(path, secret string) int {
		req, _ := http.NewRequest(http.MethodGet, "http://"+d.HTTPAddr()+path, nil)
		if secret != "" {
			req.Header.Set("Authorization", acl.Bearer(secret))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := get("/healthz", ""); c != http.StatusOK {
		t.Errorf("/healthz (anonymous_http) without a token: %d", c)
	}
	for _, p := range []string{"/metrics", "/readyz"} {
		if c := get(p, ""); c != http.StatusUnauthorized {
			t.Errorf("%s without a token: %d, want 401", p, c)
		}
		if c := get(p, "strata_wrong-token-0123456789abcdef"); c != http.StatusUnauthorized {
			t.Errorf("%s with a wrong token: %d, want 401", p, c)
		}
	}
	if c := get("/metrics", testBootstrap); c != http.StatusOK {
		t.Errorf("/metrics with a token: %d", c)
	}
	if err := (Config{ACL: ACLConfig{AnonymousHTTP: []string{"status"}}}).ACL.validate(); err == nil || !strings.Contains(err.Error(), "acl.anonymous_http[0]") {
		t.Errorf("a bad endpoint name: %v", err)
	}
}
