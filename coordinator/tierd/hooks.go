package tierd

import (
	"sync/atomic"

	"github.com/strata-sched/strata/interfaces"
)

// Test hooks: nil in production. Tests set them to widen race windows that
// are otherwise microseconds long (leadership_test.go).
var (
	// testHookConnect runs in Connect after the leader check, before the
	// child is registered.
	testHookConnect atomic.Pointer[func(*Daemon)]
	// testHookDeclare runs in declareFailed once a child is being declared
	// failed, before the commit.
	testHookDeclare atomic.Pointer[func(*Daemon, interfaces.ChildID)]
	// testHookRegister runs in registerChild between its read of the child
	// and its commit.
	testHookRegister atomic.Pointer[func(*Daemon)]
)
