package main

import (
	"fmt"
	"os"

	"google.golang.org/grpc/credentials"

	"github.com/spf13/pflag"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/internal/tlsutil"
)

// tlsFlag registers --tls DIR (env STRATA_TLS): the directory 'strata tls
// cert --role operator' wrote (ca.pem, cert.pem, key.pem). Without it the
// client commands speak plaintext, as 'strata dev' does.
func tlsFlag(fs *pflag.FlagSet, dir *string) {
	fs.StringVar(dir, "tls", os.Getenv("STRATA_TLS"), "directory with ca.pem, cert.pem and key.pem (from 'strata tls cert --role operator'): mutual TLS to the Admin API (env STRATA_TLS; default: plaintext, for strata dev)")
}

// clientCredentials loads a --tls directory: the servers must be tier
// replicas of the CA, and their certificates must name the address dialled.
// nil (plaintext) for "".
func clientCredentials(dir string) (credentials.TransportCredentials, error) {
	if dir == "" {
		return nil, nil
	}
	st, err := tlsutil.Open(tlsutil.FilesIn(dir), nil, nil)
	if err != nil {
		return nil, fmt.Errorf("--tls %s: %v: %w", dir, err, interfaces.ErrInvalid)
	}
	return st.ClientCredentials(tlsutil.IsAnyReplica), nil
}
