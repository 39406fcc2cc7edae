package fsm

import (
	"bytes"
	"io"
)

type nopCloser struct{ io.Reader }

func (nopCloser) Close() error { return nil }

// tb is the part of testing.TB that the helpers use; *rapid.T has it too.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
