package main

// Shared plumbing of the client commands (job, shards, status, host, explain):
// the --addr/--timeout flags, one gRPC connection per Admin address, error
// mapping, and the walk of the tier tree through ChildStatus.address.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/strata-sched/strata/coordinator/acl"
	"github.com/strata-sched/strata/coordinator/adminview"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

// clientFlags are the flags every client command takes.
type clientFlags struct {
	addr    string
	token   string
	timeout time.Duration
	tlsDir  string         // --tls / STRATA_TLS (client_tls.go)
	cmd     *cobra.Command // to tell --addr from STRATA_ADDR in messages
}

func (f *clientFlags) register(cmd *cobra.Command) { f.registerOn(cmd, cmd.Flags()) }

// registerOn adds the flags to fs: cmd's own flags, or its persistent flags
// for a command whose subcommands all call the Admin API (strata raft).
func (f *clientFlags) registerOn(cmd *cobra.Command, fs *pflag.FlagSet) {
	f.cmd = cmd
	addrFlag(fs, &f.addr)
	tokenFlag(fs, &f.token)
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "deadline for all the Admin API calls of this command")
	tlsFlag(fs, &f.tlsDir)
}

// usageErr is a bad flag, argument or input file: exit code 2.
func usageErr(err error) error { return &exitError{code: 2, err: err} }

// addrSource names where the address came from: "--addr", or "STRATA_ADDR"
// when the flag was not given and the environment set it.
func (f *clientFlags) addrSource() string {
	if !f.addrFlagSet() && os.Getenv("STRATA_ADDR") != "" {
		return "STRATA_ADDR"
	}
	return "--addr"
}

// addrFlagSet reports whether --addr was given on the command line.
func (f *clientFlags) addrFlagSet() bool { return f.cmd != nil && f.cmd.Flags().Changed("addr") }

// addrGiven reports whether the user named an address: --addr or STRATA_ADDR.
func (f *clientFlags) addrGiven() bool { return f.addrFlagSet() || os.Getenv("STRATA_ADDR") != "" }

// check validates the flags: --addr (or STRATA_ADDR) must be host:port,
// --timeout positive.
func (f *clientFlags) check() error {
	if _, _, err := net.SplitHostPort(f.addr); err != nil || f.addr == "" {
		return usageErr(fmt.Errorf("%s %q: must be host:port: %w", f.addrSource(), f.addr, interfaces.ErrInvalid))
	}
	if f.timeout <= 0 {
		return usageErr(fmt.Errorf("--timeout: must be positive (got %v): %w", f.timeout, interfaces.ErrInvalid))
	}
	return nil
}

// adminConns holds one gRPC connection per Admin address for the life of a
// command. Not safe for concurrent use; the commands call sequentially.
type adminConns struct {
	conns map[string]*grpc.ClientConn
	token string                           // sent with every call ("" for none)
	creds credentials.TransportCredentials // nil: plaintext
	err   error                            // loading the TLS files failed
}

func newAdminConns(tlsDir, token string) *adminConns {
	p := &adminConns{conns: map[string]*grpc.ClientConn{}, token: token}
	p.creds, p.err = clientCredentials(tlsDir)
	return p
}

// client returns an Admin client for addr; its error exits with code 1.
func (p *adminConns) client(addr string) (wire.AdminClient, error) {
	if cc, ok := p.conns[addr]; ok {
		return wire.NewAdminClient(cc), nil
	}
	if p.err != nil {
		return nil, usageErr(p.err)
	}
	creds := p.creds
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds), tokenOption(p.token))
	if err != nil {
		return nil, &exitError{code: 1, err: fmt.Errorf("the Admin API at %s: %w", addr, err)}
	}
	p.conns[addr] = cc
	return wire.NewAdminClient(cc), nil
}

func (p *adminConns) close() {
	for _, cc := range p.conns {
		cc.Close()
	}
}

// connect begins a command's Admin API calls: a context with the --timeout
// deadline and the connections the calls share; done releases both.
func (f *clientFlags) connect() (ctx context.Context, conns *adminConns, done func()) {
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	conns = newAdminConns(f.tlsDir, f.token)
	return ctx, conns, func() { conns.close(); cancel() }
}

// admin is connect for a command that calls only --addr. On error nothing is
// left to release.
func (f *clientFlags) admin() (context.Context, wire.AdminClient, func(), error) {
	ctx, conns, done := f.connect()
	c, err := conns.client(f.addr)
	if err != nil {
		done()
		return nil, nil, nil, err
	}
	return ctx, c, done, nil
}

// remoteCallErr turns the error of an Admin call into one that wraps the
// interfaces sentinels (wire.FromStatus), says which address failed when the
// transport did, and exits with code 1.
func remoteCallErr(addr string, err error) error {
	if err == nil {
		return nil
	}
	err = wire.FromStatus(err)
	if st, ok := status.FromError(err); ok && !isSentinel(err) {
		switch st.Code() {
		case codes.Unavailable:
			err = fmt.Errorf("cannot reach the Admin API at %s (is the cluster running? set --addr or STRATA_ADDR): %s", addr, st.Message())
		case codes.DeadlineExceeded:
			err = fmt.Errorf("the Admin API at %s did not answer before the deadline (--timeout): %s", addr, st.Message())
		case codes.Unauthenticated:
			err = fmt.Errorf("the Admin API at %s refused the call: %s", addr, st.Message())
		case codes.PermissionDenied:
			err = fmt.Errorf("the Admin API at %s refused the call: %s (use a token with that policy: --token or STRATA_TOKEN)", addr, st.Message())
		}
	}
	return &exitError{code: 1, err: err}
}

func isSentinel(err error) bool {
	for _, s := range []error{interfaces.ErrInvalid, interfaces.ErrNotFound, interfaces.ErrConflict, interfaces.ErrStaleEpoch, interfaces.ErrNotLeader} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// The tree of tier instances is coordinator/adminview's, which the web
// dashboard reads too.
type (
	tierNode  = adminview.Instance
	childNode = adminview.Child
)

// walkTree asks the Admin API at addr for its status and, recursively, every
// child tier instance (adminview.Walk). Only a failure at addr itself is
// returned.
func walkTree(ctx context.Context, conns *adminConns, addr string) ([]*tierNode, error) {
	return adminview.Walk(ctx, conns.client, addr, func(addr string, err error) error {
		if errors.Is(err, adminview.ErrNoInstance) {
			return &exitError{code: 1, err: fmt.Errorf("the Admin API at %s returned no tier instance in its status", addr)}
		}
		return remoteCallErr(addr, err)
	})
}

var (
	eachInstance   = adminview.EachInstance
	unreachable    = adminview.Unreachable
	naturalLess    = adminview.NaturalLess
	wireLoadGet    = adminview.LoadGet
	childStateName = adminview.ChildStateName
)

// formatQuantity prints a byte count with binary units: 512Mi, 1.5Gi, 800.
func formatQuantity(v float64) string {
	units := []string{"", "Ki", "Mi", "Gi", "Ti", "Pi"}
	i := 0
	for math.Abs(v) >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	s := strconv.FormatFloat(v, 'f', 2, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s + units[i]
}

// formatLoad prints a load vector compactly: "cpu 0.5, mem 512Mi, tasks 1".
func formatLoad(l *wire.Load) string {
	var parts []string
	for _, r := range interfaces.BuiltinResources {
		v := wireLoadGet(l, r)
		if v == 0 {
			continue
		}
		s := strconv.FormatFloat(v, 'g', 4, 64)
		switch r {
		case interfaces.Mem:
			s = formatQuantity(v)
		case interfaces.Net:
			s = formatQuantity(v) + "/s"
		}
		parts = append(parts, r+" "+s)
	}
	keys := make([]string, 0, len(l.GetExtra()))
	for k := range l.GetExtra() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, k+" "+strconv.FormatFloat(l.GetExtra()[k], 'g', 4, 64))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// tokenFlag adds --token, whose default is STRATA_TOKEN: the ACL token sent
// with every Admin call (docs/security.md, "Authorization (ACL tokens)").
func tokenFlag(fs *pflag.FlagSet, token *string) {
	fs.StringVar(token, "token", os.Getenv("STRATA_TOKEN"), "ACL token sent with every Admin API call (env STRATA_TOKEN; not needed by strata dev, which runs without ACLs)")
}

// tokenOption sends token as "authorization: Bearer <token>" metadata with
// every call of the connection (none when token is empty).
func tokenOption(token string) grpc.DialOption {
	token = strings.TrimSpace(token)
	return grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if token != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, acl.MetadataKey, acl.Bearer(token))
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})
}
