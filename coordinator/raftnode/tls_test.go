package raftnode_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/coordinator/raftnode"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/internal/testutil"
)

// tlsWrapper returns a ConnWrapper that runs every Raft connection over TLS with a
// throw-away certificate for 127.0.0.1, and a counter of completed handshakes.
func tlsWrapper(t *testing.T) (raftnode.ConnWrapper, *atomic.Int64) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "strata-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	pair := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	var handshakes atomic.Int64
	wrap := func(c net.Conn, dialled bool) (net.Conn, error) {
		var tc *tls.Conn
		if dialled {
			tc = tls.Client(c, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13})
		} else {
			tc = tls.Server(c, &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13})
		}
		_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
		if err := tc.Handshake(); err != nil {
			return nil, fmt.Errorf("tls handshake: %w", err)
		}
		_ = tc.SetDeadline(time.Time{})
		handshakes.Add(1)
		return tc, nil
	}
	return wrap, &handshakes
}

func TestGroupReplicatesOverTLSWrappedStreamLayer(t *testing.T) {
	wrap, handshakes := tlsWrapper(t)
	var tiers []*raftnode.Tier
	for i := range 2 {
		tr, err := raftnode.StartTier(raftnode.Config{ID: fmt.Sprintf("t%d", i), Dir: t.TempDir(),
			RaftBind: "127.0.0.1:0", AdminBind: "127.0.0.1:0", Wrap: wrap, RawWrites: true}, fsm.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tr.Shutdown() })
		tiers = append(tiers, tr)
	}
	if err := tiers[0].Bootstrap(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := tiers[0].WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tiers[1].Join(ctx, tiers[0].AdminAddr()); err != nil {
		t.Fatal(err)
	}
	l := leaderOf(t, tiers)
	mustOK(t, l, &fsm.PutChild{Child: interfaces.Child{ID: "c0", Tier: "host", Capacity: interfaces.Load{CPU: 1}}})
	testutil.Eventually(t, "child c0 written over TLS on every replica", 10*time.Second, func() error {
		for _, tr := range tiers {
			if _, ok := tr.FSM.Child("c0"); !ok {
				return fmt.Errorf("%s lacks child c0", tr.ID())
			}
		}
		return nil
	})
	if handshakes.Load() < 2 {
		t.Fatalf("%d TLS handshakes, want at least one per side", handshakes.Load())
	}
}
