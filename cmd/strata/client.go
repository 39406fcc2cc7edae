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

// tierNode is one tier instance of the tree, as its own Admin API describes it.
type tierNode struct {
	Tier          string       `json:"tier"`
	Instance      string       `json:"instance"`
	Address       string       `json:"address"`
	LeaderID      string       `json:"leader_id,omitempty"`
	LeaderAddress string       `json:"leader_address,omitempty"`
	Term          uint64       `json:"term"`
	StateIndex    uint64       `json:"state_index"`
	Policy        string       `json:"policy,omitempty"`
	Alerts        []string     `json:"alerts,omitempty"`
	Findings      []string     `json:"findings,omitempty"`
	Children      []*childNode `json:"children"`
}

// childNode is a child of a tier instance as that instance's leader sees it.
// Instance is the child's own tier instance when the child is one (it has an
// Admin address); Error says why that instance could not be asked.
type childNode struct {
	ID        string            `json:"id"`
	Tier      string            `json:"tier"`
	State     string            `json:"state"`
	Connected bool              `json:"connected"`
	Shards    int64             `json:"shards"`
	Labels    map[string]string `json:"labels,omitempty"`
	// UtilizationPct is used/capacity per resource, in percent.
	UtilizationPct        map[string]float64 `json:"utilization_pct"`
	Used                  map[string]float64 `json:"used"`
	LeaseRemainingSeconds float64            `json:"lease_remaining_seconds"`
	Address               string             `json:"address,omitempty"`
	Instance              *tierNode          `json:"instance,omitempty"`
	Error                 string             `json:"error,omitempty"`
	// notFollowed: the address was not asked (a cycle, or too deep), as
	// opposed to asked and unreachable.
	notFollowed bool
}

// maxTreeDepth bounds the walk so that a misconfigured cycle cannot loop.
const maxTreeDepth = 16

// walkTree asks the Admin API at addr for its status and, recursively, every
// child tier instance through ChildStatus.address. An unreachable child
// instance is recorded in its childNode.Error; only a failure at addr itself is
// returned.
func walkTree(ctx context.Context, conns *adminConns, addr string) ([]*tierNode, error) {
	return walkFrom(ctx, conns, addr, 0, map[string]bool{})
}

func walkFrom(ctx context.Context, conns *adminConns, addr string, depth int, seen map[string]bool) ([]*tierNode, error) {
	seen[addr] = true
	c, err := conns.client(addr)
	if err != nil {
		return nil, err
	}
	resp, err := c.Status(ctx, &wire.StatusRequest{})
	if err != nil {
		return nil, remoteCallErr(addr, err)
	}
	var out []*tierNode
	for _, ts := range resp.GetTiers() {
		for _, is := range ts.GetInstances() {
			n := &tierNode{
				Tier: ts.GetTier(), Instance: is.GetInstance(), Address: addr,
				LeaderID: is.GetLeaderId(), LeaderAddress: is.GetLeaderAddress(),
				Term: is.GetTerm(), StateIndex: is.GetStateIndex(), Policy: is.GetPolicy(), Alerts: is.GetAlerts(), Findings: is.GetFindings(),
				Children: []*childNode{},
			}
			for _, cs := range is.GetChildren() {
				ch := childFromStatus(cs)
				switch {
				case ch.Address == "":
				case seen[ch.Address]:
					ch.Error, ch.notFollowed = fmt.Sprintf("address %s already visited (a cycle in the tree?)", ch.Address), true
				case depth+1 >= maxTreeDepth:
					ch.Error, ch.notFollowed = fmt.Sprintf("tree deeper than %d levels; not followed", maxTreeDepth), true
				default:
					sub, err := walkFrom(ctx, conns, ch.Address, depth+1, seen)
					if err != nil {
						ch.Error = err.Error()
					} else if len(sub) > 0 {
						ch.Instance = sub[0]
					}
				}
				n.Children = append(n.Children, ch)
			}
			sort.Slice(n.Children, func(i, k int) bool { return naturalLess(n.Children[i].ID, n.Children[k].ID) })
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, &exitError{code: 1, err: fmt.Errorf("the Admin API at %s returned no tier instance in its status", addr)}
	}
	return out, nil
}

func childFromStatus(cs *wire.ChildStatus) *childNode {
	ch := &childNode{
		ID: cs.GetChild().GetId(), Tier: cs.GetChild().GetTier(),
		State:     childStateName(cs.GetChild().GetState()),
		Connected: cs.GetConnected(), Shards: cs.GetShards(), Labels: cs.GetChild().GetLabels(),
		UtilizationPct: map[string]float64{}, Used: map[string]float64{},
		LeaseRemainingSeconds: time.Duration(cs.GetLeaseRemainingNanos()).Round(time.Millisecond).Seconds(),
		Address:               cs.GetAddress(),
	}
	for r, u := range cs.GetUtilization() {
		if !math.IsNaN(u) && !math.IsInf(u, 0) { // JSON cannot carry them
			ch.UtilizationPct[r] = math.Round(u*1000) / 10
		}
	}
	used := cs.GetUsed()
	for _, r := range interfaces.BuiltinResources {
		if v := wireLoadGet(used, r); v != 0 {
			ch.Used[r] = v
		}
	}
	for k, v := range used.GetExtra() {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			ch.Used[k] = v
		}
	}
	return ch
}

func wireLoadGet(l *wire.Load, r string) float64 {
	switch r {
	case interfaces.CPU:
		return l.GetCpu()
	case interfaces.Mem:
		return l.GetMem()
	case interfaces.Net:
		return l.GetNet()
	case interfaces.Tasks:
		return l.GetTasks()
	}
	return l.GetExtra()[r]
}

func childStateName(s wire.ChildState) string {
	if st, err := wire.ChildStateFromWire("state", s); err == nil {
		return st.String()
	}
	return fmt.Sprintf("unknown(%d)", int32(s))
}

// eachInstance calls fn on every tier instance of the tree, top down, with the
// child through which it was reached (nil for the roots).
func eachInstance(roots []*tierNode, fn func(n *tierNode, via *childNode)) {
	var visit func(n *tierNode, via *childNode)
	visit = func(n *tierNode, via *childNode) {
		fn(n, via)
		for _, ch := range n.Children {
			if ch.Instance != nil {
				visit(ch.Instance, ch)
			}
		}
	}
	for _, r := range roots {
		visit(r, nil)
	}
}

// unreachable lists the child instances of the tree that could not be asked.
func unreachable(roots []*tierNode) []string {
	var out []string
	eachInstance(roots, func(n *tierNode, _ *childNode) {
		for _, ch := range n.Children {
			if ch.Error != "" {
				out = append(out, fmt.Sprintf("%s (child of %s/%s): %s", ch.ID, n.Tier, n.Instance, ch.Error))
			}
		}
	})
	return out
}

// findChild returns the child named id of n, or nil.
func (n *tierNode) findChild(id string) *childNode {
	for _, ch := range n.Children {
		if ch.ID == id {
			return ch
		}
	}
	return nil
}

// naturalLess orders strings with embedded numbers by value: "s/2" < "s/10".
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		ca, cb := chunk(a), chunk(b)
		a, b = a[len(ca):], b[len(cb):]
		if ca == cb {
			continue
		}
		na, ea := strconv.ParseUint(ca, 10, 64)
		nb, eb := strconv.ParseUint(cb, 10, 64)
		if ea == nil && eb == nil && na != nb {
			return na < nb
		}
		return ca < cb
	}
	return len(a) < len(b)
}

// chunk returns the leading run of digits, or of non-digits, of s.
func chunk(s string) string {
	digit := s[0] >= '0' && s[0] <= '9'
	i := 1
	for i < len(s) && (s[i] >= '0' && s[i] <= '9') == digit {
		i++
	}
	return s[:i]
}

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
