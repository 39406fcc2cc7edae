package raftnode

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/hashicorp/raft"
	"github.com/strata-sched/strata/coordinator/fsm"
	"github.com/strata-sched/strata/interfaces"
)

// Tier is a replica of a tier instance: a Node whose FSM is the tier's
// coordinator/fsm state, with typed writes and reads on top, and a JSON API for them
// on the admin endpoint (see registerTierAPI).
type Tier struct {
	*Node
	FSM *fsm.FSM
	// Options are the options the FSM was built with (StartTier's; zero when the
	// FSM came from elsewhere, see NewTier).
	Options fsm.Options
}

// StartTier starts a replica whose state machine is a fresh fsm.FSM.
func StartTier(cfg Config, opts fsm.Options) (*Tier, error) {
	f := fsm.NewWithOptions(opts)
	if cfg.Validate == nil {
		cfg.Validate = func(b []byte) error {
			_, err := fsm.Decode(b)
			return err
		}
	}
	if cfg.EncodeResult == nil {
		cfg.EncodeResult = func(v any) ([]byte, error) { return json.Marshal(ResultJSON(v)) }
	}
	n, err := New(cfg, f)
	if err != nil {
		return nil, err
	}
	t := NewTier(n, f)
	t.Options = opts
	return t, nil
}

// NewTier makes a Tier of a running node whose FSM is f (the harnesses build nodes
// themselves). The tier API is added to the node's admin endpoint, if it has one.
func NewTier(n *Node, f *fsm.FSM) *Tier {
	t := &Tier{Node: n, FSM: f}
	if n.adminLn != nil {
		t.registerTierAPI()
	}
	return t
}

// Exec encodes c, commits it and returns the FSM's result. Domain rejections are
// in the result's Ops (see fsm.Result.Err); the error is about the commit itself.
func (t *Tier) Exec(ctx context.Context, c fsm.Command) (*fsm.Result, error) {
	b, err := fsm.Encode(c)
	if err != nil {
		return nil, err
	}
	resp, idx, err := t.Apply(ctx, b)
	if err != nil {
		return nil, err
	}
	r, ok := resp.(*fsm.Result)
	if !ok {
		return nil, fmt.Errorf("entry %d: FSM answered %T, want *fsm.Result", idx, resp)
	}
	return r, nil
}

// execOne runs a single-operation command and returns the shard's new epoch.
func (t *Tier) execOne(ctx context.Context, c fsm.Command) (interfaces.Epoch, error) {
	r, err := t.Exec(ctx, c)
	if err != nil {
		return 0, err
	}
	if len(r.Ops) != 1 {
		return 0, fmt.Errorf("%s: %d results, want 1", c.Type(), len(r.Ops))
	}
	return r.Ops[0].Epoch, r.Ops[0].Err
}

// Assign places an unassigned shard and returns its new epoch.
func (t *Tier) Assign(ctx context.Context, shard interfaces.ShardID, child interfaces.ChildID, reason string) (interfaces.Epoch, error) {
	return t.execOne(ctx, &fsm.Assign{Shard: shard, Child: child, Reason: reason})
}

// Move moves a shard from one child to another if it still has epoch (compare and
// set) and returns its new epoch.
func (t *Tier) Move(ctx context.Context, m interfaces.Move) (interfaces.Epoch, error) {
	return t.execOne(ctx, &fsm.Move{Move: m})
}

// ReadMode picks a read path.
type ReadMode string

// Read modes.
const (
	ReadLinearizable ReadMode = "linearizable"
	ReadStale        ReadMode = "stale"
)

// Read runs fn on the tier's FSM through the chosen read path.
func (t *Tier) Read(ctx context.Context, mode ReadMode, fn func(*fsm.FSM) error) error {
	wrap := func(raft.FSM) error { return fn(t.FSM) }
	switch mode {
	case ReadLinearizable, "":
		return t.ReadLinearizable(ctx, wrap)
	case ReadStale:
		return t.ReadStale(0, wrap)
	}
	return fmt.Errorf("read mode %q: must be linearizable or stale: %w", mode, interfaces.ErrInvalid)
}

// Assignment reads a shard's owner and epoch; found is false when it is unassigned
// or unknown.
func (t *Tier) Assignment(ctx context.Context, mode ReadMode, shard interfaces.ShardID) (a interfaces.Assignment, found bool, err error) {
	err = t.Read(ctx, mode, func(f *fsm.FSM) error {
		a, found = f.Assignment(shard)
		return nil
	})
	return a, found, err
}

// OpJSON is one operation's result on the wire.
type OpJSON struct {
	ID    string `json:"id"`
	Epoch uint64 `json:"epoch,omitempty"`
	Code  string `json:"code,omitempty"`
	Error string `json:"error,omitempty"`
}

// ResultJSONValue is an fsm.Result on the wire.
type ResultJSONValue struct {
	Index uint64   `json:"index"`
	Type  string   `json:"type"`
	Ops   []OpJSON `json:"ops"`
}

// ResultJSON converts an FSM response (*fsm.Result) for the wire; other values are
// returned unchanged.
func ResultJSON(v any) any {
	r, ok := v.(*fsm.Result)
	if !ok {
		return v
	}
	out := ResultJSONValue{Index: r.Index, Type: r.Type.String(), Ops: make([]OpJSON, len(r.Ops))}
	for i, op := range r.Ops {
		out.Ops[i] = OpJSON{ID: op.ID, Epoch: uint64(op.Epoch)}
		if op.Err != nil {
			out.Ops[i].Code, out.Ops[i].Error = codeOf(op.Err), op.Err.Error()
		}
	}
	return out
}

// The tier JSON API on the admin endpoint. Its writes are raw FSM writes for
// the multi-process tests (the test node, Config.RawWrites): a production
// replica answers them 403. Writes are forwarded to the leader; reads take
// ?read=linearizable (default, leader only) or ?read=stale.
//
//	POST /v1/tier/children   {"children": [Child...]}      -> ResultJSONValue (RawWrites)
//	POST /v1/tier/shards     {"shards": [Shard...]}        -> ResultJSONValue (RawWrites)
//	POST /v1/tier/assign     AssignRequest                 -> EpochResponse   (RawWrites)
//	POST /v1/tier/move       interfaces.Move               -> EpochResponse   (RawWrites)
//	GET  /v1/tier/assignment?shard=ID&read=MODE            -> AssignmentResponse
//	GET  /v1/tier/state?read=MODE                          -> StateResponse

// ChildrenRequest registers or updates children.
type ChildrenRequest struct {
	Children []interfaces.Child `json:"children"`
}

// ShardsRequest creates or updates shard specs.
type ShardsRequest struct {
	Shards []interfaces.Shard `json:"shards"`
}

// AssignRequest places an unassigned shard.
type AssignRequest struct {
	Shard  interfaces.ShardID `json:"shard"`
	Child  interfaces.ChildID `json:"child"`
	Reason string             `json:"reason,omitempty"`
}

// EpochResponse is the shard's epoch after a successful assign or move.
type EpochResponse struct {
	Epoch interfaces.Epoch `json:"epoch"`
}

// AssignmentResponse is one shard's assignment.
type AssignmentResponse struct {
	Found bool               `json:"found"`
	Child interfaces.ChildID `json:"child,omitempty"`
	Epoch interfaces.Epoch   `json:"epoch,omitempty"`
}

// StateResponse summarises a replica's state: every assignment and the SHA-256 of
// the FSM's snapshot encoding (equal digests mean equal states).
type StateResponse struct {
	AppliedIndex uint64                  `json:"applied_index"`
	Digest       string                  `json:"digest"`
	Assignments  []interfaces.Assignment `json:"assignments"`
}

func (t *Tier) registerTierAPI() {
	n := t.Node
	if n.cfg.RawWrites {
		t.registerTierWrites()
	} else {
		n.mux.HandleFunc("POST /v1/tier/", refuseRawWrite)
	}
	n.mux.HandleFunc("GET /v1/tier/assignment", func(w http.ResponseWriter, r *http.Request) {
		shard := r.URL.Query().Get("shard")
		if shard == "" {
			WriteError(w, fmt.Errorf("query: shard: must not be empty: %w", interfaces.ErrInvalid), n)
			return
		}
		a, found, err := t.Assignment(r.Context(), ReadMode(r.URL.Query().Get("read")), interfaces.ShardID(shard))
		if err != nil {
			WriteError(w, err, n)
			return
		}
		writeJSON(w, http.StatusOK, AssignmentResponse{Found: found, Child: a.Child, Epoch: a.Epoch})
	})
	n.mux.HandleFunc("GET /v1/tier/state", func(w http.ResponseWriter, r *http.Request) {
		var resp StateResponse
		err := t.Read(r.Context(), ReadMode(r.URL.Query().Get("read")), func(f *fsm.FSM) error {
			resp.AppliedIndex = f.AppliedIndex()
			resp.Assignments = f.Assignments()
			return nil
		})
		if err == nil {
			var b []byte
			b, err = t.SnapshotBytes()
			sum := sha256.Sum256(b)
			resp.Digest = hex.EncodeToString(sum[:])
		}
		if err != nil {
			WriteError(w, err, n)
			return
		}
		writeJSON(w, http.StatusOK, resp)
	})
}

// registerTierWrites adds the raw write routes (the test node only).
func (t *Tier) registerTierWrites() {
	n := t.Node
	exec := func(w http.ResponseWriter, r *http.Request, path string, body any, c fsm.Command) {
		res, err := t.Exec(r.Context(), c)
		if n.forwardIfNotLeader(w, r, err, path, body) {
			return
		}
		if err != nil {
			WriteError(w, err, n)
			return
		}
		writeJSON(w, http.StatusOK, ResultJSON(res))
	}
	n.mux.HandleFunc("POST /v1/tier/children", func(w http.ResponseWriter, r *http.Request) {
		var req ChildrenRequest
		if !decodeBody(w, r, &req, n) {
			return
		}
		if len(req.Children) != 1 {
			WriteError(w, fmt.Errorf("children: give exactly one child per request (got %d): %w", len(req.Children), interfaces.ErrInvalid), n)
			return
		}
		exec(w, r, "/v1/tier/children", req, &fsm.PutChild{Child: req.Children[0]})
	})
	n.mux.HandleFunc("POST /v1/tier/shards", func(w http.ResponseWriter, r *http.Request) {
		var req ShardsRequest
		if !decodeBody(w, r, &req, n) {
			return
		}
		exec(w, r, "/v1/tier/shards", req, &fsm.PutShards{Shards: req.Shards})
	})
	epoch := func(w http.ResponseWriter, r *http.Request, path string, body any, c fsm.Command) {
		e, err := t.execOne(r.Context(), c)
		if n.forwardIfNotLeader(w, r, err, path, body) {
			return
		}
		if err != nil {
			WriteError(w, err, n)
			return
		}
		writeJSON(w, http.StatusOK, EpochResponse{Epoch: e})
	}
	n.mux.HandleFunc("POST /v1/tier/assign", func(w http.ResponseWriter, r *http.Request) {
		var req AssignRequest
		if !decodeBody(w, r, &req, n) {
			return
		}
		epoch(w, r, "/v1/tier/assign", req, &fsm.Assign{Shard: req.Shard, Child: req.Child, Reason: req.Reason})
	})
	n.mux.HandleFunc("POST /v1/tier/move", func(w http.ResponseWriter, r *http.Request) {
		var req interfaces.Move
		if !decodeBody(w, r, &req, n) {
			return
		}
		epoch(w, r, "/v1/tier/move", req, &fsm.Move{Move: req})
	})
}
