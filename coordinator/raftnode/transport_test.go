package raftnode

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestHelloRoundTripAndRejects(t *testing.T) {
	var buf bytes.Buffer
	in := Hello{ID: "n1", RaftAddr: "127.0.0.1:7001", AdminAddr: "127.0.0.1:7101"}
	if err := WriteHello(&buf, in); err != nil {
		t.Fatal(err)
	}
	buf.WriteString("rest")
	br := bufio.NewReader(&buf)
	out, err := ReadHello(br)
	if err != nil || out != in {
		t.Fatalf("round trip: %+v %v, want %+v", out, err, in)
	}
	rest, _ := io.ReadAll(br)
	if string(rest) != "rest" {
		t.Fatalf("bytes after the hello: %q, want %q", rest, "rest")
	}
	var ok bytes.Buffer
	_ = WriteHello(&ok, in)
	enc := ok.Bytes()
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "EOF"},
		{"bad magic", append([]byte("HTTP"), enc[4:]...), "bad magic"},
		{"bad version", append(append([]byte("STRH"), 9), enc[5:]...), "unsupported version 9"},
		{"zero length", []byte("STRH\x01\x00"), "length 0 out of range"},
		{"huge length", []byte("STRH\x01\xff\xff\x7f"), "out of range"},
		{"truncated body", enc[:len(enc)-3], "body"},
		{"not JSON", append([]byte("STRH\x01\x04"), []byte(`{"id`)...), "body"},
		{"no raft addr", append([]byte("STRH\x01\x0b"), []byte(`{"id":"n1"}`)...), "raft_addr is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadHello(bufio.NewReader(bytes.NewReader(tt.data)))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ReadHello: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestStreamLayerBlocksBothDirectionsAndLearnsAdmin(t *testing.T) {
	a, err := NewTCPStreamLayer("127.0.0.1:0", "", Hello{ID: "a", AdminAddr: "adm-a:1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := NewTCPStreamLayer("127.0.0.1:0", "", Hello{ID: "b", AdminAddr: "adm-b:1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	aAddr, bAddr := a.Addr().String(), b.Addr().String()

	// a dials b: b accepts, learns a's admin address, and bytes flow.
	c, err := a.Dial(rAddr(bAddr), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	s, err := b.Accept()
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(s, got); err != nil || string(got) != "ping" {
		t.Fatalf("read %q %v", got, err)
	}
	if adm, ok := b.AdminAddrOf(aAddr); !ok || adm != "adm-a:1" {
		t.Fatalf("b learnt admin %q %v for %s, want adm-a:1", adm, ok, aAddr)
	}

	// Blocking a on b closes the open connection and refuses new ones from a.
	b.SetBlocked([]string{aAddr})
	_ = s.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := s.Read(got); err == nil {
		t.Fatal("connection from a still readable after blocking a")
	}
	c2, err := a.Dial(rAddr(bAddr), time.Second)
	if err != nil {
		t.Fatal(err) // the TCP dial itself works; b drops it after the hello
	}
	_ = c2.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c2.Read(got); err == nil {
		t.Fatal("b kept a connection from blocked a")
	}
	// b dialling blocked a fails at once.
	if _, err := b.Dial(rAddr(aAddr), time.Second); !errors.Is(err, ErrBlocked) {
		t.Fatalf("dial to blocked peer: %v, want ErrBlocked", err)
	}
	if bl := b.Blocked(); len(bl) != 1 || bl[0] != aAddr {
		t.Fatalf("blocked = %v", bl)
	}
	// Healing lets connections through again.
	b.SetBlocked(nil)
	c3, err := b.Dial(rAddr(aAddr), time.Second)
	if err != nil {
		t.Fatalf("dial after heal: %v", err)
	}
	c3.Close()
}

func TestStreamLayerRejectsBadAdvertise(t *testing.T) {
	if _, err := NewTCPStreamLayer("0.0.0.0:0", "", Hello{ID: "x"}, nil); err == nil {
		t.Fatal("binding all interfaces without an advertise address must fail")
	}
	if _, err := NewTCPStreamLayer("127.0.0.1:0", "0.0.0.0:7000", Hello{ID: "x"}, nil); err == nil {
		t.Fatal("an unspecified advertise address must fail")
	}
}

func TestStreamLayerWrapperSeesEveryConnection(t *testing.T) {
	var mu sync.Mutex
	wrapped := map[bool]int{}
	wrap := func(c net.Conn, dialled bool) (net.Conn, error) {
		mu.Lock()
		wrapped[dialled]++
		mu.Unlock()
		return c, nil
	}
	a, err := NewTCPStreamLayer("127.0.0.1:0", "", Hello{ID: "a"}, wrap)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	c, err := a.Dial(rAddr(a.Addr().String()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := a.Accept()
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	mu.Lock()
	defer mu.Unlock()
	if wrapped[true] != 1 || wrapped[false] != 1 {
		t.Fatalf("wrapper calls by side (dialled: count) = %v, want one each", wrapped)
	}
}

// FuzzReadHello: any preamble is either accepted with a raft address or rejected
// with an error; it never panics or hangs.
func FuzzReadHello(f *testing.F) {
	var ok bytes.Buffer
	_ = WriteHello(&ok, Hello{ID: "n1", RaftAddr: "127.0.0.1:1", AdminAddr: "127.0.0.1:2"})
	f.Add(ok.Bytes())
	f.Add([]byte("STRH\x01\x02{}"))
	f.Add([]byte("STRH\x01\xff\xff\xff\xff\x0f"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ReadHello(bufio.NewReader(bytes.NewReader(data)))
		if err == nil && h.RaftAddr == "" {
			t.Fatalf("accepted a hello without a raft address: %q", data)
		}
	})
}
