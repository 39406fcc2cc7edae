package dst

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/tiercore"
)

// ciConfig is the short run each CI seed makes: a 6s fault window with 4
// faults, then 10s quiet before the nothing-lost check (an Assign a host
// never acked is sent again after 4 lease TTLs, 8s: less quiet than that
// reports shards as lost that are only waiting for it).
var ciConfig = Config{Faults: 4, FaultFor: 6 * time.Second, QuietFor: 10 * time.Second}

// seeds is how many seeds TestSeeds runs: DST_SEEDS, or 1000.
func seeds(t *testing.T) uint64 {
	if v := os.Getenv("DST_SEEDS"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == 0 {
			t.Fatalf("DST_SEEDS: must be a positive integer (got %q)", v)
		}
		return n
	}
	return 1000
}

// TestSeeds runs 1,000 seeds of the whole hierarchy under faults and checks
// every invariant after every step. A failing seed is reported with its
// shrunk fault plan and the last steps of its replay; reproduce it with
// DST_SEED=<seed> go test -run TestSeed ./coordinator/dst.
func TestSeeds(t *testing.T) {
	n := seeds(t)
	workers := uint64(max(1, runtime.GOMAXPROCS(0)))
	start := time.Now()
	steps := make([]int, workers)
	for k := uint64(0); k < workers; k++ {
		t.Run(fmt.Sprintf("part%d", k), func(t *testing.T) {
			t.Parallel()
			for s := 1 + k; s <= n; s += workers {
				r := Run(s, ciConfig)
				steps[k] += r.Stats.Steps
				if r.Violation != nil {
					t.Errorf("%s", Report(s, ciConfig))
					return
				}
			}
		})
	}
	t.Cleanup(func() {
		total := 0
		for _, s := range steps {
			total += s
		}
		t.Logf("%d seeds, %d steps in %v", n, total, time.Since(start).Round(time.Millisecond))
	})
}

// TestSeed replays one seed (DST_SEED) with its trace: the command a failing
// seed's report names.
func TestSeed(t *testing.T) {
	v := os.Getenv("DST_SEED")
	if v == "" {
		t.Skip("set DST_SEED to replay one seed")
	}
	s, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("DST_SEED: must be an unsigned integer (got %q)", v)
	}
	cfg := ciConfig
	if os.Getenv("DST_SOAK") != "" {
		cfg = Config{}
	}
	t.Log(Report(s, cfg))
}

// TestReplayIsByteIdentical: a seed replays step for step — the same digest,
// the same trace, byte for byte — including one that fails.
func TestReplayIsByteIdentical(t *testing.T) {
	for _, cfg := range []Config{ciConfig, {Mutations: tiercore.Mutations{ReplaceOnSessionLoss: true}}} {
		cfg.Trace, cfg.TraceLines = true, 1<<20
		a, b := Run(7, cfg), Run(7, cfg)
		if a.Digest != b.Digest || strings.Join(a.Trace, "\n") != strings.Join(b.Trace, "\n") {
			t.Fatalf("seed 7 ran two ways: digests %x and %x", a.Digest, b.Digest)
		}
		if len(a.Trace) < 100 {
			t.Fatalf("a trace of %d lines: the run did nothing", len(a.Trace))
		}
		// The trace does not change the run.
		cfg.Trace = false
		if c := Run(7, cfg); c.Digest != a.Digest {
			t.Errorf("tracing changed the run: digests %x and %x", a.Digest, c.Digest)
		}
	}
}

// mutants are issue 20's failure modes put back, each with the number of
// seeds (of the default config, seeds 1, 2, …) within which the suite must
// catch it. The figures seen are in docs/reliability.md.
var mutants = []struct {
	name   string
	cfg    Config
	within uint64
}{
	{"no tombstone on a parent's revoke", Config{Mutations: tiercore.Mutations{NoRevokeTombstone: true}}, 60},
	{"re-placed when the session drops, not at lease + margin", Config{Mutations: tiercore.Mutations{ReplaceOnSessionLoss: true}}, 10},
	{"no worker lease (a paused agent's workers run on)", Config{NoWorkerLease: true}, 80},
}

// TestMutantsAreCaught: the invariants catch each failure mode of issue 20
// within the stated number of seeds, a shrunk report of the first failing
// seed still fails, and that seed passes without the mutant.
func TestMutantsAreCaught(t *testing.T) {
	for _, m := range mutants {
		t.Run(m.name, func(t *testing.T) {
			for s := uint64(1); s <= m.within; s++ {
				r := Run(s, m.cfg)
				if r.Violation == nil {
					continue
				}
				small := Shrink(s, m.cfg, r)
				if small.Violation == nil || len(small.Plan) > len(r.Plan) {
					t.Fatalf("shrinking seed %d lost the failure or grew the plan", s)
				}
				// The violation is the mutant's: the same seed passes
				// with the protocol as it is.
				if ok := Run(s, Config{}); ok.Violation != nil {
					t.Fatalf("seed %d fails without the mutant too: %v", s, ok.Violation)
				}
				t.Logf("caught at seed %d: %v (%d of %d faults kept by shrinking)", s, r.Violation, len(small.Plan), len(r.Plan))
				return
			}
			t.Fatalf("not caught within %d seeds", m.within)
		})
	}
}

// TestNoClockNoNetwork: the harness reads no clock, opens no socket, starts
// no goroutine and uses no global randomness: its only time is the virtual
// clock and its only chance the seeded generators.
func TestNoClockNoNetwork(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	banned := []string{"time.Now(", "time.Sleep(", "time.After(", "time.NewTimer(", "time.Since(", `"net"`, `"net/`, "go func", `"math/rand"`, "rand.Int(", "rand.IntN(", "rand.Float64(", `"os"`, `"sync"`}
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, s := range banned {
			if strings.Contains(string(b), s) {
				t.Errorf("%s uses %s: the simulation must take time and chance only from the virtual clock and the seed", f, s)
			}
		}
	}
	if checked < 5 {
		t.Fatalf("checked %d files: the check saw nothing", checked)
	}
}

// TestKnownGapDeletedShardReused documents a gap the simulation found: the
// top tier sends a deleted shard's revoke once. When it is lost (tierd's
// session outbox drops a message when full; here the network drops it) and
// the same shard ID is created again (a job deleted and submitted again)
// before the region that ran it restates what it holds, the new shard is
// placed in another region while the old one still runs it. This test fails
// once the gap is closed (re-send a deleted shard's revoke until acked):
// then make ReuseShardIDs the default.
func TestKnownGapDeletedShardReused(t *testing.T) {
	cfg := Config{ReuseShardIDs: true}
	for s := uint64(1); s <= 300; s++ {
		if r := Run(s, cfg); r.Violation != nil && r.Violation.Rule == RuleOneOwner {
			t.Logf("still open: seed %d: %v", s, r.Violation)
			return
		}
	}
	t.Skip("not reproduced within 300 seeds: if the gap is closed, make ReuseShardIDs the default")
}
