package chaos

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/strata-sched/strata/coordinator/hostagent/ledger"
	"github.com/strata-sched/strata/interfaces"
)

// Report is what a run found.
type Report struct {
	Config   Config
	Began    time.Time
	Faults   []Fault
	Ops      []Op
	Settled  time.Duration // how long after the last fault every shard ran once (or Config.Settle)
	Ledger   *ledger.Result
	Findings []Finding
	Stops    []Stop
	PerFault []FaultStop
	// Reconnects and Paused measure the static-stability and
	// worker-fencing goals per leader fault and per paused host.
	Reconnects []Reconnect
	Paused     []PausedWorkers
	// At the end: shards of live jobs that run on no host, the live jobs the
	// global tier no longer knows, and shards that run but belong to no live job.
	Lost, Orphans []interfaces.ShardID
	LostJobs      []string
	Expected      int
	// WorkersOff lists the live jobs' shards whose worker processes (exec
	// driver) do not beat exactly once at the end.
	WorkersOff    []interfaces.ShardID
	Workers       int // worker processes seen
	WorkerOverlap int // findings from the workers' heartbeats

	Listed map[string]int // the global tier's jobs at the end: job → shards

	want map[interfaces.ShardID]bool // the live jobs' shards at the end
}

// DoubleOwners counts the ledger's overlap and epoch violations and the
// workers' overlaps.
func (r *Report) DoubleOwners() (overlaps, epochs, workers int) {
	for _, v := range r.Ledger.Violations {
		switch v.Kind {
		case ledger.KindOverlap:
			overlaps++
		case ledger.KindEpoch:
			epochs++
		}
	}
	return overlaps, epochs, r.WorkerOverlap
}

// FailoverStops lists the stops a control-plane fault must not cause.
func (r *Report) FailoverStops() []Stop {
	var out []Stop
	for _, s := range r.Stops {
		if Failover(s.Cause) {
			out = append(out, s)
		}
	}
	return out
}

// save writes the operations log, the fault log and the report under dir.
func (r *Report) save(dir string) error {
	write := func(name string, v any) error {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		switch xs := v.(type) {
		case []Op:
			for _, x := range xs {
				if err := enc.Encode(x); err != nil {
					return err
				}
			}
		case []Fault:
			for _, x := range xs {
				if err := enc.Encode(x); err != nil {
					return err
				}
			}
		}
		return os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644)
	}
	listed, err := json.Marshal(r.Listed)
	if err != nil {
		return err
	}
	return errors.Join(write("ops.jsonl", r.Ops), write("faults.jsonl", r.Faults), os.WriteFile(filepath.Join(dir, "listed.json"), listed, 0o644),
		os.WriteFile(filepath.Join(dir, "report.txt"), []byte(r.String()), 0o644))
}

// String prints the report.
func (r *Report) String() string {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "== chaos report: seed %d, began %s UTC\n", c.Seed, r.Began.UTC().Format("2006-01-02 15:04:05"))
	fmt.Fprintf(&b, "topology: %d global replicas, %d regions × %d replicas, %d hosts (%s driver), lease %v, grace %v\n",
		c.Shape.Replicas, c.Shape.Regions, c.Shape.Replicas, c.Shape.Regions*c.Shape.HostsPerRegion, c.Shape.Driver, c.Shape.HostLease(), c.Shape.Timing.Grace)
	byKind := map[Kind]int{}
	failed := 0
	for _, f := range r.Faults {
		byKind[f.Kind]++
		if f.Err != "" {
			failed++
		}
	}
	fmt.Fprintf(&b, "faults injected: %d (%d could not be injected)\n", len(r.Faults), failed)
	opc := map[string][2]int{}
	for _, o := range r.Ops {
		v := opc[o.Kind]
		v[0]++
		if o.Acked() {
			v[1]++
		}
		opc[o.Kind] = v
	}
	fmt.Fprintf(&b, "operations: %d (", len(r.Ops))
	for i, k := range []string{OpSubmit, OpDelete, OpDrain, OpUndrain} {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d/%d acked", k, opc[k][1], opc[k][0])
	}
	b.WriteString(")\n")
	shards := map[interfaces.ShardID]bool{}
	for _, iv := range r.Ledger.Intervals {
		shards[iv.Shard] = true
	}
	fmt.Fprintf(&b, "shards checked: %d (%d ownership intervals, %d ledger events, %d worker processes)\n", len(shards), len(r.Ledger.Intervals), r.Ledger.Events, r.Workers)
	ov, ep, wk := r.DoubleOwners()
	fmt.Fprintf(&b, "double owners: %d ledger overlaps, %d epoch violations, %d worker overlaps\n", ov, ep, wk)
	fmt.Fprintf(&b, "lost shards: %d of %d expected (lost jobs %d), orphans running %d; settle %v\n", len(r.Lost), r.Expected, len(r.LostJobs), len(r.Orphans), r.Settled.Round(time.Second))
	if c.Shape.Driver == "exec" {
		fmt.Fprintf(&b, "workers at the end: %d of %d expected shards not beating exactly once\n", len(r.WorkersOff), r.Expected)
	}
	causes := map[string]int{}
	for _, s := range r.Stops {
		causes[s.Cause]++
	}
	var cs []string
	for k, v := range causes {
		cs = append(cs, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(cs)
	fs := r.FailoverStops()
	fmt.Fprintf(&b, "stops: %d (%s); stopped by a control-plane fault: %d\n", len(r.Stops), strings.Join(cs, ", "), len(fs))
	type agg struct {
		n, shards, stopped int
		longest            time.Duration
	}
	per := map[Kind]*agg{}
	for _, p := range r.PerFault {
		a := per[p.Fault.Kind]
		if a == nil {
			a = &agg{}
			per[p.Fault.Kind] = a
		}
		a.n++
		a.shards += p.Shards
		a.stopped += p.Stopped
		a.longest = max(a.longest, p.Longest)
	}
	overlaps := OverlapsPerFault(r.Ledger, r.Faults, c.Gap)
	failByKind := map[string]int{}
	for _, s := range fs {
		failByKind[s.Fault]++
	}
	b.WriteString("per fault kind: faults, shards running at their start, of those stopped (an ownership gap before heal + gap), the longest gap, failover stops and overlapping interval pairs in their windows\n")
	fmt.Fprintf(&b, "%-40s %6s %8s %8s %9s %10s %9s\n", "fault", "count", "shards", "stopped", "longest", "failover", "overlaps")
	for _, k := range Kinds {
		if a := per[k]; a != nil {
			fmt.Fprintf(&b, "%-40s %6d %8d %8d %9s %10d %9d\n", k, a.n, a.shards, a.stopped, a.longest.Round(100*time.Millisecond), failByKind[string(k)], overlaps[string(k)])
		}
	}
	if n, m := failByKind[""], overlaps[""]; n+m > 0 {
		fmt.Fprintf(&b, "%-40s %6s %8s %8s %9s %10d %9d\n", "(outside any fault window)", "", "", "", "", n, m)
	}
	if len(r.Reconnects) > 0 {
		b.WriteString("leader faults: new leader elected / last child reconnected, after the fault began (children reconnected of all):\n")
		for _, x := range r.Reconnects {
			fmt.Fprintf(&b, "  %2d %-40s held %-6v elected %-8s reconnected %-8s (%d of %d)\n", x.Fault.Seq, x.Fault.Kind, x.Fault.End.Sub(x.Fault.Start).Round(100*time.Millisecond),
				orDash(x.Elected), orDash(x.Slowest), x.Reconnected, x.Children)
		}
	}
	for _, p := range r.Paused {
		fmt.Fprintf(&b, "paused host %s (fault %d, held %v): its %d workers beat for up to %v after SIGSTOP (lease %v)\n", p.Fault.Target, p.Fault.Seq,
			p.Fault.End.Sub(p.Fault.Start).Round(100*time.Millisecond), p.Workers, p.RanFor.Round(10*time.Millisecond), c.Shape.HostLease())
	}
	b.WriteString("faults:\n")
	for _, f := range r.Faults {
		fmt.Fprintf(&b, "  %2d %s +%-6v %-40s %-22s held %v %s\n", f.Seq, f.Start.UTC().Format("15:04:05.000"), f.Start.Sub(r.Began).Round(time.Second), f.Kind, f.Target, f.End.Sub(f.Start).Round(100*time.Millisecond), f.Err)
	}
	const maxList = 25
	if len(r.Findings) > 0 {
		fmt.Fprintf(&b, "violations (%d, first %d):\n", len(r.Findings), min(maxList, len(r.Findings)))
		for _, f := range r.Findings[:min(maxList, len(r.Findings))] {
			fmt.Fprintf(&b, "  seen %s: %s\n", f.Seen.UTC().Format("15:04:05"), f.Text)
		}
	}
	if len(fs) > 0 {
		fmt.Fprintf(&b, "stopped by a control-plane fault (%d, first %d):\n", len(fs), min(maxList, len(fs)))
		for _, s := range fs[:min(maxList, len(fs))] {
			iv := s.Interval
			fmt.Fprintf(&b, "  %s on %s epoch %d stopped %s (ran from %s): %s [window: %s]\n", iv.Shard, iv.Host, iv.Epoch, stamp(iv.End), stamp(iv.Start), s.Cause, orNone(s.Fault))
		}
	}
	if len(r.Lost) > 0 {
		fmt.Fprintf(&b, "lost (first %d): %v\n", min(maxList, len(r.Lost)), r.Lost[:min(maxList, len(r.Lost))])
	}
	if len(r.LostJobs) > 0 {
		fmt.Fprintf(&b, "lost jobs: %v\n", r.LostJobs)
	}
	if len(r.Orphans) > 0 {
		fmt.Fprintf(&b, "orphans (first %d): %v\n", min(maxList, len(r.Orphans)), r.Orphans[:min(maxList, len(r.Orphans))])
	}
	return b.String()
}

func orDash(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return d.Round(10 * time.Millisecond).String()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
