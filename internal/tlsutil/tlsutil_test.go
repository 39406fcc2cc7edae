package tlsutil_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"

	"github.com/strata-sched/strata/internal/testutil"
	"github.com/strata-sched/strata/internal/tlsutil"
	"github.com/strata-sched/strata/internal/tlsutil/tlstest"
)

func TestIdentityURIRoundTrip(t *testing.T) {
	for _, id := range []tlsutil.Identity{
		tlsutil.Named(tlsutil.RoleHost, "h-7"),
		tlsutil.Replica("region", "eu-1", "n1"),
		tlsutil.Replica("global", "global", "g1"),
		tlsutil.Named(tlsutil.RoleOperator, "alice"),
		tlsutil.Named(tlsutil.RolePlugin, "packer"),
		tlsutil.Named(tlsutil.RoleWorker, "w1"),
	} {
		u := id.URI()
		got, err := tlsutil.ParseURI(u)
		if err != nil || got != id {
			t.Errorf("%s: parsed %+v, %v", u, got, err)
		}
	}
	if s := tlsutil.Named(tlsutil.RoleHost, "h-7").String(); s != "strata://host/h-7" {
		t.Errorf("host URI %s", s)
	}
	if s := tlsutil.Replica("region", "eu-1", "n1").String(); s != "strata://region/eu-1/n1" {
		t.Errorf("replica URI %s", s)
	}
	for _, bad := range []string{"strata://host/..", "strata://host/a/b/c", "strata://nobody/x", "https://host/h", "strata://host/", "strata://host/a%2Fb", "strata://host:1/h"} {
		u, err := url.Parse(bad)
		if err != nil {
			continue
		}
		if id, err := tlsutil.ParseURI(u); err == nil {
			t.Errorf("%s parsed as %+v, want an error", bad, id)
		}
	}
}

// server is a gRPC health server on loopback with the store's credentials;
// it records the identity of every caller and can cut every open connection.
type server struct {
	addr    string
	log     *logBuf
	mu      sync.Mutex
	ids     []tlsutil.Identity
	serials []*big.Int // of the client certificates
	lis     *trackingListener
}

type trackingListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *trackingListener) cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

type logBuf struct {
	mu    sync.Mutex
	lines []string
}

func (l *logBuf) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

func serve(t *testing.T, creds func(logf func(string, ...any)) credentials.TransportCredentials) *server {
	t.Helper()
	lb := &logBuf{}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{addr: lis.Addr().String(), lis: &trackingListener{Listener: lis}, log: lb}
	g := grpc.NewServer(grpc.Creds(creds(lb.logf)), grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		id, _, err := tlsutil.PeerIdentity(ctx)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.ids = append(s.ids, id)
		if p, ok := peer.FromContext(ctx); ok {
			if info, ok := p.AuthInfo.(credentials.TLSInfo); ok {
				s.serials = append(s.serials, info.State.PeerCertificates[0].SerialNumber)
			}
		}
		s.mu.Unlock()
		return h(ctx, req)
	}))
	healthpb.RegisterHealthServer(g, health.NewServer())
	go func() { _ = g.Serve(s.lis) }()
	t.Cleanup(g.Stop)
	return s
}

func anyClient(st *tlsutil.Store) func(func(string, ...any)) credentials.TransportCredentials {
	return func(logf func(string, ...any)) credentials.TransportCredentials {
		return st.ServerCredentials(nil, logf)
	}
}

func (s *server) last() tlsutil.Identity {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids[len(s.ids)-1]
}

func call(t *testing.T, cc *grpc.ClientConn) (serverSerial *big.Int, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var p peer.Peer
	_, err = healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p))
	if err != nil {
		return nil, err
	}
	return p.AuthInfo.(credentials.TLSInfo).State.PeerCertificates[0].SerialNumber, nil
}

func dial(t *testing.T, addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func mustCall(t *testing.T, cc *grpc.ClientConn) *big.Int {
	t.Helper()
	s, err := call(t, cc)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func serialOf(t *testing.T, f tlsutil.Files) *big.Int {
	t.Helper()
	c, err := tlsutil.ReadCertPEM(f.Cert)
	if err != nil {
		t.Fatal(err)
	}
	return c.SerialNumber
}

// TestRotationUnderLiveConnectionPool replaces the server's and the client's
// certificates on disk while a ClientConn is open: calls on the open
// connection go on, and once the connection is cut the pool reconnects with
// the new certificates on both sides, without a restart of either.
func TestRotationUnderLiveConnectionPool(t *testing.T) {
	pki := tlstest.New(t)
	srvFiles := pki.Issue(t, tlsutil.Replica("region", "eu-1", "n1"))
	cliFiles := pki.Issue(t, tlsutil.Named(tlsutil.RoleHost, "h-1"))
	srv := serve(t, anyClient(tlstest.Store(t, srvFiles)))
	cc := dial(t, srv.addr, tlstest.Store(t, cliFiles).ClientCredentials(tlsutil.IsReplicaOf("region", "eu-1")))

	oldSrv, oldCli := serialOf(t, srvFiles), serialOf(t, cliFiles)
	if got := mustCall(t, cc); got.Cmp(oldSrv) != 0 {
		t.Fatalf("server serial %v, want %v", got, oldSrv)
	}
	now := time.Now()
	pki.IssueTo(t, dirOf(srvFiles), tlsutil.Replica("region", "eu-1", "n1"), now.Add(-time.Hour), now.Add(48*time.Hour))
	pki.IssueTo(t, dirOf(cliFiles), tlsutil.Named(tlsutil.RoleHost, "h-1"), now.Add(-time.Hour), now.Add(48*time.Hour))
	newSrv, newCli := serialOf(t, srvFiles), serialOf(t, cliFiles)
	if newSrv.Cmp(oldSrv) == 0 || newCli.Cmp(oldCli) == 0 {
		t.Fatal("rotation kept the serials")
	}
	// The open connection keeps its handshake.
	if got := mustCall(t, cc); got.Cmp(oldSrv) != 0 {
		t.Fatalf("open connection: server serial %v, want the old %v", got, oldSrv)
	}
	srv.lis.cut()
	// The pool reconnects: calls fail until it has (Unavailable), then the
	// new connection carries the new certificates both ways.
	var got *big.Int
	deadline := time.Now().Add(20 * time.Second)
	for {
		s, err := call(t, cc)
		if err == nil {
			got = s
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no call succeeded after the cut: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got.Cmp(newSrv) != 0 {
		t.Errorf("after reconnect: server serial %v, want the rotated %v", got, newSrv)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if n := len(srv.serials); n < 3 || srv.serials[0].Cmp(oldCli) != 0 || srv.serials[1].Cmp(oldCli) != 0 || srv.serials[n-1].Cmp(newCli) != 0 {
		t.Fatalf("client serials the server saw: %v; want %v twice, then the rotated %v", srv.serials, oldCli, newCli)
	}
}

func dirOf(f tlsutil.Files) string { return f.Cert[:strings.LastIndex(f.Cert, "/")] }

// TestHalfWrittenRotationKeepsTheOldCertificate: a key that no longer matches
// its certificate (the key replaced first) is not loaded; the old pair stays in
// use until the certificate arrives too.
func TestHalfWrittenRotationKeepsTheOldCertificate(t *testing.T) {
	pki := tlstest.New(t)
	f := pki.Issue(t, tlsutil.Named(tlsutil.RoleHost, "h-1"))
	var logs []string
	st, err := tlsutil.Open(f, func(format string, args ...any) { logs = append(logs, format) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	old := st.NotAfter()
	other := pki.Issue(t, tlsutil.Named(tlsutil.RoleHost, "h-1"))
	key, _ := os.ReadFile(other.Key)
	if err := os.WriteFile(f.Key, key, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := st.NotAfter(); !got.Equal(old) {
		t.Fatalf("a mismatched key was loaded")
	}
	if len(logs) != 1 {
		t.Fatalf("want one log of the failed reload, got %q", logs)
	}
	cert, _ := os.ReadFile(other.Cert)
	if err := os.WriteFile(f.Cert, cert, 0o644); err != nil {
		t.Fatal(err)
	}
	want, _ := tlsutil.ReadCertPEM(other.Cert)
	if got := st.NotAfter(); !got.Equal(want.NotAfter) {
		t.Fatalf("the complete new pair was not loaded")
	}
}

// TestRefusals: every handshake a server or a client must refuse, on a real
// gRPC server on loopback, with the error the caller sees.
func TestRefusals(t *testing.T) {
	pki := tlstest.New(t)
	other := tlstest.New(t)
	srvFiles := pki.Issue(t, tlsutil.Replica("region", "eu-1", "n1"))
	st := tlstest.Store(t, srvFiles)
	srv := serve(t, func(logf func(string, ...any)) credentials.TransportCredentials {
		return st.ServerCredentials(tlsutil.IsRole(tlsutil.RoleHost, tlsutil.RoleReplica, tlsutil.RoleOperator), logf)
	})
	good := tlstest.Store(t, pki.Issue(t, tlsutil.Named(tlsutil.RoleHost, "h-1")))

	if _, err := call(t, dial(t, srv.addr, good.ClientCredentials(tlsutil.IsReplicaOf("region", "eu-1")))); err != nil {
		t.Fatalf("a good client was refused: %v", err)
	}
	if srv.last() != tlsutil.Named(tlsutil.RoleHost, "h-1") {
		t.Fatalf("server saw %v", srv.last())
	}

	rootsOnly := func() *tls.Config {
		st := tlstest.Store(t, pki.Issue(t, tlsutil.Named(tlsutil.RoleHost, "x")))
		c := st.ClientConfig("127.0.0.1", nil)
		c.GetClientCertificate = nil
		return c
	}
	withCert := func(f tlsutil.Files) *tls.Config {
		c := rootsOnly()
		pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		c.Certificates = []tls.Certificate{pair}
		return c
	}
	now := time.Now()
	for _, c := range []struct {
		name  string
		creds credentials.TransportCredentials
		want  string
	}{
		{"plaintext", insecure.NewCredentials(), "first record does not look like a TLS handshake"},
		{"no certificate", credentials.NewTLS(rootsOnly()), "client didn't provide a certificate"},
		{"another CA", credentials.NewTLS(withCert(other.Issue(t, tlsutil.Named(tlsutil.RoleHost, "h-1")))), "certificate signed by unknown authority"},
		{"expired", credentials.NewTLS(withCert(pki.IssueValid(t, tlsutil.Named(tlsutil.RoleHost, "h-1"), now.Add(-48*time.Hour), now.Add(-time.Hour)))), "certificate has expired"},
		{"a worker's certificate", credentials.NewTLS(withCert(pki.Issue(t, tlsutil.Named(tlsutil.RoleWorker, "w")))), "tls: client refused: peer certificate names worker w (strata://worker/w), want a certificate of role host or replica or operator"},
		{"a rogue server: the wrong instance", good.ClientCredentials(tlsutil.IsReplicaOf("region", "us-1")), "want a replica of region us-1"},
		{"a rogue server: a host's certificate", good.ClientCredentials(tlsutil.IsReplicaOf("region", "eu-1")), ""},
	} {
		if c.name == "a rogue server: a host's certificate" {
			continue // below, with its own server
		}
		_, err := call(t, dial(t, srv.addr, c.creds))
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		// In TLS 1.3 a client learns only that the server closed the
		// connection; the server's log says why. A client-side refusal
		// says it in the client's error.
		if !strings.Contains(err.Error(), c.want) {
			// The server logs once its handshake returns, which may be
			// after the client saw the hang-up.
			testutil.Until(t, fmt.Sprintf("%s: the error %q or the server's log says %q", c.name, err, c.want), 10*time.Second, func() bool {
				return strings.Contains(srv.log.String(), c.want)
			})
		}
	}
	// A server that holds a valid certificate for another identity (a host)
	// is refused by a client that expects its region.
	rogue := serve(t, anyClient(tlstest.Store(t, pki.Issue(t, tlsutil.Named(tlsutil.RoleHost, "h-9")))))
	_, err := call(t, dial(t, rogue.addr, good.ClientCredentials(tlsutil.IsReplicaOf("region", "eu-1"))))
	if err == nil || !strings.Contains(err.Error(), "peer certificate names host h-9 (strata://host/h-9), want a replica of region eu-1") {
		t.Errorf("rogue server: %v", err)
	}
	// A server without TLS is refused by a TLS client.
	plain := serve(t, func(func(string, ...any)) credentials.TransportCredentials { return insecure.NewCredentials() })
	if _, err := call(t, dial(t, plain.addr, good.ClientCredentials(nil))); err == nil {
		t.Errorf("a plaintext server was accepted")
	}
}

func TestOpenChecksTheFiles(t *testing.T) {
	pki := tlstest.New(t)
	other := tlstest.New(t)
	f := pki.Issue(t, tlsutil.Named(tlsutil.RoleHost, "h-1"))
	if _, err := tlsutil.Open(tlsutil.Files{CA: f.CA, Cert: f.Cert}, nil, nil); err == nil || !strings.Contains(err.Error(), "tls.key: is required") {
		t.Errorf("no key: %v", err)
	}
	mixed := f
	mixed.CA = tlstest.Files(other.Dir).CA
	if _, err := tlsutil.Open(mixed, nil, nil); err == nil || !strings.Contains(err.Error(), "does not verify against tls.ca") {
		t.Errorf("a certificate of another CA: %v", err)
	}
	now := time.Now()
	expired := pki.IssueValid(t, tlsutil.Named(tlsutil.RoleHost, "h-1"), now.Add(-48*time.Hour), now.Add(-time.Hour))
	if _, err := tlsutil.Open(expired, nil, nil); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired: %v", err)
	}
	if !errors.Is(tlsutil.IsChild("host", "h-1")(tlsutil.Named(tlsutil.RoleHost, "h-2")), tlsutil.ErrIdentity) {
		t.Error("IsChild accepted another host")
	}
	if tlsutil.IsChild("region", "eu-1")(tlsutil.Replica("region", "eu-1", "n3")) != nil {
		t.Error("IsChild refused a replica of the region")
	}
	if tlsutil.IsChild("host", "eu-1")(tlsutil.Replica("region", "eu-1", "n3")) == nil {
		t.Error("IsChild accepted a region certificate for a host")
	}
}
