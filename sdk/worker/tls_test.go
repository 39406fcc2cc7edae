package worker

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/testutil"
	"github.com/strata-sched/strata/internal/tlsutil"
	"github.com/strata-sched/strata/internal/tlsutil/tlstest"
)

// TestTLSAttach: over mutual TLS a worker attaches to the callback service of
// the host it names; it refuses a service whose certificate names another
// host, and the service refuses a worker without a worker certificate.
func TestTLSAttach(t *testing.T) {
	pki := tlstest.New(t)
	serve := func(host string) (string, *testutil.Buffer, *scripted) {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		log := &testutil.Buffer{}
		st := tlstest.Store(t, pki.Issue(t, tlsutil.Named(tlsutil.RoleHost, host)))
		srv := grpc.NewServer(grpc.Creds(st.ServerCredentials(tlsutil.IsRole(tlsutil.RoleWorker), func(f string, a ...any) {
			_, _ = log.Write([]byte(strings.TrimSpace(sprintf(f, a...)) + "\n"))
		})))
		s := &scripted{done: make(chan struct{})}
		wire.RegisterWorkerServer(srv, s)
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(srv.Stop)
		return lis.Addr().String(), log, s
	}
	files := func(id tlsutil.Identity) *TLS {
		f := pki.Issue(t, id)
		return &TLS{CA: f.CA, Cert: f.Cert, Key: f.Key, Host: "h-1"}
	}
	connect := func(addr string, tls *TLS) *Conn {
		c, err := Connect(context.Background(), addr, Funcs{}, Options{WorkerID: "w1", TLS: tls, MinBackoff: time.Hour, MaxBackoff: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	addr, _, s := serve("h-1")
	c := connect(addr, files(tlsutil.Named(tlsutil.RoleWorker, "w1")))
	testutil.Until(t, "the worker attaches over TLS", 10*time.Second, func() bool { _, n := c.Attached(); return n == 1 })
	s.mu.Lock()
	if s.hello.GetWorkerId() != "w1" {
		t.Errorf("hello %v", s.hello)
	}
	s.mu.Unlock()

	other, _, _ := serve("h-2")
	c = connect(other, files(tlsutil.Named(tlsutil.RoleWorker, "w1")))
	testutil.Until(t, "the worker refuses another host's service", 10*time.Second, func() bool {
		err := c.LastError()
		return err != nil && strings.Contains(err.Error(), "peer certificate names host h-2 (strata://host/h-2), want host h-1")
	})

	addr, log, _ := serve("h-1")
	for _, tls := range []*TLS{files(tlsutil.Named(tlsutil.RoleHost, "h-9")), nil} {
		c = connect(addr, tls)
		testutil.Until(t, "the service refuses the worker", 10*time.Second, func() bool { return c.LastError() != nil })
		if _, n := c.Attached(); n != 0 {
			t.Fatalf("attached %d times", n)
		}
	}
	testutil.Until(t, "the service logs both refusals", 10*time.Second, func() bool {
		return strings.Contains(log.String(), "want a certificate of role worker") && strings.Contains(log.String(), "first record does not look like a TLS handshake")
	})
}

func sprintf(f string, a ...any) string { return fmt.Sprintf(f, a...) }
