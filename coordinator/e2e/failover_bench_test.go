package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/hostagent/ledger"
	"github.com/strata-sched/strata/interfaces/wire"
)

// BenchmarkFailover measures leader failover on a real multi-process
// hierarchy (3 global replicas, 2 regions × 3 replicas, 2 hosts per region,
// the tier defaults: lease 4s, report interval 1s): for a leader kill
// (SIGKILL) and a leader pause (SIGSTOP) at the global tier and at the region
// running most of the 100 shards,
// per trial, the time from the new leader's election (first seen in a
// surviving replica's Status) to all the tier's children having a session
// with it (its Status), and the shards stopped on hosts (ledger stop events
// not explained by a move) from the fault until a lease after the
// reconnection. Each trial starts once the ledgers have been quiet for 3s. It prints a table
// (docs/reliability.md, "Failover measurements"):
//
//	STRATA_FAILOVER_TRIALS=10 go test -run '^$' -bench Failover -benchtime 1x -timeout 60m ./coordinator/e2e
//
// STRATA_FAILOVER_BIN runs another strata binary (e.g. one built from an older
// commit) under the same harness; STRATA_FAILOVER_ONLY=tier/fault (e.g.
// global/pause) runs one row; STRATA_FAILOVER_KEEP=1 keeps the data and logs.
// Only loopback is used.
func BenchmarkFailover(b *testing.B) {
	v := os.Getenv("STRATA_FAILOVER_TRIALS")
	if v == "" {
		// An opt-in measurement (15 processes, minutes): `make bench` runs
		// every benchmark and must not start it unasked.
		b.Skip("set STRATA_FAILOVER_TRIALS (e.g. 10) to run the failover measurement")
	}
	trials, err := strconv.Atoi(v)
	if err != nil || trials < 1 {
		b.Fatalf("STRATA_FAILOVER_TRIALS: must be a positive integer (got %q)", v)
	}
	bin := strataBin
	if v := os.Getenv("STRATA_FAILOVER_BIN"); v != "" {
		bin = v
	}
	dir, err := os.MkdirTemp("", "strata-failover-")
	if err != nil {
		b.Fatal(err)
	}
	keep := os.Getenv("STRATA_FAILOVER_KEEP") != ""
	only := os.Getenv("STRATA_FAILOVER_ONLY")
	defer func() {
		if keep {
			b.Logf("data and logs kept under %s", dir)
			return
		}
		os.RemoveAll(dir)
	}()
	spec := Spec{Replicas: 3, Regions: 2, HostsPerRegion: 2, HostCPU: 32}
	c, err := NewCluster(dir, bin, spec)
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Start(); err != nil {
		b.Fatal(err)
	}
	defer c.Stop()
	ctx := context.Background()
	const shards = 100
	if err := waitFor(60*time.Second, func() error {
		a, done, err := Admin(c.Global[0])
		if err != nil {
			return err
		}
		defer done()
		_, err = a.SubmitJob(ctx, &wire.SubmitJobRequest{Job: &wire.JobSpec{Id: "fo", Parallelism: shards,
			ShardTemplate: &wire.Shard{Load: &wire.Load{Cpu: 0.2, Mem: 64 << 20, Tasks: 1}}}})
		if err != nil && isConflict(err) {
			return nil
		}
		return err
	}); err != nil {
		keep = true
		b.Fatal(err)
	}
	if err := waitFor(120*time.Second, func() error { return allPlaced(ctx, c, shards) }); err != nil {
		keep = true
		b.Fatal(err)
	}
	// The region tier's trials fault the region that runs most shards.
	busiest, most := "", -1
	if p, err := placement(ctx, c); err == nil {
		per := map[string]int{}
		for _, h := range p {
			per[c.HostRegion[h]]++
		}
		for r, n := range per {
			if n > most || n == most && r < busiest {
				busiest, most = r, n
			}
		}
	}
	if busiest == "" {
		busiest = "region-1"
	}
	fmt.Printf("the region tier's trials fault %s (%d of %d shards)\n", busiest, most, shards)
	const lease = 4 * time.Second // the hosts' lease (tier default); the regions' is longer
	type row struct {
		tier, fault string
		reconnect   []time.Duration
		stopped     []int
		failed      int
	}
	var rows []*row
	b.ResetTimer()
	for _, tier := range []string{"global", busiest} {
		group := c.Global
		if tier != "global" {
			group = c.Regions[tier]
		}
		for _, fault := range []string{"kill", "pause"} {
			if only != "" && only != tier+"/"+fault {
				continue
			}
			r := &row{tier: tier, fault: fault}
			rows = append(rows, r)
			for i := 0; i < trials; i++ {
				t0 := time.Now()
				took, stopped, err := failoverTrial(ctx, c, group, fault, lease)
				if err != nil {
					fmt.Printf("%s %s trial %d (from %s): %v\n", tier, fault, i+1, t0.Format("15:04:05.000"), err)
					r.failed++
					r.stopped = append(r.stopped, stopped)
					keep = true
					continue
				}
				fmt.Printf("%s %s trial %d (from %s): reconnected %v after the election, %d shards stopped\n", tier, fault, i+1, t0.Format("15:04:05.000"), took.Round(time.Millisecond), stopped)
				r.reconnect = append(r.reconnect, took)
				r.stopped = append(r.stopped, stopped)
			}
		}
	}
	b.StopTimer()
	var out strings.Builder
	fmt.Fprintf(&out, "| tier | fault | trials | reconnect after election: median | max | shards stopped, not moved (sum over trials) | trials not reconnected within 20s |\n|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		med, mx := "—", "—"
		if len(r.reconnect) > 0 {
			s := append([]time.Duration(nil), r.reconnect...)
			sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
			med, mx = s[len(s)/2].Round(time.Millisecond).String(), s[len(s)-1].Round(time.Millisecond).String()
		}
		sum := 0
		for _, n := range r.stopped {
			sum += n
		}
		fmt.Fprintf(&out, "| %s | %s | %d | %s | %s | %d | %d |\n", r.tier, r.fault, trials, med, mx, sum, r.failed)
	}
	fmt.Print(out.String())
}

// failoverTrial faults the leader of group, measures the time from the new
// leader's election to all its children connected to it, restores the old
// leader, and counts the shards stopped on hosts from the fault until a lease
// after the reconnection.
func failoverTrial(ctx context.Context, c *Cluster, group []*Proc, fault string, lease time.Duration) (time.Duration, int, error) {
	// A steady start: the hosts' ledgers quiet (no balancing moves under
	// way) and a leader with every child connected.
	_ = waitFor(60*time.Second, func() error { return ledgersQuietFor(c, 3*time.Second) })
	var old *Proc
	var oldTerm uint64
	if err := waitFor(60*time.Second, func() error {
		l, term, err := leaderOf(ctx, group, nil)
		if err != nil {
			return err
		}
		if err := allConnected(ctx, l); err != nil {
			return err
		}
		old, oldTerm = l, term
		return nil
	}); err != nil {
		return 0, 0, fmt.Errorf("no steady leader before the fault: %w", err)
	}
	start := time.Now()
	switch fault {
	case "kill":
		old.Kill()
	case "pause":
		if err := old.Pause(); err != nil {
			return 0, 0, err
		}
	}
	restore := func() error {
		if fault == "kill" {
			return old.Start(c.Bin)
		}
		return old.Resume()
	}
	// The election: first seen in a surviving replica's Status.
	var elected time.Time
	var leader *Proc
	err := pollUntil(30*time.Second, 10*time.Millisecond, func() error {
		l, term, err := leaderOf(ctx, group, old)
		if err != nil {
			return err
		}
		if term <= oldTerm {
			return fmt.Errorf("term %d not past %d", term, oldTerm)
		}
		leader, elected = l, time.Now()
		return nil
	})
	if err != nil {
		_ = restore()
		return 0, 0, fmt.Errorf("no new leader: %w", err)
	}
	var connected time.Time
	err = pollUntil(reconnectLimit, 10*time.Millisecond, func() error {
		if err := allConnected(ctx, leader); err != nil {
			return err
		}
		connected = time.Now()
		return nil
	})
	if err != nil {
		_ = restore()
		// Count what stopped meanwhile all the same.
		time.Sleep(time.Second)
		rerr := restore()
		stopped, _ := stopsSince(c, start)
		time.Sleep(2 * time.Second)
		return 0, stopped, fmt.Errorf("children not reconnected to %s within %v (%d shards stopped; restore: %v): %w", leader.Name, reconnectLimit, stopped, rerr, err)
	}
	// Wait a lease (and a margin) past the reconnection: a host that was
	// going to fence has done so by then. Then bring the old leader back.
	time.Sleep(lease + time.Second)
	if err := restore(); err != nil {
		return 0, 0, err
	}
	stopped, err := stopsSince(c, start)
	if err != nil {
		return 0, 0, err
	}
	// Let the restored replica catch up before the next trial.
	time.Sleep(2 * time.Second)
	return connected.Sub(elected), stopped, nil
}

// reconnectLimit is how long a trial waits for the children to reconnect
// before it counts as failed (children that never reconnect to a paused
// leader's successor would otherwise hold the run for ever).
const reconnectLimit = 20 * time.Second

// leaderOf returns the replica of group (skipping skip) that reports itself
// the leader, with its term. Each Status call has a short deadline, so a
// paused replica costs little.
func leaderOf(ctx context.Context, group []*Proc, skip *Proc) (*Proc, uint64, error) {
	for _, p := range group {
		if p == skip || !p.Running() {
			continue
		}
		st, err := instanceStatus(ctx, p)
		if err != nil {
			continue
		}
		if st.LeaderAddress == p.GRPC {
			return p, st.Term, nil
		}
	}
	return nil, 0, fmt.Errorf("no replica reports itself the leader")
}

func instanceStatus(ctx context.Context, p *Proc) (*wire.InstanceStatus, error) {
	a, done, err := Admin(p)
	if err != nil {
		return nil, err
	}
	defer done()
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	st, err := a.Status(cctx, &wire.StatusRequest{})
	if err != nil {
		return nil, err
	}
	if len(st.Tiers) == 0 || len(st.Tiers[0].Instances) == 0 {
		return nil, fmt.Errorf("%s: empty status", p.Name)
	}
	return st.Tiers[0].Instances[0], nil
}

// allConnected checks that leader leads and every child it knows has a
// session with it.
func allConnected(ctx context.Context, leader *Proc) error {
	st, err := instanceStatus(ctx, leader)
	if err != nil {
		return err
	}
	if st.LeaderAddress != leader.GRPC {
		return fmt.Errorf("%s no longer leads", leader.Name)
	}
	if len(st.Children) == 0 {
		return fmt.Errorf("%s knows no children", leader.Name)
	}
	for _, ch := range st.Children {
		if !ch.Connected {
			return fmt.Errorf("%s: child %s not connected", leader.Name, ch.Child.GetId())
		}
	}
	return nil
}

// stopsSince counts the stop events in the hosts' ledgers at or after t,
// leaving out the stops of moves: a stop followed, in the window, by a start
// of the same shard on another host under a newer epoch (the balancer moved
// it; the issue counts only stops that no move, drain or delete explains).
func stopsSince(c *Cluster, t time.Time) (int, error) {
	evs, err := ledgerEvents(c)
	if err != nil {
		return 0, err
	}
	n := 0
	for i, e := range evs {
		if e.Event != ledger.EventStop || e.TS < t.UnixNano() {
			continue
		}
		moved := false
		for _, f := range evs[i+1:] {
			if f.Event == ledger.EventStart && f.Shard == e.Shard && f.Host != e.Host && f.Epoch > e.Epoch {
				moved = true
				break
			}
		}
		if !moved {
			n++
		}
	}
	return n, nil
}

// ledgerEvents reads every host's ledger, in time order.
func ledgerEvents(c *Cluster) ([]ledger.Event, error) {
	var all []ledger.Event
	for _, h := range c.Hosts {
		evs, err := ledger.ReadFile(filepath.Join(h.DataDir, "ledger.jsonl"))
		if err != nil {
			return nil, err
		}
		all = append(all, evs...)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].TS < all[j].TS })
	return all, nil
}

// ledgersQuietFor reports an error unless no host recorded anything for d.
func ledgersQuietFor(c *Cluster, d time.Duration) error {
	evs, err := ledgerEvents(c)
	if err != nil {
		return err
	}
	if n := len(evs); n > 0 {
		if since := time.Since(time.Unix(0, evs[n-1].TS)); since < d {
			return fmt.Errorf("last ledger event %v ago", since)
		}
	}
	return nil
}

// waitFor retries f every 100ms until it succeeds or limit passes.
func waitFor(limit time.Duration, f func() error) error {
	return pollUntil(limit, 100*time.Millisecond, f)
}

func pollUntil(limit, every time.Duration, f func() error) error {
	deadline := time.Now().Add(limit)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(every)
	}
}
