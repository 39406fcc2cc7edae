package tlstest

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/internal/tlsutil"
)

// PKI is a CA in a directory.
type PKI struct {
	CA  *tlsutil.CA
	Dir string
}

// New makes a CA valid for a day around now.
func New(t testing.TB) *PKI {
	t.Helper()
	now := time.Now()
	ca, err := tlsutil.NewCA("strata test CA", now.Add(-time.Hour), now.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := ca.WriteCA(dir); err != nil {
		t.Fatal(err)
	}
	return &PKI{CA: ca, Dir: dir}
}

// Issue writes a certificate for id, valid for 127.0.0.1 and localhost for a
// day around now, to a new directory and returns its files.
func (p *PKI) Issue(t testing.TB, id tlsutil.Identity) tlsutil.Files {
	t.Helper()
	now := time.Now()
	return p.IssueValid(t, id, now.Add(-time.Hour), now.Add(24*time.Hour))
}

// IssueValid is Issue with the validity given (an expired certificate:
// notAfter in the past).
func (p *PKI) IssueValid(t testing.TB, id tlsutil.Identity, notBefore, notAfter time.Time) tlsutil.Files {
	t.Helper()
	dir := filepath.Join(t.TempDir(), strings.NewReplacer("/", "_", ":", "_").Replace(id.String()))
	p.IssueTo(t, dir, id, notBefore, notAfter)
	return Files(dir)
}

// IssueTo writes a certificate for id into dir (replacing what is there).
func (p *PKI) IssueTo(t testing.TB, dir string, id tlsutil.Identity, notBefore, notAfter time.Time) {
	t.Helper()
	c, k, err := p.CA.Issue(tlsutil.CertRequest{Identity: id, DNS: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: notBefore, NotAfter: notAfter})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CA.WritePair(dir, c, k); err != nil {
		t.Fatal(err)
	}
}

// Files are the files "strata tls cert" writes to dir.
func Files(dir string) tlsutil.Files {
	return tlsutil.FilesIn(dir)
}

// Store opens files, failing the test on error.
func Store(t testing.TB, f tlsutil.Files) *tlsutil.Store {
	t.Helper()
	s, err := tlsutil.Open(f, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
