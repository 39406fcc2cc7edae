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
	"strings"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// Client talks to a replica's admin endpoint. The CLI ("strata raft ...") and the
// harnesses use it.
type Client struct {
	// Addr is the replica's admin address, host:port.
	Addr string
	// HTTP is the client used; NewClient sets one with a 30 s timeout.
	HTTP *http.Client
}

// NewClient returns a client for the admin endpoint at addr (host:port or
// http://host:port).
func NewClient(addr string) *Client {
	return &Client{Addr: strings.TrimPrefix(addr, "http://"), HTTP: &http.Client{Timeout: 30 * time.Second}}
}

// Status returns the replica's status.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var s Status
	err := c.Call(ctx, http.MethodGet, "/v1/raft/status", nil, &s)
	return s, err
}

// Peers lists the group's servers as the replica sees them.
func (c *Client) Peers(ctx context.Context) ([]Peer, error) {
	var p PeersResponse
	err := c.Call(ctx, http.MethodGet, "/v1/raft/peers", nil, &p)
	return p.Peers, err
}

// Join adds a voter (the replica forwards to the leader).
func (c *Client) Join(ctx context.Context, req JoinRequest) error {
	return c.Call(ctx, http.MethodPost, "/v1/raft/join", req, nil)
}

// Remove removes a server (the replica forwards to the leader).
func (c *Client) Remove(ctx context.Context, id string) error {
	return c.Call(ctx, http.MethodPost, "/v1/raft/remove", RemoveRequest{ID: id}, nil)
}

// Apply commits an encoded command (the replica forwards to the leader).
func (c *Client) Apply(ctx context.Context, cmd []byte) (ApplyResponse, error) {
	var out ApplyResponse
	err := c.Call(ctx, http.MethodPost, "/v1/raft/apply", ApplyRequest{Command: cmd}, &out)
	return out, err
}

// SetBlocked sets the replica's blocked peers (test mode only).
func (c *Client) SetBlocked(ctx context.Context, raftAddrs []string) error {
	if raftAddrs == nil {
		raftAddrs = []string{}
	}
	return c.Call(ctx, http.MethodPost, "/v1/test/block", BlockRequest{Peers: raftAddrs}, nil)
}

// Call sends in (JSON; nil for none) to path and decodes the answer into out (nil
// to ignore it). Errors reported by the replica come back as *RemoteError, so
// errors.Is matches the sentinels; a transport failure after the request may have
// been sent wraps ErrIndeterminate for POSTs.
func (c *Client) Call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		buf, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(buf)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+c.Addr+path, body)
	if err != nil {
		return fmt.Errorf("admin address %q: %v: %w", c.Addr, err, interfaces.ErrInvalid)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		var op *net.OpError
		if method != http.MethodGet && !(errors.As(err, &op) && op.Op == "dial") {
			return fmt.Errorf("%s %s: %v: %w", method, c.Addr+path, err, ErrIndeterminate)
		}
		return fmt.Errorf("%s %s: %w", method, c.Addr+path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAdminBody))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, c.Addr+path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var re RemoteError
		if json.Unmarshal(data, &re) != nil || re.Code == "" {
			return fmt.Errorf("%s %s: HTTP %d: %s", method, c.Addr+path, resp.StatusCode, strings.TrimSpace(string(data)))
		}
		return &re
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: decode answer: %w", method, c.Addr+path, err)
		}
	}
	return nil
}
