package hostd

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-sched/strata/coordinator/hostagent"
	"github.com/strata-sched/strata/coordinator/hostagent/driver/synthetic"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/internal/testutil"
)

func testConfig(t *testing.T, dir string) Config {
	t.Helper()
	drv, err := synthetic.New(synthetic.Config{Clock: hostagent.WallClock{}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	// The parent is never reached: Start only opens the state and begins
	// dialling in the background.
	return Config{Host: "h1", Parents: []string{"127.0.0.1:1"}, DataDir: dir,
		Capacity: interfaces.Load{CPU: 1}, Driver: drv}
}

// TestStartCreatesDataDir: a host daemon creates its data_dir (with its
// parents) like a tier replica does; it used to fail on a fresh machine
// opening host.db in a directory that did not exist. A data_dir that cannot
// be created is an error naming data_dir.
func TestStartCreatesDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "var", "lib", "strata")
	d, err := Start(testConfig(t, dir), io.Discard)
	if err != nil {
		t.Fatalf("start with a data_dir that does not exist yet: %v", err)
	}
	d.Close()
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm()&^0o750 != 0 {
		t.Fatalf("data_dir after start: %v %v, want a directory with mode 0750 (less the umask)", fi, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "host.db")); err != nil {
		t.Fatalf("host.db: %v", err)
	}

	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Start(testConfig(t, filepath.Join(file, "sub")), io.Discard)
	if err == nil || !strings.HasPrefix(err.Error(), "data_dir: ") || !strings.Contains(err.Error(), file) {
		t.Fatalf("start with a data_dir under a file: %v, want an error starting with data_dir: naming the path", err)
	}
}

// TestStartLogsATornLedgerLine: a torn final line of the ownership ledger (a
// crash or power loss while appending) is cut off at start, and the daemon
// says so in its log: the interval that line began is missing from the record.
func TestStartLogsATornLedgerLine(t *testing.T) {
	dir := t.TempDir()
	d, err := Start(testConfig(t, dir), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	f, err := os.OpenFile(filepath.Join(dir, "ledger.jsonl"), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"seq":1,"host":"h1","sha`); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var log testutil.Buffer
	d, err = Start(testConfig(t, dir), &log)
	if err != nil {
		t.Fatalf("start after a torn ledger line: %v", err)
	}
	d.Close()
	if !strings.Contains(log.String(), "torn final line") {
		t.Errorf("log %q does not mention the torn line it cut off", log.String())
	}
}
