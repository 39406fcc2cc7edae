package hostagent

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/strata-sched/strata/coordinator/hostagent/driver/synthetic"
	"github.com/strata-sched/strata/coordinator/hostagent/internal/fakeclock"
	"github.com/strata-sched/strata/interfaces"
)

// BenchmarkCoreAssign: the pure decision step for a first placement.
func BenchmarkCoreAssign(b *testing.B) {
	c := NewCore(LeaseConfig{}, nil, nil)
	if _, err := c.LeaseGrant(t0, time.Hour, nil); err != nil {
		b.Fatal(err)
	}
	specs := make([]interfaces.Shard, b.N)
	for i := range specs {
		specs[i] = spec(fmt.Sprintf("s%d", i))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Assign(t0, specs[i], 1); err != nil {
			b.Fatal(err)
		}
	}
}

func benchAgent(b *testing.B) (*Agent, *fakeclock.Clock) {
	dir := b.TempDir()
	clk := fakeclock.New(t0)
	d, _ := synthetic.New(synthetic.Config{Clock: clk, Seed: 1, Wave: 0.1, Noise: 0.05})
	a, err := Open(Config{Host: "h1", StorePath: filepath.Join(dir, "h1.db"), LedgerPath: filepath.Join(dir, "h1.ledger"),
		Driver: d, Clock: clk, Capacity: interfaces.Load{CPU: 64, Mem: 1 << 40}})
	if err != nil {
		b.Fatal(err)
	}
	if err := a.LeaseGrant(ctx, t0, time.Hour, nil); err != nil {
		b.Fatal(err)
	}
	return a, clk
}

// BenchmarkAgentAssignRevoke: one Assign and one Revoke through the executor
// with a real bbolt file (two fsynced transactions) and the ledger.
func BenchmarkAgentAssignRevoke(b *testing.B) {
	a, _ := benchAgent(b)
	defer a.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := fmt.Sprintf("s%d", i)
		if err := a.Assign(ctx, t0, spec(id), 1); err != nil {
			b.Fatal(err)
		}
		if err := a.Revoke(ctx, t0, interfaces.ShardID(id), 1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAgentReport1000: a report over 1,000 running synthetic shards (the
// agent is built without the store: Report reads only the core and driver).
func BenchmarkAgentReport1000(b *testing.B) {
	clk := fakeclock.New(t0)
	d, _ := synthetic.New(synthetic.Config{Clock: clk, Seed: 1, Wave: 0.1, Noise: 0.05})
	c := NewCore(LeaseConfig{}, nil, nil)
	if _, err := c.LeaseGrant(t0, time.Hour, nil); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		sp := spec(fmt.Sprintf("s%04d", i))
		if _, err := c.Assign(t0, sp, 1); err != nil {
			b.Fatal(err)
		}
		if err := d.Start(ctx, sp, 1); err != nil {
			b.Fatal(err)
		}
	}
	a := &Agent{cfg: Config{Host: "h1", Driver: d, Clock: clk, Capacity: interfaces.Load{CPU: 64, Mem: 1 << 40}}, core: c}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := a.Report(clk.Now())
		if len(r.Shards) != 1000 {
			b.Fatal(len(r.Shards))
		}
	}
}

// BenchmarkOpen10000: restart (open store and ledger, load 10,000 records).
func BenchmarkOpen10000(b *testing.B) {
	dir := b.TempDir()
	st, err := OpenStore(filepath.Join(dir, "h1.db"), "h1")
	if err != nil {
		b.Fatal(err)
	}
	// One transaction for the fixture (Put commits, and fsyncs, per record).
	err = st.db.Update(func(tx *bolt.Tx) error {
		for i := 0; i < 10000; i++ {
			sp := spec(fmt.Sprintf("s%05d", i))
			v, err := json.Marshal(storedRecord{V: recordVersion, Epoch: 1, Spec: sp})
			if err != nil {
				return err
			}
			if err := tx.Bucket(bucketShards).Put([]byte(sp.ID), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	st.Close()
	clk := fakeclock.New(t0)
	d, _ := synthetic.New(synthetic.Config{Clock: clk})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a, err := Open(Config{Host: "h1", StorePath: filepath.Join(dir, "h1.db"), LedgerPath: filepath.Join(dir, "h1.ledger"),
			Driver: d, Clock: clk, Capacity: interfaces.Load{CPU: 1}})
		if err != nil {
			b.Fatal(err)
		}
		if len(a.Held()) != 10000 {
			b.Fatal(len(a.Held()))
		}
		a.Close()
	}
}
