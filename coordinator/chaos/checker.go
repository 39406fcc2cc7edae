package chaos

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strata-sched/strata/coordinator/hostagent/ledger"
	"github.com/strata-sched/strata/interfaces"
)

// workerRun is one worker process as its heartbeats show it: it was alive
// from First to Last (unix nanos).
type workerRun struct {
	Host, Shard string
	Epoch       uint64
	PID         int
	First, Last int64
}

type runKey struct {
	host, shard string
	epoch       uint64
	pid         int
}

// Finding is one broken rule, with when the checker first saw it.
type Finding struct {
	Seen time.Time
	Text string
}

// Checker reads the hosts' ledgers and the workers' heartbeat files, during
// the run (Poll) and at its end (Analyze).
type Checker struct {
	T     *Topology
	Start time.Time
	Logf  func(format string, args ...any)

	mu       sync.Mutex
	beatOff  map[string]int64
	beatTail map[string][]byte
	runs     map[runKey]*workerRun
	seen     map[string]bool
	findings []Finding
	last     *ledger.Result
}

// NewChecker returns a checker of t's hosts.
func NewChecker(t *Topology, start time.Time, logf func(string, ...any)) *Checker {
	return &Checker{T: t, Start: start, Logf: logf, beatOff: map[string]int64{}, beatTail: map[string][]byte{}, runs: map[runKey]*workerRun{}, seen: map[string]bool{}}
}

// Poll reads what the hosts and workers wrote since the last call and logs
// every double owner (ledger overlap, epoch reuse, worker overlap) not seen
// before. It returns the ledger check of everything so far.
func (c *Checker) Poll() (*ledger.Result, error) {
	var events []ledger.Event
	for _, h := range c.T.Hosts() {
		evs, err := ledger.ReadFile(c.T.LedgerPath(h))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		events = append(events, evs...)
		if err := c.readBeats(h); err != nil {
			return nil, err
		}
	}
	res := ledger.CheckEvents(events)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last = res
	for _, v := range res.Violations {
		if v.Kind == ledger.KindOverlap && c.deadHostOpen(v) {
			continue // judged once the host is back (see deadHostOpen)
		}
		// An interval still running is printed "running)" and later with
		// its end: the same violation.
		c.note(openEnd.ReplaceAllString(v.String(), ")"), v.String())
	}
	for _, o := range c.workerOverlaps() {
		c.note(o.key, o.text)
	}
	return res, nil
}

// deadHostOpen reports whether an overlap involves a shard still open in the
// ledger of a host whose process is down or paused: a killed agent's workers
// are fenced by their supervisors and its ledger's stop is written when it
// restarts (a "recovered" stop at the lease deadline); a paused agent cannot
// write the stops its supervisors make at the lease's end until it thaws (then
// with the time each worker ended). Either way the overlap may not be real:
// Poll judges it again once the host runs (the workers' heartbeats, checked
// apart, show any real one at once).
func (c *Checker) deadHostOpen(v ledger.Violation) bool {
	if !strings.Contains(v.Detail, "running)") {
		return false
	}
	for _, h := range v.Hosts {
		if p := c.T.Cluster.Hosts[h]; p != nil && (!p.Running() || p.Paused()) {
			return true
		}
	}
	return false
}

var openEnd = regexp.MustCompile(`, (running|[0-9]+)\)`)

// note logs a violation the first time its key is seen.
func (c *Checker) note(key, s string) {
	if c.seen[key] {
		return
	}
	c.seen[key] = true
	f := Finding{Seen: time.Now(), Text: s}
	c.findings = append(c.findings, f)
	c.Logf("VIOLATION at +%v: %s", f.Seen.Sub(c.Start).Round(time.Second), s)
}

// Findings lists every violation seen, in order.
func (c *Checker) Findings() []Finding {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Finding(nil), c.findings...)
}

// readBeats reads host's heartbeat file from where the last call stopped.
func (c *Checker) readBeats(host string) error {
	f, err := os.Open(c.T.BeatPath(host))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	c.mu.Lock()
	off, tail := c.beatOff[host], c.beatTail[host]
	c.mu.Unlock()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return err
	}
	data, err := io.ReadAll(bufio.NewReader(f))
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.beatOff[host] = off + int64(len(data))
	data = append(tail, data...)
	end := bytes.LastIndexByte(data, '\n')
	c.beatTail[host] = append([]byte(nil), data[end+1:]...)
	for _, line := range strings.Split(string(data[:end+1]), "\n") {
		fs := strings.Fields(line)
		if len(fs) != 4 {
			continue
		}
		ts, e1 := strconv.ParseInt(fs[0], 10, 64)
		ep, e2 := strconv.ParseUint(fs[2], 10, 64)
		pid, e3 := strconv.Atoi(fs[3])
		if e1 != nil || e2 != nil || e3 != nil {
			continue
		}
		k := runKey{host, fs[1], ep, pid}
		r := c.runs[k]
		if r == nil {
			r = &workerRun{Host: host, Shard: fs[1], Epoch: ep, PID: pid, First: ts, Last: ts}
			c.runs[k] = r
		}
		r.First, r.Last = min(r.First, ts), max(r.Last, ts)
	}
	return nil
}

// workerOverlaps lists shards whose worker processes on two hosts were alive
// at once (by their own heartbeats). Caller holds mu.
func (c *Checker) workerOverlaps() []overlap {
	byShard := map[string][]*workerRun{}
	for _, r := range c.runs {
		byShard[r.Shard] = append(byShard[r.Shard], r)
	}
	var out []overlap
	for s, rs := range byShard {
		sort.Slice(rs, func(i, j int) bool { return rs[i].First < rs[j].First })
		for i := range rs {
			for j := i + 1; j < len(rs) && rs[j].First < rs[i].Last; j++ {
				if rs[i].Host == rs[j].Host && rs[i].PID == rs[j].PID {
					continue
				}
				ov := time.Duration(min(rs[i].Last, rs[j].Last) - rs[j].First)
				head := fmt.Sprintf("worker overlap: shard %s: %s pid %d epoch %d and %s pid %d epoch %d",
					s, rs[i].Host, rs[i].PID, rs[i].Epoch, rs[j].Host, rs[j].PID, rs[j].Epoch)
				out = append(out, overlap{key: head, text: fmt.Sprintf("%s both beat for %v from %s", head, ov.Round(time.Millisecond), stamp(rs[j].First))})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

// overlap is a worker overlap: key names it, text says how long so far.
type overlap struct{ key, text string }

// WorkerRuns returns the number of worker processes seen and how many of
// them beat within window before now.
func (c *Checker) WorkerRuns(now time.Time, window time.Duration) (total, alive int, aliveShards map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	aliveShards = map[string]int{}
	for _, r := range c.runs {
		total++
		if now.UnixNano()-r.Last < int64(window) {
			alive++
			aliveShards[r.Shard]++
		}
	}
	return total, alive, aliveShards
}

func stamp(ns int64) string { return time.Unix(0, ns).UTC().Format("15:04:05.000") }

// Stop causes: why an interval of a shard ended.
const (
	CauseDeleted  = "deleted"
	CauseDrained  = "drained"
	CauseHost     = "host fault"
	CauseMoved    = "moved"
	CauseResumed  = "fenced, resumed on the same host"
	CauseFenced   = "fenced with the host's other shards"
	CauseNoReturn = "stopped, never restarted"
)

// Handoff is the longest gap between a shard's stop on one host and its start
// on another, at a newer epoch, that counts as a move: revoke, ack, commit and
// Assign take tens of milliseconds (a few hundred on a loaded machine), while a
// fenced host's shards start elsewhere only after its lease, stop budget,
// drift margin and grace have passed (seconds).
const Handoff = time.Second

// Failover reports whether a stop cause is one a control-plane fault must not
// produce.
func Failover(cause string) bool {
	return cause == CauseResumed || cause == CauseFenced || cause == CauseNoReturn
}

// Stop is one classified end of an ownership interval.
type Stop struct {
	Interval ledger.Interval
	Cause    string
	Fault    string // the fault whose window holds the stop ("" for none)
}

// Slack is how long after a fault heals its effects may still show (a lease,
// grace, a control round and reconnect back-off).
type Slack struct{ Host, ControlPlane time.Duration }

// Classify gives each interval that ended before cutoff a cause, from the
// operations log and the faults.
func Classify(res *ledger.Result, ops []Op, faults []Fault, cutoff time.Time, slack Slack) []Stop {
	deleted := map[string]int64{}
	type span struct{ from, to int64 }
	drains := map[string][]span{}
	open := map[string]int64{}
	for _, o := range ops {
		switch o.Kind {
		case OpDelete:
			if d := deleted[o.Target]; d == 0 || o.Start.UnixNano() < d {
				deleted[o.Target] = o.Start.UnixNano() // the first try that may have landed
			}
		case OpDrain:
			if _, ok := open[o.Target]; !ok {
				open[o.Target] = o.Start.UnixNano()
			}
		case OpUndrain:
			if from, ok := open[o.Target]; ok {
				drains[o.Target] = append(drains[o.Target], span{from, o.End.UnixNano() + int64(slack.Host)})
				delete(open, o.Target)
			}
		}
	}
	for h, from := range open {
		drains[h] = append(drains[h], span{from, math.MaxInt64})
	}
	hostFault := func(h string, t int64) string {
		for _, f := range faults {
			if !f.Kind.HostFault() || f.Err != "" || f.Start.UnixNano() > t || t > f.End.Add(slack.Host).UnixNano() {
				continue
			}
			for _, x := range f.Hosts {
				if x == h {
					return string(f.Kind)
				}
			}
		}
		return ""
	}
	// windowOf is the latest fault begun before t whose window holds t.
	windowOf := func(t int64) string {
		for i := len(faults) - 1; i >= 0; i-- {
			if f := faults[i]; f.Err == "" && f.Start.UnixNano() <= t && t <= f.End.Add(slack.ControlPlane).UnixNano() {
				return string(f.Kind)
			}
		}
		return ""
	}
	byShard := map[interfaces.ShardID][]ledger.Interval{}
	byHost := map[string][]ledger.Interval{}
	for _, iv := range res.Intervals {
		byShard[iv.Shard] = append(byShard[iv.Shard], iv)
		byHost[iv.Host] = append(byHost[iv.Host], iv)
	}
	// fenced: of what the host ran 1.5 s before the stop, it stopped (nearly)
	// everything within 1.5 s either side of it.
	fenced := func(iv ledger.Interval) bool {
		const win = int64(1500 * time.Millisecond)
		running, stopped := 0, 0
		from := iv.End - win
		for _, o := range byHost[iv.Host] {
			if o.Start < from && o.End > from {
				running++
				if o.End <= iv.End+win {
					stopped++
				}
			}
		}
		return running >= 2 && float64(stopped) >= 0.8*float64(running)
	}
	var out []Stop
	for _, iv := range res.Intervals {
		if iv.Open() || iv.End > cutoff.UnixNano() {
			continue
		}
		st := Stop{Interval: iv, Fault: windowOf(iv.End)}
		job := jobOf(iv.Shard)
		switch {
		case deleted[job] != 0 && deleted[job] <= iv.End:
			st.Cause = CauseDeleted
		case inSpans(drains[iv.Host], iv.End, func(s span) (int64, int64) { return s.from, s.to }):
			st.Cause = CauseDrained
		case hostFault(iv.Host, iv.End) != "":
			st.Cause, st.Fault = CauseHost, hostFault(iv.Host, iv.End)
		default:
			var next *ledger.Interval
			for _, o := range byShard[iv.Shard] {
				if o.Start >= iv.End && (o.Host != iv.Host || o.Start != iv.Start) {
					o := o
					next = &o
					break
				}
			}
			switch {
			case next == nil && deleted[job] != 0 && deleted[job] <= iv.End+int64(Handoff):
				// A move under way when the job was deleted: the revoke
				// stopped it, the delete kept it from starting elsewhere.
				st.Cause = CauseMoved
			case next == nil:
				st.Cause = CauseNoReturn
			case next.Host == iv.Host && next.Epoch == iv.Epoch:
				st.Cause = CauseResumed
			case next.Host != iv.Host && next.Epoch > iv.Epoch && next.Start-iv.End <= int64(Handoff):
				// Started elsewhere at a newer epoch at once: a revoke stopped
				// it, so a move, even when the same round moved the host's
				// other shards too. A fence cannot be followed so soon: the
				// parent re-places a fenced host's shards only after the
				// host's lease, its stop budget, the drift margin and grace.
				st.Cause = CauseMoved
			case fenced(iv):
				st.Cause = CauseFenced
			default:
				st.Cause = CauseMoved
			}
		}
		out = append(out, st)
	}
	return out
}

func inSpans[S any](spans []S, t int64, f func(S) (int64, int64)) bool {
	for _, s := range spans {
		if from, to := f(s); from <= t && t <= to {
			return true
		}
	}
	return false
}

// jobOf is the job of a shard named "<job>/<i>".
func jobOf(s interfaces.ShardID) string {
	if i := strings.LastIndexByte(string(s), '/'); i >= 0 {
		return string(s[:i])
	}
	return string(s)
}

// FaultStop is how long shards stopped around one fault: of the shards that
// ran when it began (and were neither deleted nor on a drained host), how many
// had a gap in their ownership in [start, end+observe], and the longest gap.
type FaultStop struct {
	Fault   Fault
	Shards  int
	Stopped int
	Longest time.Duration
}

// StopsPerFault measures each fault's gaps; observe is how long after the heal
// a gap still counts.
func StopsPerFault(res *ledger.Result, ops []Op, faults []Fault, observe time.Duration) []FaultStop {
	deleted := map[string]int64{}
	drainedAt := map[string][]int64{}
	for _, o := range ops {
		switch o.Kind {
		case OpDelete:
			if d := deleted[o.Target]; d == 0 || o.Start.UnixNano() < d {
				deleted[o.Target] = o.Start.UnixNano() // the first try that may have landed
			}
		case OpDrain, OpUndrain:
			drainedAt[o.Target] = append(drainedAt[o.Target], o.Start.UnixNano())
		}
	}
	byShard := map[interfaces.ShardID][]ledger.Interval{}
	for _, iv := range res.Intervals {
		byShard[iv.Shard] = append(byShard[iv.Shard], iv)
	}
	var out []FaultStop
	for _, f := range faults {
		if f.Err != "" {
			continue
		}
		from, to := f.Start.UnixNano(), f.End.Add(observe).UnixNano()
		fs := FaultStop{Fault: f}
		for s, ivs := range byShard {
			if d := deleted[jobOf(s)]; d != 0 && d <= to {
				continue
			}
			var at *ledger.Interval
			for i := range ivs {
				if ivs[i].Start <= from && from < ivs[i].End {
					at = &ivs[i]
				}
			}
			if at == nil || touched(drainedAt[at.Host], from-int64(30*time.Second), to) {
				continue
			}
			fs.Shards++
			if g := ledger.LongestGap(ivs, from, to); g > 0 {
				fs.Stopped++
				fs.Longest = max(fs.Longest, g)
			}
		}
		out = append(out, fs)
	}
	return out
}

func touched(ts []int64, from, to int64) bool {
	for _, t := range ts {
		if from <= t && t <= to {
			return true
		}
	}
	return false
}

// OverlapsPerFault attributes every pair of intervals of one shard on two
// hosts that intersect to the latest fault begun before the pair's overlap
// began, within that fault's window (start to heal + after): fault kind →
// pairs ("" for none).
func OverlapsPerFault(res *ledger.Result, faults []Fault, after time.Duration) map[string]int {
	out := map[string]int{}
	byShard := map[interfaces.ShardID][]ledger.Interval{}
	for _, iv := range res.Intervals {
		byShard[iv.Shard] = append(byShard[iv.Shard], iv)
	}
	for _, ivs := range byShard { // sorted by start (CheckEvents)
		for a := range ivs {
			for b := a + 1; b < len(ivs) && ivs[b].Start < ivs[a].End; b++ {
				if ivs[a].Host == ivs[b].Host {
					continue
				}
				kind := ""
				for i := len(faults) - 1; i >= 0; i-- {
					if f := faults[i]; f.Err == "" && f.Start.UnixNano() <= ivs[b].Start && ivs[b].Start <= f.End.Add(after).UnixNano() {
						kind = string(f.Kind)
						break
					}
				}
				out[kind]++
			}
		}
	}
	return out
}
