package hostagent_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/strata-sched/strata/coordinator/hostagent/driver/execdriver"
)

// execSup runs this test binary as the exec driver's supervisor (TestMain).
var execSup []string

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "supervise" {
		os.Exit(execdriver.Supervise(os.Args[2:], os.Stderr))
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	execSup = []string{self, "supervise"}
	os.Exit(m.Run())
}
