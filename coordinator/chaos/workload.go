package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/strata-sched/strata/coordinator/e2e"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

// Operation kinds.
const (
	OpSubmit  = "submit"
	OpDelete  = "delete"
	OpDrain   = "drain"
	OpUndrain = "undrain"
)

// Op is one admin call of the workload: the operations log the checker
// correlates stops with. A call whose outcome is unknown (a timeout) may have
// taken effect: the checker treats it as done from Start.
type Op struct {
	Seq        int
	Kind       string
	Target     string // job or host
	Shards     int    // submit: parallelism
	Start, End time.Time
	Err        string // empty: acknowledged
}

// Acked reports whether the call was acknowledged.
func (o Op) Acked() bool { return o.Err == "" }

// Workload submits and deletes jobs and drains and undrains hosts, one call
// at a time at Every, through the Admin API of whichever replica answers.
type Workload struct {
	T         *Topology
	Seed      uint64
	Every     time.Duration
	MinJobs   int
	MaxJobs   int
	MaxShards int // per job (≥ 1)
	// ShardBudget caps the shards of live jobs, so that every shard fits even
	// with a host drained and one down ("nothing lost" holds only while
	// enough capacity exists).
	ShardBudget int

	mu      sync.Mutex
	ops     []Op
	live    []string             // submitted (acked or not), not deleted
	sizes   map[string]int       // job → shards
	drained map[string]time.Time // host → when its drain was issued
}

// Ops returns a copy of the operations log.
func (w *Workload) Ops() []Op {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Op(nil), w.ops...)
}

// Run issues operations until ctx ends, then undrains every drained host.
func (w *Workload) Run(ctx context.Context) {
	rng := rand.New(rand.NewPCG(w.Seed, 7))
	w.drained = map[string]time.Time{}
	w.sizes = map[string]int{}
	tick := time.NewTicker(w.Every)
	defer tick.Stop()
	next := 0
	for {
		select {
		case <-ctx.Done():
			w.undrainAll()
			return
		case <-tick.C:
		}
		w.mu.Lock()
		nlive, ndrained := len(w.live), len(w.drained)
		shards := 0
		for _, j := range w.live {
			shards += w.sizes[j]
		}
		w.mu.Unlock()
		p := rng.Float64()
		size := 1 + rng.IntN(w.MaxShards)
		switch {
		case shards+size <= w.ShardBudget && (nlive < w.MinJobs || (p < 0.45 && nlive < w.MaxJobs)):
			next++
			w.submit(ctx, fmt.Sprintf("j%05d", next), size, rng)
		case p < 0.80 && nlive > 0:
			w.mu.Lock()
			i := rng.IntN(len(w.live))
			job := w.live[i]
			w.live = append(w.live[:i], w.live[i+1:]...)
			w.mu.Unlock()
			op := w.call(ctx, OpDelete, job, 0, w.globalReplica(rng), func(ctx context.Context, a wire.AdminClient) error {
				_, err := a.DeleteJob(ctx, &wire.DeleteJobRequest{Job: job})
				return err
			})
			if !op.Acked() {
				// It may have landed or not: keep the job live (its shards
				// count against the budget) and delete it again later;
				// NotFound then means an earlier try landed.
				w.mu.Lock()
				w.live = append(w.live, job)
				w.mu.Unlock()
			}
		case p < 0.90 && ndrained == 0:
			hosts := w.T.Hosts()
			h := hosts[rng.IntN(len(hosts))]
			w.mu.Lock()
			w.drained[h] = time.Now()
			w.mu.Unlock()
			w.hostCall(ctx, OpDrain, h, rng)
		case ndrained > 0:
			w.mu.Lock()
			var h string
			for x, at := range w.drained {
				if time.Since(at) > 10*time.Second {
					h = x
				}
			}
			if h != "" {
				delete(w.drained, h)
			}
			w.mu.Unlock()
			if h != "" && !w.hostCall(ctx, OpUndrain, h, rng).Acked() {
				w.mu.Lock()
				w.drained[h] = time.Time{} // try again at the next turn
				w.mu.Unlock()
			}
		}
	}
}

func (w *Workload) submit(ctx context.Context, job string, n int, rng *rand.Rand) {
	w.mu.Lock()
	w.live = append(w.live, job)
	w.sizes[job] = n
	w.mu.Unlock()
	w.call(ctx, OpSubmit, job, n, w.globalReplica(rng), func(ctx context.Context, a wire.AdminClient) error {
		_, err := a.SubmitJob(ctx, &wire.SubmitJobRequest{Job: &wire.JobSpec{Id: job, Parallelism: int64(n),
			ShardTemplate: &wire.Shard{Load: &wire.Load{Cpu: 0.5, Mem: 256 << 20, Tasks: 1}, StateBytes: 1 << 20}}})
		return err
	})
}

func (w *Workload) hostCall(ctx context.Context, kind, host string, rng *rand.Rand) Op {
	group := w.T.Group(w.T.Cluster.HostRegion[host])
	return w.call(ctx, kind, host, 0, group[rng.IntN(len(group))], func(ctx context.Context, a wire.AdminClient) error {
		if kind == OpDrain {
			_, err := a.Drain(ctx, &wire.DrainRequest{Child: host})
			return err
		}
		_, err := a.Undrain(ctx, &wire.UndrainRequest{Child: host})
		return err
	})
}

// undrainAll undrains what is still drained, retrying each host for a while
// (faults have stopped by then).
func (w *Workload) undrainAll() {
	w.mu.Lock()
	var hosts []string
	for h := range w.drained {
		hosts = append(hosts, h)
	}
	w.drained = map[string]time.Time{}
	w.mu.Unlock()
	sort.Strings(hosts)
	rng := rand.New(rand.NewPCG(w.Seed, 8))
	for _, h := range hosts {
		for try := 0; try < 10; try++ {
			if w.hostCall(context.Background(), OpUndrain, h, rng).Acked() {
				break
			}
			time.Sleep(time.Second)
		}
	}
}

func (w *Workload) globalReplica(rng *rand.Rand) *e2e.Proc {
	g := w.T.Cluster.Global
	return g[rng.IntN(len(g))]
}

// call runs one admin call with a deadline, logs it and returns its entry.
func (w *Workload) call(ctx context.Context, kind, target string, shards int, p *e2e.Proc, f func(context.Context, wire.AdminClient) error) Op {
	op := Op{Kind: kind, Target: target, Shards: shards, Start: time.Now()}
	a, done, err := e2e.Admin(p)
	if err == nil {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err = f(cctx, a)
		cancel()
		done()
	}
	if err != nil {
		op.Err = err.Error()
		if kind == OpSubmit && errors.Is(wire.FromStatus(err), interfaces.ErrConflict) {
			op.Err = "" // an earlier attempt landed
		}
		if kind == OpDelete && errors.Is(wire.FromStatus(err), interfaces.ErrNotFound) {
			op.Err = "" // an earlier attempt landed
		}
	}
	op.End = time.Now()
	w.mu.Lock()
	op.Seq = len(w.ops) + 1
	w.ops = append(w.ops, op)
	w.mu.Unlock()
	return op
}
