package raftnode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// The admin endpoint: JSON over HTTP on Config.AdminBind. docs/operations.md
// ("Raft") documents it. Production replicas serve only its reads; the writes
// are the test node's (Config.RawWrites) and answer 403 elsewhere: a tier's
// membership changes through the gRPC Admin service (RaftJoin, RaftRemove).
//
//	GET  /v1/raft/status                 -> Status
//	GET  /v1/raft/peers                  -> {"peers": [Peer...]}
//	POST /v1/raft/join   JoinRequest     -> {}            (RawWrites; forwarded to the leader)
//	POST /v1/raft/remove RemoveRequest   -> {}            (RawWrites; forwarded to the leader)
//	POST /v1/raft/apply  ApplyRequest    -> ApplyResponse (RawWrites; forwarded to the leader)
//	GET  /v1/test/block                  -> BlockRequest  (TestMode only)
//	POST /v1/test/block  BlockRequest    -> {}            (TestMode only)
//
// Errors are {"error": message, "code": one of the Code* constants, "leader_admin":
// where the leader is, for not_leader} with a matching HTTP status.

// JoinRequest asks the group to add a voter.
type JoinRequest struct {
	ID        string `json:"id"`
	RaftAddr  string `json:"raft_addr"`
	AdminAddr string `json:"admin_addr,omitempty"`
}

// RemoveRequest asks the group to remove a server.
type RemoveRequest struct {
	ID string `json:"id"`
}

// ApplyRequest carries an encoded FSM command.
type ApplyRequest struct {
	Command []byte `json:"command"`
}

// ApplyResponse carries the entry's index and the FSM's response as JSON.
type ApplyResponse struct {
	Index  uint64          `json:"index"`
	Result json.RawMessage `json:"result,omitempty"`
}

// BlockRequest sets the raft addresses a replica refuses to talk to.
type BlockRequest struct {
	Peers []string `json:"peers"`
}

// PeersResponse lists the group's servers.
type PeersResponse struct {
	Peers []Peer `json:"peers"`
}

// forwardedHeader marks a request one replica forwarded to the leader; it is never
// forwarded again, so a confused group cannot bounce a request around.
const forwardedHeader = "X-Strata-Forwarded"

const maxAdminBody = 64 << 20

func (n *Node) registerAdmin() {
	n.mux.HandleFunc("GET /v1/raft/status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, n.Status())
	})
	n.mux.HandleFunc("GET /v1/raft/peers", func(w http.ResponseWriter, r *http.Request) {
		peers, err := n.Peers()
		if err != nil {
			WriteError(w, err, n)
			return
		}
		writeJSON(w, http.StatusOK, PeersResponse{Peers: peers})
	})
	if !n.cfg.RawWrites {
		n.mux.HandleFunc("POST /v1/raft/", refuseRawWrite)
		n.registerTest()
		return
	}
	n.mux.HandleFunc("POST /v1/raft/join", func(w http.ResponseWriter, r *http.Request) {
		var req JoinRequest
		if !decodeBody(w, r, &req, n) {
			return
		}
		if req.AdminAddr != "" {
			if _, _, err := net.SplitHostPort(req.AdminAddr); err != nil {
				WriteError(w, fmt.Errorf("join: admin address %q: must be host:port: %w", req.AdminAddr, interfaces.ErrInvalid), n)
				return
			}
		}
		err := n.AddVoter(r.Context(), req.ID, req.RaftAddr, req.AdminAddr)
		if n.forwardIfNotLeader(w, r, err, "/v1/raft/join", req) {
			return
		}
		if err != nil {
			WriteError(w, err, n)
			return
		}
		// Only a join the group accepted teaches the leader the new server's
		// admin address (the others learn it from its transport Hello).
		if n.stream != nil {
			n.stream.LearnAdminAddr(req.RaftAddr, req.AdminAddr)
		}
		writeJSON(w, http.StatusOK, struct{}{})
	})
	n.mux.HandleFunc("POST /v1/raft/remove", func(w http.ResponseWriter, r *http.Request) {
		var req RemoveRequest
		if !decodeBody(w, r, &req, n) {
			return
		}
		err := n.RemoveServer(r.Context(), req.ID)
		if n.forwardIfNotLeader(w, r, err, "/v1/raft/remove", req) {
			return
		}
		if err != nil {
			WriteError(w, err, n)
			return
		}
		writeJSON(w, http.StatusOK, struct{}{})
	})
	n.mux.HandleFunc("POST /v1/raft/apply", func(w http.ResponseWriter, r *http.Request) {
		var req ApplyRequest
		if !decodeBody(w, r, &req, n) {
			return
		}
		resp, idx, err := n.Apply(r.Context(), req.Command)
		if n.forwardIfNotLeader(w, r, err, "/v1/raft/apply", req) {
			return
		}
		if err != nil {
			WriteError(w, err, n)
			return
		}
		enc := n.cfg.EncodeResult
		if enc == nil {
			enc = json.Marshal
		}
		raw, err := enc(resp)
		if err != nil {
			WriteError(w, fmt.Errorf("encode result of entry %d: %w", idx, err), n)
			return
		}
		writeJSON(w, http.StatusOK, ApplyResponse{Index: idx, Result: raw})
	})
	n.registerTest()
}

// refuseRawWrite answers a raw write on a replica that does not serve them.
func refuseRawWrite(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusForbidden, RemoteError{Code: CodeForbidden, Message: fmt.Sprintf(
		"POST %s: this replica serves no raw writes (only the test node does); change Raft membership with the gRPC Admin service ('strata raft join|remove', an admin token)", r.URL.Path)})
}

func (n *Node) registerTest() {
	if n.cfg.TestMode && n.stream != nil {
		n.mux.HandleFunc("GET /v1/test/block", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, BlockRequest{Peers: n.stream.Blocked()})
		})
		n.mux.HandleFunc("POST /v1/test/block", func(w http.ResponseWriter, r *http.Request) {
			var req BlockRequest
			if !decodeBody(w, r, &req, n) {
				return
			}
			n.stream.SetBlocked(req.Peers)
			writeJSON(w, http.StatusOK, struct{}{})
		})
	}
}

// forwardIfNotLeader relays the request to the leader when err says this replica
// is not the leader and the leader's admin address is known. It reports whether it
// wrote the response.
func (n *Node) forwardIfNotLeader(w http.ResponseWriter, r *http.Request, err error, path string, body any) bool {
	var nl *NotLeaderError
	if !errors.As(err, &nl) || nl.LeaderAdmin == "" || nl.LeaderAdmin == n.adminAddr || r.Header.Get(forwardedHeader) != "" {
		return false
	}
	buf, jerr := json.Marshal(body)
	if jerr != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(r.Context(), n.cfg.Timeouts.Apply+time.Second)
	defer cancel()
	req, rerr := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+nl.LeaderAdmin+path, bytes.NewReader(buf))
	if rerr != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(forwardedHeader, n.cfg.ID)
	resp, ferr := n.client.Do(req)
	if ferr != nil {
		// The request may have reached the leader: for apply the outcome is unknown.
		if path == "/v1/raft/apply" {
			WriteError(w, fmt.Errorf("forward to leader %s: %v: %w", nl.LeaderAdmin, ferr, ErrIndeterminate), n)
			return true
		}
		return false
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, io.LimitReader(resp.Body, maxAdminBody))
	return true
}

func decodeBody(w http.ResponseWriter, r *http.Request, v any, n *Node) bool {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxAdminBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		WriteError(w, fmt.Errorf("request body: %v: %w", err, interfaces.ErrInvalid), n)
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteError writes err as the admin endpoint's JSON error, with the leader's admin
// address for not-leader errors. n may be nil. Application handlers use it too.
func WriteError(w http.ResponseWriter, err error, n *Node) {
	e := RemoteError{Code: codeOf(err), Message: err.Error()}
	var nl *NotLeaderError
	if errors.As(err, &nl) {
		e.LeaderAdmin, e.LeaderID = nl.LeaderAdmin, nl.LeaderID
	}
	status := http.StatusInternalServerError
	switch e.Code {
	case CodeInvalid:
		status = http.StatusBadRequest
	case CodeNotFound:
		status = http.StatusNotFound
	case CodeStaleEpoch, CodeConflict:
		status = http.StatusConflict
	case CodeNotLeader:
		status = http.StatusServiceUnavailable
	case CodeIndeterminate:
		status = http.StatusGatewayTimeout
	}
	writeJSON(w, status, e)
}
