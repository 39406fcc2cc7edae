// Package fakeclock is a manually advanced interfaces.Clock for the host agent's
// tests.
package fakeclock
