package plugin_test

import (
	"context"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/tlsutil"
	"github.com/strata-sched/strata/internal/tlsutil/tlstest"
	"github.com/strata-sched/strata/tiers"
)

// TestPluginOverTLS: a tier replica redials its plugin with credentials that
// require a plugin certificate (as tierd.Start does with TLS): a plugin
// server holding one plans; a server holding another role's valid
// certificate is refused, and the fallback plans.
func TestPluginOverTLS(t *testing.T) {
	pki := tlstest.New(t)
	serve := func(id tlsutil.Identity) string {
		st := tlstest.Store(t, pki.Issue(t, id))
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer(grpc.Creds(st.ServerCredentials(tlsutil.IsAnyReplica, nil)))
		wire.RegisterTierPolicyServer(srv, wire.NewPolicyServer("tls-greedy", func(cfg interfaces.PolicyConfig) (interfaces.Policy, error) { return tiers.New("greedy", nil) }))
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(srv.Stop)
		return lis.Addr().String()
	}
	replica := tlstest.Store(t, pki.Issue(t, tlsutil.Replica("region", "eu-1", "n1")))
	creds := grpc.WithTransportCredentials(replica.ClientCredentials(tlsutil.IsRole(tlsutil.RolePlugin)))

	p := newPlugin(t, interfaces.PolicyConfig{"address": serve(tlsutil.Named(tlsutil.RolePlugin, "greedy"))})
	if err := p.Redial(creds); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Plan(context.Background(), view()); err != nil {
		t.Fatal(err)
	}
	if st := p.Status(); !st.Healthy || st.Successes != 1 {
		t.Fatalf("over TLS: %+v", st)
	}

	rogue := newPlugin(t, interfaces.PolicyConfig{"address": serve(tlsutil.Named(tlsutil.RoleHost, "h-1"))})
	if err := rogue.Redial(creds); err != nil {
		t.Fatal(err)
	}
	if _, err := rogue.Plan(context.Background(), view()); err != nil {
		t.Fatal(err) // the fallback plans
	}
	if st := rogue.Status(); st.Healthy || !strings.Contains(st.LastError, "peer certificate names host h-1 (strata://host/h-1), want a certificate of role plugin") {
		t.Fatalf("a server with a host certificate: %+v", st)
	}
}
