package main

import (
	"fmt"
	"io"
	"net"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/internal/tlsutil"
)

// tlsFile is a daemon config's tls section: the CA, certificate and key files
// ({ca: FILE, cert: FILE, key: FILE}), or the word disabled. Outside 'strata
// dev' a config without it refuses to start (docs/security.md).
type tlsFile struct {
	set      bool // the key is present
	disabled bool
	files    tlsutil.Files
}

func (t *tlsFile) UnmarshalYAML(n *yaml.Node) error {
	t.set = true
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Value != "disabled" {
			return fmt.Errorf("line %d: must be {ca: FILE, cert: FILE, key: FILE} or the word disabled (got %q)", n.Line, n.Value)
		}
		t.disabled = true
		return nil
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if v.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: tls.%s: must be a file path", v.Line, k.Value)
			}
			switch k.Value {
			case "ca":
				t.files.CA = v.Value
			case "cert":
				t.files.Cert = v.Value
			case "key":
				t.files.Key = v.Value
			default:
				return fmt.Errorf("line %d: tls.%s: unknown key (known here: ca, cert, key)", k.Line, k.Value)
			}
		}
		return t.files.Validate("tls")
	}
	return fmt.Errorf("line %d: must be {ca: FILE, cert: FILE, key: FILE} or the word disabled", n.Line)
}

// errTLSRequired is the refusal of a config without a tls section.
var errTLSRequired = fmt.Errorf(`tls: is required outside 'strata dev': give tls: {ca: FILE, cert: FILE, key: FILE} (make them with 'strata tls ca' and 'strata tls cert'), or say "tls: disabled" to run without TLS (plaintext, unauthenticated: not for production; see docs/security.md): %w`, interfaces.ErrInvalid)

// open loads the TLS material: nil for "tls: disabled", an error when the
// section is missing. Reloads are logged to logOut.
func (t tlsFile) open(logOut io.Writer) (*tlsutil.Store, error) {
	switch {
	case !t.set:
		return nil, errTLSRequired
	case t.disabled:
		return nil, nil
	}
	return tlsutil.Open(t.files, func(format string, args ...any) {
		fmt.Fprintf(logOut, format+"\n", args...)
	}, nil)
}

// checkLoopback refuses a listen address that is not on loopback: what runs
// without TLS (a callback Worker service with "tls: disabled") must not be
// reachable from the network.
func checkLoopback(key, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s: must be host:port (got %q): %w", key, addr, interfaces.ErrInvalid)
	}
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%s: must be a loopback address (127.0.0.1:PORT) without TLS: anyone who reaches it could speak to it unauthenticated (got %q): %w", key, addr, interfaces.ErrInvalid)
}
