// Package testutil holds helpers shared by the tests of several packages: at
// present, waiting for a condition on real processes and servers with a
// deadline. Only test files import it.
package testutil
