package testutil

import (
	"errors"
	"testing"
	"time"
)

// Eventually calls cond until it returns nil and returns how long that took.
// When timeout passes first it fails the test, naming what and cond's last
// error. It polls every timeout/200, between 10 ms and 100 ms.
func Eventually(t testing.TB, what string, timeout time.Duration, cond func() error) time.Duration {
	t.Helper()
	poll := min(max(timeout/200, 10*time.Millisecond), 100*time.Millisecond)
	start := time.Now()
	for {
		err := cond()
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) >= timeout {
			t.Fatalf("%s: not reached after %v: %v", what, timeout, err)
			return 0
		}
		time.Sleep(poll)
	}
}

// errNotYet is what Until reports for a condition that never held.
var errNotYet = errors.New("the condition never held")

// Until is Eventually for a condition that has no error to report.
func Until(t testing.TB, what string, timeout time.Duration, cond func() bool) time.Duration {
	t.Helper()
	return Eventually(t, what, timeout, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}
