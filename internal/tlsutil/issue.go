package tlsutil

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// File names in the directories "strata tls" writes.
const (
	CAFile    = "ca.pem"
	CAKeyFile = "ca-key.pem"
	CertFile  = "cert.pem"
	KeyFile   = "key.pem"
)

// CA is a certificate authority that signs Strata certificates.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// NewCA makes a self-signed CA valid from notBefore to notAfter.
func NewCA(name string, notBefore, notAfter time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: name, Organization: []string{"Strata"}},
		NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true, IsCA: true, MaxPathLenZero: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return n
}

// CertRequest describes a certificate to issue.
type CertRequest struct {
	Identity Identity
	// DNS and IPs are the names a server is dialled by (checked by clients).
	DNS []string
	IPs []net.IP
	// NotBefore and NotAfter bound its validity.
	NotBefore, NotAfter time.Time
}

// Issue signs a certificate for req with a fresh key. Every certificate may
// serve and dial (replicas do both).
func (ca *CA) Issue(req CertRequest) (certPEM, keyPEM []byte, err error) {
	if err := req.Identity.Validate(); err != nil {
		return nil, nil, err
	}
	if !req.NotAfter.After(req.NotBefore) {
		return nil, nil, errors.New("validity: not_after must be after not_before")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: req.Identity.Describe(), Organization: []string{"Strata"}},
		NotBefore: req.NotBefore, NotAfter: req.NotAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:        []*url.URL{req.Identity.URI()},
		DNSNames:    req.DNS, IPAddresses: req.IPs,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
}

// CertPEM is the CA's certificate in PEM.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// WriteCA writes ca.pem and ca-key.pem (mode 0600) to dir; it refuses to
// overwrite an existing CA key.
func (ca *CA) WriteCA(dir string) error {
	kder, err := x509.MarshalPKCS8PrivateKey(ca.Key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	keyPath := filepath.Join(dir, CAKeyFile)
	f, err := os.OpenFile(keyPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%s exists: refusing to overwrite a CA key", keyPath)
		}
		return err
	}
	if _, err := f.Write(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, CAFile), ca.CertPEM(), 0o644)
}

// LoadCA reads ca.pem and ca-key.pem from dir.
func LoadCA(dir string) (*CA, error) {
	cert, err := ReadCertPEM(filepath.Join(dir, CAFile))
	if err != nil {
		return nil, fmt.Errorf("--ca: %w", err)
	}
	data, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, fmt.Errorf("--ca: %w", err)
	}
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, fmt.Errorf("--ca: %s: no PEM key", filepath.Join(dir, CAKeyFile))
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("--ca: %s: %w", filepath.Join(dir, CAKeyFile), err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok || !cert.IsCA {
		return nil, fmt.Errorf("--ca: %s is not a CA", dir)
	}
	return &CA{Cert: cert, Key: signer}, nil
}

// WritePair writes cert.pem, key.pem (0600) and a copy of the CA's ca.pem to
// dir, each through a temporary file and a rename, so a daemon reloading them
// never reads half a file.
func (ca *CA) WritePair(dir string, certPEM, keyPEM []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{{KeyFile, keyPEM, 0o600}, {CertFile, certPEM, 0o644}, {CAFile, ca.CertPEM(), 0o644}} {
		if err := writeAtomic(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return err
		}
	}
	return nil
}

func writeAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}
