package proctest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/strata-sched/strata/coordinator/raftnode"
	"github.com/strata-sched/strata/interfaces"
)

// BenchmarkFailoverKill9 measures the time from kill -9 of the leader process of a
// 3-process group on 127.0.0.1 (LAN timeouts) to the first write the new leader
// accepts, over 10 trials (the killed replica is restarted between trials).
// Reported: median and max in ms. Run with -benchtime=1x: every iteration runs all
// 10 trials.
func BenchmarkFailoverKill9(b *testing.B) {
	const trials = 10
	for range b.N {
		c := Start(b, 3)
		var times []time.Duration
		for trial := range trials {
			li, err := c.Leader(20 * time.Second)
			if err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			c.Kill(li)
			d, err := firstWrite(c, trial, t0)
			if err != nil {
				b.Fatal(err)
			}
			times = append(times, d)
			if err := c.Restart(li); err != nil {
				b.Fatal(err)
			}
			if _, err := c.EnsureSame(30 * time.Second); err != nil {
				b.Fatal(err)
			}
		}
		slices.Sort(times)
		med := (times[trials/2-1] + times[trials/2]) / 2
		b.ReportMetric(float64(med.Microseconds())/1000, "median-ms")
		b.ReportMetric(float64(times[trials-1].Microseconds())/1000, "max-ms")
		b.ReportMetric(float64(times[0].Microseconds())/1000, "min-ms")
		b.Logf("failover times: %v", times)
		c.KillAll()
	}
	b.ReportMetric(0, "ns/op")
}

// firstWrite tries a small write on every running replica in turn (followers
// forward to the leader they know) until one is accepted, and returns the time
// since t0.
func firstWrite(c *Cluster, trial int, t0 time.Time) (time.Duration, error) {
	req := raftnode.ChildrenRequest{Children: []interfaces.Child{{ID: interfaces.ChildID(fmt.Sprintf("f%d", trial)), Tier: "host", Capacity: interfaces.Load{CPU: 1}}}}
	deadline := t0.Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, i := range c.Running() {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			err := c.Procs[i].Client.Call(ctx, "POST", "/v1/tier/children", req, nil)
			cancel()
			if err == nil {
				return time.Since(t0), nil
			}
			if !errors.Is(err, interfaces.ErrNotLeader) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, raftnode.ErrIndeterminate) {
				return 0, err
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	return 0, fmt.Errorf("trial %d: no write accepted within 30s of the kill", trial)
}
