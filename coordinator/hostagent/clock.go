package hostagent

import "time"

// WallClock is the real-time interfaces.Clock the daemons use.
type WallClock struct{}

// Now returns time.Now().
func (WallClock) Now() time.Time { return time.Now() }

// After returns time.After(d).
func (WallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
