package tlsutil

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// ServerConfig is the tls.Config of a server: it presents the current
// certificate (GetConfigForClient reads the store on every handshake, so a
// rotated certificate or CA is used at once), requires a client certificate
// signed by the current CA, and refuses the handshake when check (nil: any
// identity) refuses the identity the client certificate names.
func (s *Store) ServerConfig(check Check) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := s.current()
			return &tls.Config{
				MinVersion:       tls.VersionTLS13,
				Certificates:     []tls.Certificate{*m.cert},
				ClientCAs:        m.pool,
				ClientAuth:       tls.RequireAndVerifyClientCert,
				VerifyConnection: verifyPeer(check, "client"),
			}, nil
		},
	}
}

// ClientConfig is the tls.Config of a client dialling serverName (a DNS name
// or an IP the server's certificate must list; "" skips the name check, for
// the Raft transport, whose peers are checked by identity alone). It presents
// the current certificate (GetClientCertificate), verifies the server's
// against the current CA and refuses the handshake when check (nil: any
// identity) refuses the identity the server's certificate names.
func (s *Store) ClientConfig(serverName string, check Check) *tls.Config {
	m := s.current()
	c := &tls.Config{
		MinVersion: tls.VersionTLS13,
		RootCAs:    m.pool,
		ServerName: serverName,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return s.current().cert, nil
		},
		VerifyConnection: verifyPeer(check, "server"),
	}
	if serverName == "" {
		// No name to check: the chain is verified here instead, against the
		// same CA, and the identity by check.
		c.InsecureSkipVerify = true
		c.VerifyConnection = func(cs tls.ConnectionState) error {
			if err := verifyChain(cs.PeerCertificates, m.pool); err != nil {
				return err
			}
			return verifyPeer(check, "server")(cs)
		}
	}
	return c
}

func verifyChain(certs []*x509.Certificate, roots *x509.CertPool) error {
	if len(certs) == 0 {
		return errors.New("tls: the server presented no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err != nil {
		return fmt.Errorf("tls: server certificate: %w", err)
	}
	return nil
}

// verifyPeer checks the identity of a peer whose chain is verified.
func verifyPeer(check Check, side string) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return fmt.Errorf("tls: the %s presented no certificate: %w", side, ErrIdentity)
		}
		id, err := FromCert(cs.PeerCertificates[0])
		if err != nil {
			return fmt.Errorf("tls: %s: %w", side, err)
		}
		if check != nil {
			if err := check(id); err != nil {
				return fmt.Errorf("tls: %s refused: %w", side, err)
			}
		}
		return nil
	}
}

// ServerCredentials are the gRPC credentials of a server (ServerConfig).
// logf (nil: none) receives every refused handshake with its reason: in TLS
// 1.3 the client learns only that the server closed the connection.
func (s *Store) ServerCredentials(check Check, logf func(string, ...any)) credentials.TransportCredentials {
	return &serverCreds{TransportCredentials: credentials.NewTLS(s.ServerConfig(check)), logf: logf}
}

type serverCreds struct {
	credentials.TransportCredentials
	logf func(string, ...any)
}

func (c *serverCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil && c.logf != nil {
		c.logf("tls: refused a connection from %s: %v", raw.RemoteAddr(), err)
	}
	return conn, info, err
}

func (c *serverCreds) Clone() credentials.TransportCredentials {
	return &serverCreds{TransportCredentials: c.TransportCredentials.Clone(), logf: c.logf}
}

// ClientCredentials are the gRPC credentials of a client (ClientConfig): the
// server's certificate must name the host of the address dialled (DNS or IP
// SAN) and an identity check accepts.
func (s *Store) ClientCredentials(check Check) credentials.TransportCredentials {
	return &clientCreds{store: s, check: check}
}

// clientCreds builds a fresh tls.Config for every handshake, so that a
// rotated CA is trusted without a restart.
type clientCreds struct {
	store      *Store
	check      Check
	serverName string // overrides the authority's host when set
}

func (c *clientCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	name := c.serverName
	if name == "" {
		name = authority
		if h, _, err := net.SplitHostPort(authority); err == nil {
			name = h
		}
	}
	return credentials.NewTLS(c.store.ClientConfig(name, c.check)).ClientHandshake(ctx, authority, raw)
}

func (c *clientCreds) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("tlsutil: client credentials used by a server")
}

func (c *clientCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls"}
}

func (c *clientCreds) Clone() credentials.TransportCredentials {
	cp := *c
	return &cp
}

func (c *clientCreds) OverrideServerName(name string) error { //nolint:staticcheck // part of the interface
	c.serverName = name
	return nil
}

// PeerIdentity is the identity of the client of a gRPC call, from its
// certificate; ok is false when the connection is not TLS (tls: disabled).
func PeerIdentity(ctx context.Context) (id Identity, ok bool, err error) {
	p, found := peer.FromContext(ctx)
	if !found || p.AuthInfo == nil {
		return Identity{}, false, nil
	}
	info, isTLS := p.AuthInfo.(credentials.TLSInfo)
	if !isTLS {
		return Identity{}, false, nil
	}
	if len(info.State.PeerCertificates) == 0 {
		return Identity{}, true, fmt.Errorf("the client presented no certificate: %w", ErrIdentity)
	}
	id, err = FromCert(info.State.PeerCertificates[0])
	return id, true, err
}

// HandshakeTimeout bounds a Raft connection's TLS handshake.
const HandshakeTimeout = 10 * time.Second

// RaftWrapper returns a raftnode.ConnWrapper that runs every Raft connection
// over mutual TLS and accepts only peers that check accepts (for a group: the
// same tier instance). logf receives every refused inbound connection.
func (s *Store) RaftWrapper(check Check, logf func(string, ...any)) func(net.Conn, bool) (net.Conn, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return func(c net.Conn, dialled bool) (net.Conn, error) {
		var tc *tls.Conn
		if dialled {
			tc = tls.Client(c, s.ClientConfig("", check))
		} else {
			tc = tls.Server(c, s.ServerConfig(check))
		}
		_ = tc.SetDeadline(time.Now().Add(HandshakeTimeout))
		if err := tc.Handshake(); err != nil {
			if !dialled {
				logf("raft: refused a connection from %s: %v", c.RemoteAddr(), err)
			}
			return nil, fmt.Errorf("raft tls handshake with %s: %w", c.RemoteAddr(), err)
		}
		_ = tc.SetDeadline(time.Time{})
		return tc, nil
	}
}
