package dashboard

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/strata-sched/strata/coordinator/acl"
	"github.com/strata-sched/strata/coordinator/adminview"
	"github.com/strata-sched/strata/interfaces/wire"
)

//go:embed assets
var assets embed.FS

// Path is where the dashboard is mounted on a daemon's HTTP server.
const Path = "/ui/"

// Options configure a dashboard.
type Options struct {
	// Addr is the Admin API the dashboard reads: the top of the subtree it
	// shows (the global tier's in strata dev; a daemon's own otherwise).
	Addr string
	// Creds dial the Admin API (nil: plaintext, for strata dev).
	Creds credentials.TransportCredentials
	// Interval between two views of the hierarchy (default 1s); History how
	// many views the heat map keeps (default 180); Events how many events
	// the feed keeps (default 500).
	Interval time.Duration
	History  int
	Events   int
}

// Server serves the dashboard's page and its JSON API, a gateway of the
// Admin API through coordinator/adminview (what the CLI reads too).
type Server struct {
	opts Options

	connMu sync.Mutex
	conns  map[string]*grpc.ClientConn

	// allowed caches the Authorization values the Admin API accepted
	// lately (authorize), so that a page's polling costs one check in a while.
	allowMu sync.Mutex
	allowed map[string]time.Time

	mu      sync.Mutex
	started bool
	token   string // the last Authorization a page sent, for the recorder
	last    *adminview.Snapshot
	lastErr string
	events  []adminview.Event
	seq     uint64
	heat    []heatSample

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

type heatSample struct {
	At   time.Time
	Util map[string]map[string]float64 // host → resource → utilization (0..1)
}

// New returns a dashboard; its recorder starts with the first API request.
func New(o Options) *Server {
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.History <= 0 {
		o.History = 180
	}
	if o.Events <= 0 {
		o.Events = 500
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{opts: o, conns: map[string]*grpc.ClientConn{}, allowed: map[string]time.Time{}, ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// Close stops the recorder and closes the connections.
func (s *Server) Close() {
	s.cancel()
	s.mu.Lock()
	started := s.started
	s.mu.Unlock()
	if started {
		<-s.done
	}
	s.connMu.Lock()
	for _, cc := range s.conns {
		cc.Close()
	}
	s.conns = map[string]*grpc.ClientConn{}
	s.connMu.Unlock()
}

func (s *Server) dial(addr string) (wire.AdminClient, error) {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	if cc, ok := s.conns[addr]; ok {
		return wire.NewAdminClient(cc), nil
	}
	creds := s.opts.Creds
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, fmt.Errorf("the Admin API at %s: %w", addr, err)
	}
	s.conns[addr] = cc
	return wire.NewAdminClient(cc), nil
}

// withToken is ctx carrying the page's token to the Admin API, which checks it.
func withToken(ctx context.Context, auth string) context.Context {
	if auth == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, acl.MetadataKey, auth)
}

// Handler serves the page under Path and the API under Path+"api/".
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	sub, _ := fs.Sub(assets, "assets")
	mux.Handle(Path, http.StripPrefix(Path, http.FileServer(http.FS(sub))))
	api := func(name string, h func(r *http.Request) (any, error)) {
		mux.HandleFunc(Path+"api/"+name, func(w http.ResponseWriter, r *http.Request) {
			var v any
			err := s.authorize(r)
			if err == nil {
				s.touch(r.Header.Get("Authorization"))
				v, err = h(r)
			}
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store")
			if err != nil {
				w.WriteHeader(httpStatus(err))
				_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
				return
			}
			_ = json.NewEncoder(w).Encode(v)
		})
	}
	api("state", s.apiState)
	api("events", s.apiEvents)
	api("heat", s.apiHeat)
	api("shards", s.apiShards)
	api("explain", s.apiExplain)
	api("drain", s.apiDrain)
	api("plan", s.apiPlan)
	api("apply", s.apiApply)
	return mux
}

// httpStatus maps an Admin API error to an HTTP status.
func httpStatus(err error) int {
	var ue usageError
	if errors.As(err, &ue) {
		return http.StatusBadRequest
	}
	if st, ok := status.FromError(err); ok {
		switch st.Code().String() {
		case "Unauthenticated":
			return http.StatusUnauthorized
		case "PermissionDenied":
			return http.StatusForbidden
		case "InvalidArgument", "FailedPrecondition":
			return http.StatusBadRequest
		case "NotFound":
			return http.StatusNotFound
		case "Aborted", "AlreadyExists":
			return http.StatusConflict
		}
	}
	return http.StatusBadGateway
}

type usageError struct{ error }

func badRequest(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// allowFor is how long an Authorization the Admin API accepted is trusted
// without asking again.
const allowFor = 5 * time.Second

// authorize checks the request's Authorization (the page's token, or none)
// with the Admin API before anything recorded with another page's token is
// shown: a Status call at Addr, which needs a read token when ACLs are on.
// Writes (drain, plan, apply) are checked again by the calls they make.
func (s *Server) authorize(r *http.Request) error {
	auth := r.Header.Get("Authorization")
	s.allowMu.Lock()
	until, ok := s.allowed[auth]
	s.allowMu.Unlock()
	if ok && time.Now().Before(until) {
		return nil
	}
	c, err := s.dial(s.opts.Addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(withToken(r.Context(), auth), 10*time.Second)
	defer cancel()
	if _, err := c.Status(ctx, &wire.StatusRequest{}); err != nil {
		if st, ok := status.FromError(err); ok && (st.Code().String() == "Unauthenticated" || st.Code().String() == "PermissionDenied") {
			return err
		}
		return nil // the cluster's trouble, not the caller's: the recorder reports it
	}
	s.allowMu.Lock()
	if len(s.allowed) > 64 {
		s.allowed = map[string]time.Time{}
	}
	s.allowed[auth] = time.Now().Add(allowFor)
	s.allowMu.Unlock()
	return nil
}

// touch starts the recorder on first use and remembers the page's token.
func (s *Server) touch(auth string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if auth != "" {
		s.token = auth
	}
	if s.started {
		return
	}
	s.started = true
	go func() {
		defer close(s.done)
		adminview.Watch(s.ctx, s.tokenDial, s.opts.Addr, s.opts.Interval, 10*time.Second, time.Now, s.record)
	}()
}

// tokenDial dials for the recorder; the token goes on every call (recordCtx).
func (s *Server) tokenDial(addr string) (wire.AdminClient, error) {
	c, err := s.dial(addr)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	tok := s.token
	s.mu.Unlock()
	return tokenClient{c, tok}, nil
}

// tokenClient adds a token to the calls the recorder makes.
type tokenClient struct {
	wire.AdminClient
	token string
}

func (c tokenClient) Status(ctx context.Context, in *wire.StatusRequest, o ...grpc.CallOption) (*wire.StatusResponse, error) {
	return c.AdminClient.Status(withToken(ctx, c.token), in, o...)
}

func (c tokenClient) ListShards(ctx context.Context, in *wire.ListShardsRequest, o ...grpc.CallOption) (*wire.ListShardsResponse, error) {
	return c.AdminClient.ListShards(withToken(ctx, c.token), in, o...)
}

func (c tokenClient) Explain(ctx context.Context, in *wire.ExplainRequest, o ...grpc.CallOption) (*wire.ExplainResponse, error) {
	return c.AdminClient.Explain(withToken(ctx, c.token), in, o...)
}

func (s *Server) record(snap *adminview.Snapshot, evs []adminview.Event, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastErr = ""
	if err != nil {
		s.lastErr = err.Error()
	}
	if snap == nil {
		return
	}
	s.last = snap
	for _, e := range evs {
		s.seq++
		e.Seq = s.seq
		s.events = append(s.events, e)
	}
	if over := len(s.events) - s.opts.Events; over > 0 {
		s.events = append([]adminview.Event(nil), s.events[over:]...)
	}
	hs := heatSample{At: snap.At, Util: map[string]map[string]float64{}}
	adminview.EachInstance(snap.Roots, func(n *adminview.Instance, _ *adminview.Child) {
		for _, ch := range n.Children {
			if ch.Instance != nil || ch.Address != "" {
				continue // a tier instance, not a host
			}
			u := map[string]float64{}
			for r, pct := range ch.UtilizationPct {
				u[r] = pct / 100
			}
			hs.Util[ch.ID] = u
		}
	})
	s.heat = append(s.heat, hs)
	if over := len(s.heat) - s.opts.History; over > 0 {
		s.heat = append([]heatSample(nil), s.heat[over:]...)
	}
}

// snapshot waits (briefly) for the recorder's first view.
func (s *Server) snapshot(ctx context.Context) (*adminview.Snapshot, string) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		snap, e := s.last, s.lastErr
		s.mu.Unlock()
		if snap != nil || e != "" || time.Now().After(deadline) || ctx.Err() != nil {
			return snap, e
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type alertJSON struct {
	Tier     string `json:"tier"`
	Instance string `json:"instance"`
	Alert    string `json:"alert"`
}

type stateJSON struct {
	Addr        string                `json:"addr"`
	At          time.Time             `json:"at"`
	Tree        []*adminview.Instance `json:"tree"`
	Unreachable []string              `json:"unreachable,omitempty"`
	Alerts      []alertJSON           `json:"alerts"`
	Error       string                `json:"error,omitempty"`
}

func (s *Server) apiState(r *http.Request) (any, error) {
	snap, e := s.snapshot(r.Context())
	out := stateJSON{Addr: s.opts.Addr, Error: e, Alerts: []alertJSON{}, Tree: []*adminview.Instance{}}
	if snap == nil {
		if e == "" {
			e = "no view of the hierarchy yet"
		}
		return nil, errors.New(e)
	}
	out.At, out.Tree, out.Unreachable = snap.At, snap.Roots, adminview.Unreachable(snap.Roots)
	adminview.EachInstance(snap.Roots, func(n *adminview.Instance, _ *adminview.Child) {
		for _, a := range n.Alerts {
			out.Alerts = append(out.Alerts, alertJSON{n.Tier, n.Instance, a})
		}
	})
	return out, nil
}

func (s *Server) apiEvents(r *http.Request) (any, error) {
	var after uint64
	if v := r.URL.Query().Get("after"); v != "" {
		if _, err := fmt.Sscan(v, &after); err != nil {
			return nil, badRequest("after: %q is not a sequence number", v)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []adminview.Event{}
	for _, e := range s.events {
		if e.Seq > after {
			out = append(out, e)
		}
	}
	return map[string]any{"events": out, "last": s.seq}, nil
}

func (s *Server) apiHeat(r *http.Request) (any, error) {
	res := r.URL.Query().Get("resource")
	if res == "" {
		res = "cpu"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	hosts := map[string]bool{}
	resources := map[string]bool{}
	for _, h := range s.heat {
		for host, u := range h.Util {
			hosts[host] = true
			for r := range u {
				resources[r] = true
			}
		}
	}
	names := make([]string, 0, len(hosts))
	for h := range hosts {
		names = append(names, h)
	}
	sort.Slice(names, func(i, k int) bool { return adminview.NaturalLess(names[i], names[k]) })
	times := make([]int64, len(s.heat))
	values := make([][]*float64, len(names))
	for i := range values {
		values[i] = make([]*float64, len(s.heat))
	}
	for t, h := range s.heat {
		times[t] = h.At.UnixMilli()
		for i, host := range names {
			if v, ok := h.Util[host][res]; ok {
				v := v
				values[i][t] = &v
			}
		}
	}
	rs := make([]string, 0, len(resources))
	for r := range resources {
		rs = append(rs, r)
	}
	sort.Strings(rs)
	return map[string]any{"resource": res, "resources": rs, "hosts": names, "times": times, "values": values}, nil
}

type hop struct {
	Tier     string `json:"tier"`
	Instance string `json:"instance"`
	Child    string `json:"child"`
	InFlight bool   `json:"in_flight,omitempty"`
}

type shardJSON struct {
	Shard string `json:"shard"`
	Path  []hop  `json:"path"`
}

// paths returns every shard's placement path from the top tier down, from a
// snapshot.
func paths(snap *adminview.Snapshot) map[string][]hop {
	out := map[string][]hop{}
	var walk func(n *adminview.Instance, shard string, acc []hop)
	walk = func(n *adminview.Instance, shard string, acc []hop) {
		owner := snap.Owners[adminview.Key(n.Tier, n.Instance)][shard]
		h := hop{Tier: n.Tier, Instance: n.Instance, Child: strings.TrimPrefix(owner, "→"), InFlight: strings.HasPrefix(owner, "→")}
		acc = append(acc, h)
		if ch := n.FindChild(h.Child); ch != nil && ch.Instance != nil && !h.InFlight {
			walk(ch.Instance, shard, acc)
			return
		}
		out[shard] = acc
	}
	for _, root := range snap.Roots {
		for shard := range snap.Owners[adminview.Key(root.Tier, root.Instance)] {
			walk(root, shard, nil)
		}
	}
	return out
}

func (s *Server) apiShards(r *http.Request) (any, error) {
	snap, e := s.snapshot(r.Context())
	if snap == nil {
		return nil, errors.New(e)
	}
	q := strings.ToLower(strings.TrimSpace(r.URL.Query().Get("q")))
	all := paths(snap)
	ids := make([]string, 0, len(all))
	for id, p := range all {
		match := q == "" || strings.Contains(strings.ToLower(id), q)
		for _, h := range p {
			match = match || (q != "" && strings.Contains(strings.ToLower(h.Child), q))
		}
		if match {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, k int) bool { return adminview.NaturalLess(ids[i], ids[k]) })
	total := len(ids)
	if len(ids) > 100 {
		ids = ids[:100]
	}
	out := make([]shardJSON, len(ids))
	for i, id := range ids {
		out[i] = shardJSON{Shard: id, Path: all[id]}
	}
	return map[string]any{"shards": out, "total": total}, nil
}

type historyJSON struct {
	At       time.Time `json:"at"`
	Tier     string    `json:"tier"`
	Instance string    `json:"instance"`
	From     string    `json:"from"`
	To       string    `json:"to"`
	Epoch    uint64    `json:"epoch"`
	Mode     string    `json:"mode"`
	Reason   string    `json:"reason"`
	Goal     string    `json:"goal,omitempty"`
}

func (s *Server) apiExplain(r *http.Request) (any, error) {
	shard := r.URL.Query().Get("shard")
	if shard == "" {
		return nil, badRequest("shard: required (e.g. ?shard=sample/0)")
	}
	snap, e := s.snapshot(r.Context())
	if snap == nil {
		return nil, errors.New(e)
	}
	ctx, cancel := context.WithTimeout(withToken(r.Context(), r.Header.Get("Authorization")), 10*time.Second)
	defer cancel()
	path := paths(snap)[shard]
	out := map[string]any{"shard": shard, "path": path}
	var hist []historyJSON
	var findings, quarantined []string
	found := false
	for _, h := range path {
		c, err := s.dial(snap.Addrs[adminview.Key(h.Tier, h.Instance)])
		if err != nil {
			return nil, err
		}
		resp, err := c.Explain(ctx, &wire.ExplainRequest{Shard: shard})
		if err != nil {
			if st, ok := status.FromError(err); ok && st.Code().String() == "NotFound" {
				continue
			}
			return nil, err
		}
		found = true
		if out["spec"] == nil {
			out["spec"] = resp.GetShard()
		}
		for _, ev := range resp.GetHistory() {
			m := ev.GetMove()
			hist = append(hist, historyJSON{At: time.Unix(0, ev.GetAtUnixNanos()).UTC(), Tier: ev.GetTier(), Instance: ev.GetInstance(),
				From: m.GetFrom(), To: m.GetTo(), Epoch: m.GetEpoch(), Mode: ev.GetMode(), Reason: m.GetReason(), Goal: m.GetGoal()})
		}
		findings = append(findings, resp.GetFindings()...)
		if q := resp.GetQuarantined(); q != "" {
			quarantined = append(quarantined, h.Tier+" "+h.Instance+": "+q)
		}
	}
	if !found {
		return nil, usageError{fmt.Errorf("shard %q: no tier instance knows it", shard)}
	}
	sort.SliceStable(hist, func(i, k int) bool { return hist[i].At.Before(hist[k].At) })
	out["history"], out["findings"], out["quarantined"] = hist, findings, quarantined
	if len(path) > 0 && path[len(path)-1].Child == "" {
		out["why_not"] = "not placed at " + path[len(path)-1].Tier + " " + path[len(path)-1].Instance + ": see the findings and the alerts (no capacity, constraints)"
	}
	return out, nil
}

type drainReq struct {
	Child   string `json:"child"`
	Tier    string `json:"tier"`
	Undrain bool   `json:"undrain"`
}

func decode(r *http.Request, v any) error {
	if r.Method != http.MethodPost {
		return badRequest("%s: use POST", r.URL.Path)
	}
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("request body: %v", err)
	}
	return nil
}

func (s *Server) apiDrain(r *http.Request) (any, error) {
	var req drainReq
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if req.Child == "" {
		return nil, badRequest("child: required (the host or child tier instance to drain)")
	}
	snap, e := s.snapshot(r.Context())
	if snap == nil {
		return nil, errors.New(e)
	}
	parent, err := adminview.FindParent(snap.Roots, req.Child, req.Tier)
	if err != nil {
		return nil, usageError{err}
	}
	c, err := s.dial(parent.Address)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(withToken(r.Context(), r.Header.Get("Authorization")), 10*time.Second)
	defer cancel()
	if req.Undrain {
		resp, err := c.Undrain(ctx, &wire.UndrainRequest{Tier: parent.Tier, Instance: parent.Instance, Child: req.Child})
		if err != nil {
			return nil, err
		}
		return map[string]any{"child": req.Child, "parent": parent.Tier + "/" + parent.Instance, "state": adminview.ChildStateName(resp.GetState())}, nil
	}
	resp, err := c.Drain(ctx, &wire.DrainRequest{Tier: parent.Tier, Instance: parent.Instance, Child: req.Child})
	if err != nil {
		return nil, err
	}
	return map[string]any{"child": req.Child, "parent": parent.Tier + "/" + parent.Instance, "state": adminview.ChildStateName(resp.GetState()), "shards_to_move": resp.GetShardsToMove()}, nil
}

type planReq struct {
	Tier     string   `json:"tier"`
	Instance string   `json:"instance"`
	Drain    []string `json:"drain"`
}

type moveJSON struct {
	Shard  string  `json:"shard"`
	From   string  `json:"from"`
	To     string  `json:"to"`
	Reason string  `json:"reason"`
	Goal   string  `json:"goal,omitempty"`
	Delta  float64 `json:"delta"`
}

func (s *Server) instanceAddr(snap *adminview.Snapshot, tier, instance string) (string, error) {
	if tier == "" && instance == "" && len(snap.Roots) > 0 {
		return snap.Roots[0].Address, nil
	}
	addr, ok := snap.Addrs[adminview.Key(tier, instance)]
	if !ok {
		return "", badRequest("tier %q instance %q: no such tier instance in the tree", tier, instance)
	}
	return addr, nil
}

func (s *Server) apiPlan(r *http.Request) (any, error) {
	var req planReq
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	snap, e := s.snapshot(r.Context())
	if snap == nil {
		return nil, errors.New(e)
	}
	addr, err := s.instanceAddr(snap, req.Tier, req.Instance)
	if err != nil {
		return nil, err
	}
	c, err := s.dial(addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(withToken(r.Context(), r.Header.Get("Authorization")), 30*time.Second)
	defer cancel()
	resp, err := c.Plan(ctx, &wire.AdminPlanRequest{Tier: req.Tier, Instance: req.Instance, DrainChildren: req.Drain})
	if err != nil {
		return nil, err
	}
	moves := []moveJSON{}
	for _, m := range resp.GetPlan().GetMoves() {
		moves = append(moves, moveJSON{Shard: m.GetShard(), From: m.GetFrom(), To: m.GetTo(), Reason: m.GetReason(), Goal: m.GetGoal(), Delta: m.GetDelta()})
	}
	inf := []string{}
	for _, i := range resp.GetPlan().GetInfeasible() {
		inf = append(inf, i.GetShard())
	}
	return map[string]any{"addr": addr, "token": resp.GetToken(), "state_index": resp.GetStateIndex(), "stranded": resp.GetStranded(),
		"moves": moves, "infeasible": inf, "status": resp.GetPlan().GetStatus().String()}, nil
}

type applyReq struct {
	Addr  string `json:"addr"`
	Token string `json:"token"`
}

func (s *Server) apiApply(r *http.Request) (any, error) {
	var req applyReq
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if req.Token == "" || req.Addr == "" {
		return nil, badRequest("token and addr: required (from a plan preview)")
	}
	snap, e := s.snapshot(r.Context())
	if snap == nil {
		return nil, errors.New(e)
	}
	known := false
	for _, a := range snap.Addrs {
		known = known || a == req.Addr
	}
	if !known {
		return nil, badRequest("addr %q: not an instance of the tree", req.Addr)
	}
	c, err := s.dial(req.Addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(withToken(r.Context(), r.Header.Get("Authorization")), 30*time.Second)
	defer cancel()
	resp, err := c.ApplyPlan(ctx, &wire.ApplyPlanRequest{Token: req.Token})
	if err != nil {
		return nil, err
	}
	return map[string]any{"moves_committed": resp.GetMovesCommitted(), "moves_refused": resp.GetMovesRefused(), "state_index": resp.GetStateIndex()}, nil
}
