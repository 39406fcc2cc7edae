package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
	"github.com/strata-sched/strata/internal/tlsutil"
)

// TestRefusalsOnRealProcesses: a cluster of processes with mutual TLS on
// every connection refuses what issue 22's attacker did: a session in
// plaintext, without a certificate, with another CA's, an expired one, a
// host certificate claiming another host's ID, a region certificate used as
// a host; and a client command without a certificate. Each is refused with a
// clear error, and the placement is unchanged.
func TestRefusalsOnRealProcesses(t *testing.T) {
	spec := Spec{Replicas: 1, Regions: 1, HostsPerRegion: 2, HostCPU: 16,
		Timing: Timing{Interval: 300 * time.Millisecond, LeaseTTL: 2 * time.Second, Grace: 100 * time.Millisecond, ReportInterval: 500 * time.Millisecond}}
	c := startCluster(t, workDir(t), spec)
	ctx := context.Background()
	a := admin(t, c.Global[0])
	const n = 20
	eventually(t, "job submitted", 20*time.Second, func() error {
		_, err := a.SubmitJob(ctx, &wire.SubmitJobRequest{Job: &wire.JobSpec{Id: "tls", Parallelism: n,
			ShardTemplate: &wire.Shard{Load: &wire.Load{Cpu: 0.5, Tasks: 1}}}})
		if err != nil && isConflict(err) {
			return nil
		}
		return err
	})
	eventually(t, "all shards owned", 60*time.Second, func() error { return allPlaced(ctx, c, n) })
	before, err := placement(ctx, c)
	if err != nil {
		t.Fatal(err)
	}

	region := c.Regions["region-1"][0]
	files := tlsutil.FilesIn
	creds := func(cert *tlsutil.Files) credentials.TransportCredentials {
		ca, err := tlsutil.ReadCertPEM(files(c.OperatorTLS).CA)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509Pool(ca)
		cfg := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool, ServerName: "127.0.0.1"}
		if cert != nil {
			pair, err := tls.LoadX509KeyPair(cert.Cert, cert.Key)
			if err != nil {
				t.Fatal(err)
			}
			// Sent whatever CAs the server asks for (Go's default
			// sends none when no certificate matches them).
			cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
		}
		return credentials.NewTLS(cfg)
	}
	host2 := files(filepath.Join(c.Hosts["region-1-host-2"].DataDir, "tls"))
	regionCert := files(filepath.Join(region.DataDir, "tls"))
	now := time.Now()
	other, err := tlsutil.NewCA("another CA", now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	issue := func(ca *tlsutil.CA, id tlsutil.Identity, notBefore, notAfter time.Time) *tlsutil.Files {
		certPEM, keyPEM, err := ca.Issue(tlsutil.CertRequest{Identity: id, NotBefore: notBefore, NotAfter: notAfter})
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := ca.WritePair(dir, certPEM, keyPEM); err != nil {
			t.Fatal(err)
		}
		f := files(dir)
		return &f
	}
	h1 := tlsutil.Named(tlsutil.RoleHost, "region-1-host-1")
	for _, tt := range []struct {
		name  string
		creds credentials.TransportCredentials
		claim string
		want  string // in the error, or in the region's log
	}{
		{"plaintext", insecure.NewCredentials(), "region-1-host-1", "first record does not look like a TLS handshake"},
		{"no certificate", creds(nil), "region-1-host-1", "client didn't provide a certificate"},
		{"another CA", creds(issue(other, h1, now.Add(-time.Hour), now.Add(time.Hour))), "region-1-host-1", "certificate signed by unknown authority"},
		{"expired", creds(issue(c.ca, h1, now.Add(-48*time.Hour), now.Add(-time.Hour))), "region-1-host-1", "certificate has expired"},
		{"a host claiming another host's ID", creds(&host2), "region-1-host-1",
			"hello: refused: the Hello claims host region-1-host-1, but peer certificate names host region-1-host-2"},
		{"a region certificate used as a host", creds(&regionCert), "region-1-host-1",
			"hello: refused: the Hello claims host region-1-host-1, but peer certificate names region region-1 replica region-1-1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := hello(region.GRPC, tt.creds, tt.claim)
			if err == nil {
				t.Fatal("accepted")
			}
			if strings.HasPrefix(tt.want, "hello:") && status.Code(err) != codes.PermissionDenied {
				t.Fatalf("code %v (%v), want PermissionDenied", status.Code(err), err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				eventually(t, fmt.Sprintf("the error %q or the region's log says %q", err, tt.want), 10*time.Second, func() error {
					log, _ := os.ReadFile(region.Log)
					if !strings.Contains(string(log), tt.want) {
						return fmt.Errorf("not in %s", region.Log)
					}
					return nil
				})
			}
		})
	}
	// A client command without a certificate gets nothing.
	out, err := exec.Command(strataBin, "status", "--addr", c.Global[0].GRPC).CombinedOutput()
	if err == nil {
		t.Errorf("strata status without --tls succeeded:\n%s", out)
	}
	// Nothing changed.
	after, err := placement(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(before, after) {
		t.Errorf("placement changed:\nbefore %v\nafter  %v", before, after)
	}
	if err := allPlaced(ctx, c, n); err != nil {
		t.Error(err)
	}
}

// hello opens a session claiming host id and returns the first answer's error.
func hello(addr string, creds credentials.TransportCredentials, id string) error {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := wire.NewSessionClient(cc).Connect(ctx)
	if err != nil {
		return err
	}
	if err := s.Send(&wire.ChildMessage{Msg: &wire.ChildMessage_Hello{Hello: &wire.Hello{ChildId: id, Tier: interfaces.TierHost,
		Capacity: &wire.Load{Cpu: 1e9, Tasks: 1e6}}}}); err != nil {
		return err
	}
	_, err = s.Recv()
	return err
}

func x509Pool(ca *x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca)
	return p
}
