package testutil

import (
	"net"
	"testing"
)

// FreeAddr returns a 127.0.0.1 address with a port free now (it may be taken
// by the time the caller binds it; tests that need an address before they can
// bind, such as a Raft group's peer list, accept that).
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
