// Package testutil holds helpers shared by the tests of several packages:
// waiting for a condition on real processes and servers with a deadline, and a
// buffer a process or goroutine writes while the test reads, and the check that
// a document's Go excerpts are still in the files they quote. Only test files
// import it.
package testutil
