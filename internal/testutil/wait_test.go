package testutil

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// fakeT records a failure instead of stopping the test.
type fakeT struct {
	testing.TB
	failed string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = format
	for _, a := range args {
		if e, ok := a.(error); ok {
			f.failed += " " + e.Error()
		}
	}
}

func TestEventually(t *testing.T) {
	n := 0
	if d := Eventually(t, "third call", time.Second, func() error {
		if n++; n < 3 {
			return errors.New("not yet")
		}
		return nil
	}); n != 3 || d <= 0 {
		t.Errorf("%d calls, %v: want 3 calls and a positive duration", n, d)
	}
	f := &fakeT{}
	Eventually(f, "never", 30*time.Millisecond, func() error { return errors.New("still down") })
	if !strings.Contains(f.failed, "not reached") || !strings.Contains(f.failed, "still down") {
		t.Errorf("failure %q: want it to say not reached and the last error", f.failed)
	}
	f = &fakeT{}
	Until(f, "never", 30*time.Millisecond, func() bool { return false })
	if !strings.Contains(f.failed, "never held") {
		t.Errorf("failure %q", f.failed)
	}
}
