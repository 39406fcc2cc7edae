package tlsutil

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Files names the PEM files of one daemon's TLS material: the CA that signs
// every Strata certificate (peers are verified against it), this daemon's
// certificate (chain) and its private key.
type Files struct {
	CA   string `yaml:"ca"`
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// Validate checks that the three files are named, naming the missing key
// under prefix (e.g. "tls").
func (f Files) Validate(prefix string) error {
	for _, k := range []struct{ key, v string }{{"ca", f.CA}, {"cert", f.Cert}, {"key", f.Key}} {
		if k.v == "" {
			return fmt.Errorf("%s.%s: is required (tls needs ca, cert and key; or say \"tls: disabled\")", prefix, k.key)
		}
	}
	return nil
}

// Store holds a daemon's TLS material and reloads it from disk when one of
// the files changes (its modification time or size), checked on every
// handshake: replacing the files rotates the certificate for every new
// connection without a restart, and open connections keep theirs. A reload
// that fails (files half-written, a key that does not match its certificate)
// keeps the material in use and is retried on the next handshake.
type Store struct {
	files Files
	logf  func(string, ...any)
	now   func() time.Time

	mu    sync.Mutex
	stamp [3]stamp
	cur   *material
	// lastErr is the last failed reload's error (logged once per change).
	lastErr string
}

type stamp struct {
	fi os.FileInfo
}

// same reports whether a file is unchanged: same file (a rename over it is a
// new one), modification time and size.
func (a stamp) same(b stamp) bool {
	return a.fi != nil && b.fi != nil && os.SameFile(a.fi, b.fi) && a.fi.ModTime().Equal(b.fi.ModTime()) && a.fi.Size() == b.fi.Size()
}

func sameStamps(a, b [3]stamp) bool { return a[0].same(b[0]) && a[1].same(b[1]) && a[2].same(b[2]) }

// material is one consistent load of the three files.
type material struct {
	cert *tls.Certificate
	leaf *x509.Certificate
	pool *x509.CertPool
	id   Identity
}

// Open loads the files; its errors name the file and the problem. logf
// receives reloads and failed reloads (nil discards them). now is the clock
// the own certificate's validity is checked with at load (nil: time.Now).
func Open(f Files, logf func(string, ...any), now func() time.Time) (*Store, error) {
	if err := f.Validate("tls"); err != nil {
		return nil, err
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if now == nil {
		now = time.Now
	}
	s := &Store{files: f, logf: logf, now: now}
	st, err := s.stamps()
	if err != nil {
		return nil, err
	}
	m, err := load(f, now())
	if err != nil {
		return nil, err
	}
	s.stamp, s.cur = st, m
	return s, nil
}

// Identity is the identity the daemon's current certificate names.
func (s *Store) Identity() Identity { return s.current().id }

// Files are the files the store reads.
func (s *Store) Files() Files { return s.files }

// NotAfter is when the current certificate expires.
func (s *Store) NotAfter() time.Time { return s.current().leaf.NotAfter }

func (s *Store) stamps() ([3]stamp, error) {
	var out [3]stamp
	for i, p := range []string{s.files.CA, s.files.Cert, s.files.Key} {
		fi, err := os.Stat(p)
		if err != nil {
			return out, fmt.Errorf("tls: %w", err)
		}
		out[i] = stamp{fi}
	}
	return out, nil
}

// current returns the material, reloaded first when a file changed.
func (s *Store) current() *material {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.stamps()
	if err != nil || sameStamps(st, s.stamp) {
		if err != nil && err.Error() != s.lastErr {
			s.lastErr = err.Error()
			s.logf("tls: reload: %v (keeping the certificate in use)", err)
		}
		return s.cur
	}
	m, err := load(s.files, s.now())
	if err != nil {
		if err.Error() != s.lastErr {
			s.lastErr = err.Error()
			s.logf("tls: reload: %v (keeping the certificate in use)", err)
		}
		return s.cur
	}
	s.stamp, s.cur, s.lastErr = st, m, ""
	s.logf("tls: reloaded %s (%s, valid until %s)", s.files.Cert, m.id, m.leaf.NotAfter.UTC().Format(time.RFC3339))
	return m
}

// load reads and checks the three files: the CA parses, the key matches the
// certificate, the certificate chains to the CA and is valid at now, and it
// names one Strata identity.
func load(f Files, now time.Time) (*material, error) {
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("tls.ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("tls.ca: %s holds no PEM certificate", f.CA)
	}
	pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("tls.cert, tls.key: %w", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("tls.cert: %w", err)
	}
	pair.Leaf = leaf
	inter := x509.NewCertPool()
	for _, der := range pair.Certificate[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("tls.cert: %w", err)
		}
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("tls.cert: %s does not verify against tls.ca %s: %w", f.Cert, f.CA, err)
	}
	id, err := FromCert(leaf)
	if err != nil {
		return nil, fmt.Errorf("tls.cert: %w", err)
	}
	return &material{cert: &pair, leaf: leaf, pool: pool, id: id}, nil
}

// ReadCertPEM parses the first certificate of a PEM file.
func ReadCertPEM(path string) (*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, errors.New(path + ": no PEM certificate")
	}
	return x509.ParseCertificate(b.Bytes)
}

// FilesIn are the files 'strata tls cert --out dir' writes.
func FilesIn(dir string) Files {
	return Files{CA: filepath.Join(dir, CAFile), Cert: filepath.Join(dir, CertFile), Key: filepath.Join(dir, KeyFile)}
}
