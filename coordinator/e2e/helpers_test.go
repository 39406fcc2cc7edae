package e2e

import (
	"testing"

	"github.com/strata-sched/strata/interfaces/wire"
)

// startCluster writes spec's configs under dir, starts every process and
// stops them when the test ends.
func startCluster(t *testing.T, dir string, spec Spec) *Cluster {
	t.Helper()
	c, err := NewCluster(dir, strataBin, spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// admin dials p's Admin service (Admin) for the rest of the test.
func admin(t *testing.T, p *Proc) wire.AdminClient {
	t.Helper()
	a, done, err := Admin(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(done)
	return a
}
