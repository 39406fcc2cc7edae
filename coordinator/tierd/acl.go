package tierd

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/strata-sched/strata/coordinator/acl"
	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

// Authorization of the Admin API (docs/security.md, "Authorization (ACL
// tokens)"). With ACL.Enabled every Admin call carries a token in its gRPC
// metadata ("authorization: Bearer <secret>"); the unary interceptor finds
// the policy the call needs in acl.Methods and the caller's policy by the hash
// of its secret: the configured bootstrap token, or a token in the replicated
// state (fsm.PutToken). Sessions between tiers are not token calls.

// ACLConfig configures the Admin API's authorization. The zero value turns it
// off (every call is allowed, as before tokens existed); the daemons' configs
// turn it on with acl.enabled.
type ACLConfig struct {
	Enabled bool
	// BootstrapTokenFile holds the bootstrap token's secret: an admin token
	// every replica accepts without it being in the state. When the file
	// exists at start its secret is used (give the same file to every replica
	// and every tier instance, and one token works across the tree); when it
	// does not, the leader that finds no token in the state makes one, writes
	// its secret there (mode 0600) and stores its hash as token "bootstrap".
	// Default: <data_dir>/acl-bootstrap-token.
	BootstrapTokenFile string
	// AnonymousHTTP lists the HTTP endpoints (healthz, readyz, metrics) that
	// answer without a token; the others need a read token in an
	// "Authorization: Bearer" header. Empty: every endpoint needs one.
	AnonymousHTTP []string
}

// HTTPEndpoints are the names AnonymousHTTP may list.
var HTTPEndpoints = []string{"healthz", "readyz", "metrics"}

// BootstrapTokenID is the ID of the bootstrap token a leader makes.
const BootstrapTokenID = "bootstrap"

func (c ACLConfig) defaults(dataDir string) ACLConfig {
	if c.Enabled && c.BootstrapTokenFile == "" {
		c.BootstrapTokenFile = filepath.Join(dataDir, "acl-bootstrap-token")
	}
	return c
}

func (c ACLConfig) validate() error {
	for i, e := range c.AnonymousHTTP {
		ok := false
		for _, n := range HTTPEndpoints {
			ok = ok || e == n
		}
		if !ok {
			return fmt.Errorf("acl.anonymous_http[%d]: must be one of %s (got %q): %w", i, strings.Join(HTTPEndpoints, ", "), e, interfaces.ErrInvalid)
		}
	}
	return nil
}

// aclState is what the replica knows of its bootstrap token.
type aclState struct {
	// bootstrap is the hash of the bootstrap secret the operator gave in the
	// file; zero when there was none (then a leader may make one).
	bootstrap acl.Hash
	// made is the hash of the secret in a file a leader made (it says so in
	// its first line): that token lives in the state, where it can be
	// revoked, so the file alone does not make it valid.
	made acl.Hash
	// warned is set once the loop has said it will not make a token
	// (ensureBootstrapToken); the loop's goroutine only.
	warned bool
}

// madeMarker starts a bootstrap token file a leader wrote.
const madeMarker = "# strata: made by the group's first leader; stored in the state as token \"bootstrap\" (revocable)"

// loadBootstrapToken reads the bootstrap token file, if there is one.
func (d *Daemon) loadBootstrapToken() error {
	if !d.cfg.ACL.Enabled {
		return nil
	}
	b, err := os.ReadFile(d.cfg.ACL.BootstrapTokenFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("acl.bootstrap_token_file: %w", err)
	}
	made, secret := false, ""
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == madeMarker:
			made = true
		case line == "" || strings.HasPrefix(line, "#"):
		case secret == "":
			secret = line
		default:
			return fmt.Errorf("acl.bootstrap_token_file %s: must hold one secret (and # comments), found a second line: %w", d.cfg.ACL.BootstrapTokenFile, interfaces.ErrInvalid)
		}
	}
	if err := acl.CheckSecret("acl.bootstrap_token_file "+d.cfg.ACL.BootstrapTokenFile, secret); err != nil {
		return err
	}
	if made {
		d.acl.made = acl.HashSecret(secret)
	} else {
		d.acl.bootstrap = acl.HashSecret(secret)
	}
	return nil
}

// ensureBootstrapToken runs on the leader each round: when ACLs are on, no
// bootstrap file was given and the state holds no token, it makes the
// bootstrap token, writes its secret to the file first (so a commit never
// holds a hash whose secret nobody has) and commits its hash. It happens once
// per group: afterwards the state holds a token. A file a leader made
// earlier is never read as a valid token by itself: when the state holds no
// token while such a file exists (every token revoked, or the state wiped),
// nothing is made until an operator deletes the file — a revoked token does
// not come back.
func (d *Daemon) ensureBootstrapToken(ctx context.Context) {
	if !d.cfg.ACL.Enabled || d.acl.bootstrap != (acl.Hash{}) || d.acl.warned || len(d.tier.FSM.Tokens()) > 0 {
		return
	}
	if d.acl.made != (acl.Hash{}) {
		d.acl.warned = true
		d.logger.Printf("acl: the state holds no token and %s holds one made earlier (revoked, or the state is new): delete the file and restart this replica to have a new bootstrap token made there", d.cfg.ACL.BootstrapTokenFile)
		return
	}
	secret, err := acl.NewSecret(rand.Reader)
	if err != nil {
		d.logger.Printf("acl: bootstrap token: %v", err)
		return
	}
	path := d.cfg.ACL.BootstrapTokenFile
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		d.logger.Printf("acl: bootstrap token: %v", err)
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		d.logger.Printf("acl: bootstrap token: %v", err)
		return
	}
	_, err = f.WriteString(madeMarker + "\n" + secret + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		_, err = d.commit(ctx, &fsm.PutToken{Token: acl.Token{ID: BootstrapTokenID, Policy: acl.PolicyAdmin,
			Hash: acl.HashSecret(secret), Description: "made by " + d.cfg.NodeID + " at the group's first leadership"}})
	}
	if err != nil {
		_ = os.Remove(path)
		d.logger.Printf("acl: bootstrap token: %v", err)
		return
	}
	d.acl.made = acl.HashSecret(secret)
	d.logger.Printf("acl: made the bootstrap token (admin); its secret is in %s — keep it safe, it is shown nowhere else", path)
}

// callerPolicy returns the policy of the token ctx carries, or a gRPC status
// saying why there is none.
func (d *Daemon) callerPolicy(ctx context.Context) (acl.Policy, string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get(acl.MetadataKey)
	if len(vals) == 0 {
		return acl.PolicyNone, "", status.Errorf(codes.Unauthenticated,
			"%s/%s requires an ACL token: give --token or STRATA_TOKEN (sent as gRPC metadata %q: Bearer <secret>)", d.cfg.Tier, d.cfg.Instance, acl.MetadataKey)
	}
	secret, ok := acl.ParseBearer(vals[0])
	if !ok {
		return acl.PolicyNone, "", status.Errorf(codes.Unauthenticated, "metadata %s: must be \"Bearer <secret>\"", acl.MetadataKey)
	}
	h := acl.HashSecret(secret)
	if d.acl.bootstrap != (acl.Hash{}) && d.acl.bootstrap.Equal(h) {
		return acl.PolicyAdmin, BootstrapTokenID, nil
	}
	if t, ok := d.tier.FSM.TokenByHash(h); ok {
		return t.Policy, t.ID, nil
	}
	return acl.PolicyNone, "", status.Errorf(codes.Unauthenticated, "%s/%s: unknown or revoked ACL token (tokens are per tier instance; see 'strata acl token list')", d.cfg.Tier, d.cfg.Instance)
}

// authorize checks that ctx's token allows method (a full gRPC method name).
func (d *Daemon) authorize(ctx context.Context, method string) error {
	if !d.cfg.ACL.Enabled || !strings.HasPrefix(method, acl.AdminService) {
		return nil
	}
	need, ok := acl.Methods[method]
	if !ok {
		return status.Errorf(codes.PermissionDenied, "%s: no ACL policy covers this call; refused", method)
	}
	have, id, err := d.callerPolicy(ctx)
	if err != nil {
		return err
	}
	if !have.Allows(need) {
		return status.Errorf(codes.PermissionDenied, "%s needs a token with policy %s; token %q has policy %s",
			strings.TrimPrefix(method, acl.AdminService), need, id, have)
	}
	return nil
}

// unaryAuth is the gRPC server's unary interceptor.
func (d *Daemon) unaryAuth(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := d.authorize(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// streamAuth is the gRPC server's stream interceptor: Admin streams (none
// today) need a token; a session's Hello goes through admission.
func (d *Daemon) streamAuth(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := d.authorize(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	if info.FullMethod == wire.Session_Connect_FullMethodName {
		ss = &admittedStream{ServerStream: ss, d: d}
	}
	return handler(srv, ss)
}

// forwardContext carries the caller's token to the leader when a follower
// forwards an Admin call: the leader checks it again.
func forwardContext(ctx context.Context) context.Context {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(acl.MetadataKey); len(v) > 0 {
		return metadata.AppendToOutgoingContext(ctx, acl.MetadataKey, v[0])
	}
	return ctx
}

// httpAuth guards the HTTP endpoints: those in ACL.AnonymousHTTP answer
// anyone, the others need a read token in an Authorization header.
func (d *Daemon) httpAuth(r *http.Request) (int, error) {
	if !d.cfg.ACL.Enabled {
		return 0, nil
	}
	name := strings.TrimPrefix(r.URL.Path, "/")
	for _, e := range d.cfg.ACL.AnonymousHTTP {
		if e == name {
			return 0, nil
		}
	}
	md := metadata.Pairs(acl.MetadataKey, r.Header.Get("Authorization"))
	if r.Header.Get("Authorization") == "" {
		md = metadata.MD{}
	}
	have, _, err := d.callerPolicy(metadata.NewIncomingContext(r.Context(), md))
	if err != nil {
		return http.StatusUnauthorized, fmt.Errorf("%s (or list it in acl.anonymous_http)", status.Convert(err).Message())
	}
	if !have.Allows(acl.PolicyRead) {
		return http.StatusForbidden, errors.New("needs a read token")
	}
	return 0, nil
}

// CreateToken makes an ACL token of this tier instance.
func (d *Daemon) CreateToken(ctx context.Context, req *wire.CreateTokenRequest) (*wire.CreateTokenResponse, error) {
	if err := interfaces.ValidateName("id", req.GetId()); err != nil {
		return nil, wire.ToStatus(err)
	}
	if req.GetId() == BootstrapTokenID {
		return nil, wire.ToStatus(fmt.Errorf("id: %q is the bootstrap token's: %w", BootstrapTokenID, interfaces.ErrInvalid))
	}
	pol, err := acl.ParsePolicy("policy", req.GetPolicy())
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	secret := req.GetSecret()
	if secret == "" {
		if secret, err = acl.NewSecret(rand.Reader); err != nil {
			return nil, wire.ToStatus(err)
		}
		req = &wire.CreateTokenRequest{Id: req.GetId(), Policy: req.GetPolicy(), Description: req.GetDescription(), Secret: secret}
	} else if err := acl.CheckSecret("secret", secret); err != nil {
		return nil, wire.ToStatus(err)
	}
	tok := acl.Token{ID: req.GetId(), Policy: pol, Hash: acl.HashSecret(secret), Description: req.GetDescription()}
	if err := tok.Validate(); err != nil {
		return nil, wire.ToStatus(err)
	}
	if resp, ok, err := forward(ctx, d, func(c wire.AdminClient) (*wire.CreateTokenResponse, error) { return c.CreateToken(ctx, req) }); ok {
		return resp, err
	}
	if d.acl.bootstrap != (acl.Hash{}) && d.acl.bootstrap.Equal(tok.Hash) {
		return nil, wire.ToStatus(fmt.Errorf("secret: is the bootstrap token's: %w", interfaces.ErrConflict))
	}
	res, err := d.commit(ctx, &fsm.PutToken{Token: tok})
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return &wire.CreateTokenResponse{Id: tok.ID, Policy: pol.String(), Secret: secret, StateIndex: res.Index}, nil
}

// ListTokens lists this tier instance's tokens, without their secrets.
func (d *Daemon) ListTokens(ctx context.Context, _ *wire.ListTokensRequest) (*wire.ListTokensResponse, error) {
	resp := &wire.ListTokensResponse{}
	if d.acl.bootstrap != (acl.Hash{}) {
		resp.Tokens = append(resp.Tokens, &wire.TokenInfo{Id: BootstrapTokenID, Policy: acl.PolicyAdmin.String(),
			Description: "from " + d.cfg.ACL.BootstrapTokenFile, HashPrefix: d.acl.bootstrap.String()[:8], Bootstrap: true})
	}
	for _, t := range d.tier.FSM.Tokens() {
		resp.Tokens = append(resp.Tokens, &wire.TokenInfo{Id: t.ID, Policy: t.Policy.String(), Description: t.Description, HashPrefix: t.Hash.String()[:8]})
	}
	return resp, nil
}

// RevokeToken deletes a token of this tier instance.
func (d *Daemon) RevokeToken(ctx context.Context, req *wire.RevokeTokenRequest) (*wire.RevokeTokenResponse, error) {
	if err := interfaces.ValidateName("id", req.GetId()); err != nil {
		return nil, wire.ToStatus(err)
	}
	if resp, ok, err := forward(ctx, d, func(c wire.AdminClient) (*wire.RevokeTokenResponse, error) { return c.RevokeToken(ctx, req) }); ok {
		return resp, err
	}
	res, err := d.commit(ctx, &fsm.DeleteToken{ID: req.GetId()})
	if err != nil {
		if errors.Is(err, interfaces.ErrNotFound) && req.GetId() == BootstrapTokenID && d.acl.bootstrap != (acl.Hash{}) {
			err = fmt.Errorf("token %q comes from acl.bootstrap_token_file (%s), not from the state: replace the file on every replica and restart them: %w",
				BootstrapTokenID, d.cfg.ACL.BootstrapTokenFile, interfaces.ErrNotFound)
		}
		return nil, wire.ToStatus(err)
	}
	return &wire.RevokeTokenResponse{StateIndex: res.Index}, nil
}
