package raftnode

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// helloMagic starts every connection of the stream layer; the version byte after it
// is only ever incremented.
const helloMagic = "STRH"

const helloVersion = 1

// maxHello bounds the hello's JSON body so a stranger cannot make us allocate much.
const maxHello = 4096

// Hello is what the dialling side of a connection says first: who it is.
type Hello struct {
	ID        string `json:"id"`
	RaftAddr  string `json:"raft_addr"`
	AdminAddr string `json:"admin_addr,omitempty"`
}

// ConnWrapper wraps a freshly dialled or accepted connection before anything is
// written to it; a TLS layer plugs in here (tls.Client / tls.Server). Returning an
// error drops the connection.
type ConnWrapper func(c net.Conn, dialled bool) (net.Conn, error)

// TCPStreamLayer is a raft.StreamLayer over TCP. It exchanges a Hello on every
// connection, records the admin address of every peer that dials in, and honours a
// set of blocked peers (test mode: simulated network partitions between processes).
type TCPStreamLayer struct {
	ln        net.Listener
	advertise net.Addr
	self      Hello
	wrap      ConnWrapper

	mu      sync.Mutex
	blocked map[string]bool         // raft addresses we refuse to talk to
	admins  map[string]string       // raft address -> admin address, learnt from hellos
	conns   map[*trackedConn]string // open connections -> peer raft address
	acceptQ chan net.Conn           // accepted connections that passed the hello
	closed  chan struct{}
	once    sync.Once
}

var _ raft.StreamLayer = (*TCPStreamLayer)(nil)

// NewTCPStreamLayer listens on bind. advertise is the address peers dial (bind's
// resolved address when empty). self names this replica in hellos (its RaftAddr is
// filled in from the advertised address). wrap may be nil.
func NewTCPStreamLayer(bind, advertise string, self Hello, wrap ConnWrapper) (*TCPStreamLayer, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("raft bind %q: %w", bind, err)
	}
	var adv net.Addr = ln.Addr()
	if advertise != "" {
		a, err := net.ResolveTCPAddr("tcp", advertise)
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("raft advertise %q: %w", advertise, err)
		}
		if a.IP == nil || a.IP.IsUnspecified() {
			ln.Close()
			return nil, fmt.Errorf("raft advertise %q: must be a routable address, not unspecified", advertise)
		}
		adv = a
	} else if ta, ok := adv.(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("raft bind %q: binding all interfaces needs an advertise address", bind)
	}
	self.RaftAddr = adv.String()
	s := &TCPStreamLayer{
		ln:        ln,
		advertise: adv,
		self:      self,
		wrap:      wrap,
		blocked:   map[string]bool{},
		admins:    map[string]string{},
		conns:     map[*trackedConn]string{},
		acceptQ:   make(chan net.Conn),
		closed:    make(chan struct{}),
	}
	go s.acceptLoop()
	return s, nil
}

// Addr is the advertised address.
func (s *TCPStreamLayer) Addr() net.Addr { return s.advertise }

// Close stops listening and closes every open connection.
func (s *TCPStreamLayer) Close() error {
	var err error
	s.once.Do(func() {
		close(s.closed)
		err = s.ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			c.Conn.Close()
		}
		s.mu.Unlock()
	})
	return err
}

// Accept returns the next inbound connection whose hello was valid and whose peer is
// not blocked.
func (s *TCPStreamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.acceptQ:
		return c, nil
	case <-s.closed:
		return nil, net.ErrClosed
	}
}

func (s *TCPStreamLayer) acceptLoop() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.closed:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go s.handshakeIn(c)
	}
}

func (s *TCPStreamLayer) handshakeIn(raw net.Conn) {
	c := raw
	if s.wrap != nil {
		w, err := s.wrap(raw, false)
		if err != nil {
			raw.Close()
			return
		}
		c = w
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	h, err := ReadHello(br)
	if err != nil {
		c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	s.mu.Lock()
	if h.AdminAddr != "" {
		s.admins[h.RaftAddr] = h.AdminAddr
	}
	if s.blocked[h.RaftAddr] {
		s.mu.Unlock()
		c.Close()
		return
	}
	tc := &trackedConn{Conn: c, r: br, owner: s}
	s.conns[tc] = h.RaftAddr
	s.mu.Unlock()
	select {
	case s.acceptQ <- tc:
	case <-s.closed:
		tc.Close()
	}
}

// Dial opens a connection to a peer and says hello. A blocked peer fails at once.
func (s *TCPStreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	peer := string(address)
	if s.isBlocked(peer) {
		return nil, fmt.Errorf("dial %s: %w", peer, ErrBlocked)
	}
	d := net.Dialer{Timeout: timeout}
	raw, err := d.Dial("tcp", peer)
	if err != nil {
		return nil, err
	}
	c := raw
	if s.wrap != nil {
		w, err := s.wrap(raw, true)
		if err != nil {
			raw.Close()
			return nil, err
		}
		c = w
	}
	if timeout > 0 {
		_ = c.SetWriteDeadline(time.Now().Add(timeout))
	}
	if err := WriteHello(c, s.self); err != nil {
		c.Close()
		return nil, err
	}
	_ = c.SetWriteDeadline(time.Time{})
	s.mu.Lock()
	if s.blocked[peer] { // blocked while dialling
		s.mu.Unlock()
		c.Close()
		return nil, fmt.Errorf("dial %s: %w", peer, ErrBlocked)
	}
	tc := &trackedConn{Conn: c, owner: s}
	s.conns[tc] = peer
	s.mu.Unlock()
	return tc, nil
}

// ErrBlocked is returned when dialling a peer that is on the blocked list.
var ErrBlocked = errors.New("peer blocked (simulated partition)")

func (s *TCPStreamLayer) isBlocked(peer string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.blocked[peer]
}

// SetBlocked replaces the set of blocked peers (raft addresses) and closes every
// open connection to or from a newly blocked peer. An empty list heals.
func (s *TCPStreamLayer) SetBlocked(peers []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.blocked = make(map[string]bool, len(peers))
	for _, p := range peers {
		s.blocked[p] = true
	}
	for c, p := range s.conns {
		if s.blocked[p] {
			c.Conn.Close()
			delete(s.conns, c)
		}
	}
}

// Blocked returns the blocked peers.
func (s *TCPStreamLayer) Blocked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.blocked))
	for p := range s.blocked {
		out = append(out, p)
	}
	return out
}

// AdminAddrOf returns the admin address a peer announced when it dialled us.
func (s *TCPStreamLayer) AdminAddrOf(raftAddr string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.admins[raftAddr]
	return a, ok
}

// LearnAdminAddr records a peer's admin address (e.g. from a join request).
func (s *TCPStreamLayer) LearnAdminAddr(raftAddr, adminAddr string) {
	if adminAddr == "" {
		return
	}
	s.mu.Lock()
	s.admins[raftAddr] = adminAddr
	s.mu.Unlock()
}

func (s *TCPStreamLayer) forget(c *trackedConn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// trackedConn is a connection the layer can close when its peer gets blocked.
type trackedConn struct {
	net.Conn
	r     *bufio.Reader // holds bytes read past the hello; nil for dialled conns
	owner *TCPStreamLayer
}

func (c *trackedConn) Read(p []byte) (int, error) {
	if c.r != nil {
		return c.r.Read(p)
	}
	return c.Conn.Read(p)
}

func (c *trackedConn) Close() error {
	c.owner.forget(c)
	return c.Conn.Close()
}

// WriteHello writes the connection preamble: magic, version, length, JSON body.
func WriteHello(w io.Writer, h Hello) error {
	body, err := json.Marshal(h)
	if err != nil {
		return err
	}
	buf := make([]byte, 0, len(helloMagic)+1+binary.MaxVarintLen32+len(body))
	buf = append(buf, helloMagic...)
	buf = append(buf, helloVersion)
	buf = binary.AppendUvarint(buf, uint64(len(body)))
	buf = append(buf, body...)
	_, err = w.Write(buf)
	return err
}

// ReadHello reads and checks a preamble written by WriteHello.
func ReadHello(r *bufio.Reader) (Hello, error) {
	var h Hello
	head := make([]byte, len(helloMagic)+1)
	if _, err := io.ReadFull(r, head); err != nil {
		return h, fmt.Errorf("hello: %w", err)
	}
	if string(head[:len(helloMagic)]) != helloMagic {
		return h, errors.New("hello: bad magic (not a strata raft peer)")
	}
	if head[len(helloMagic)] != helloVersion {
		return h, fmt.Errorf("hello: unsupported version %d", head[len(helloMagic)])
	}
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return h, fmt.Errorf("hello: length: %w", err)
	}
	if n == 0 || n > maxHello {
		return h, fmt.Errorf("hello: length %d out of range 1..%d", n, maxHello)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return h, fmt.Errorf("hello: body: %w", err)
	}
	// Unknown fields are ignored so that a newer replica can say more in a hello
	// of the same version during a rolling upgrade; an incompatible change bumps
	// the version byte.
	if err := json.Unmarshal(body, &h); err != nil {
		return h, fmt.Errorf("hello: body: %w", err)
	}
	if h.RaftAddr == "" {
		return h, errors.New("hello: raft_addr is empty")
	}
	return h, nil
}
