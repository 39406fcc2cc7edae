package ledger

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/strata-sched/strata/interfaces"
)

// Violation kinds.
const (
	KindOverlap = "overlap"
	KindEpoch   = "epoch"
	KindOrder   = "order"
	KindMissing = "missing"
)

// Violation is one broken rule found in the merged ledgers.
type Violation struct {
	Kind   string
	Shard  interfaces.ShardID
	Hosts  []string
	Detail string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s: shard %s on %s: %s", v.Kind, v.Shard, strings.Join(v.Hosts, ","), v.Detail)
}

// Interval is one run of a shard on a host: [Start, End) in wall nanoseconds; End
// is math.MaxInt64 while the shard still runs at the end of the ledger.
type Interval struct {
	Host       string
	Shard      interfaces.ShardID
	Epoch      interfaces.Epoch
	Start, End int64
}

// Open reports whether the interval has no stop.
func (iv Interval) Open() bool { return iv.End == math.MaxInt64 }

// Result is what Check found.
type Result struct {
	Events     int
	Hosts      []string
	Intervals  []Interval
	Violations []Violation
	// Running maps each shard that runs at the end of the ledgers to its host(s).
	Running map[interfaces.ShardID][]string
	// Torn lists the torn final lines left out (see TornLine): a host's
	// machine went down while it wrote them, and no host has opened the
	// ledger since.
	Torn []TornLine
}

// OK reports whether no violation was found.
func (r *Result) OK() bool { return len(r.Violations) == 0 }

// Err returns nil when OK and otherwise an error listing every violation.
func (r *Result) Err() error {
	if r.OK() {
		return nil
	}
	lines := make([]string, len(r.Violations))
	for i, v := range r.Violations {
		lines[i] = v.String()
	}
	return fmt.Errorf("ownership ledger: %d violation(s):\n%s", len(r.Violations), strings.Join(lines, "\n"))
}

// ExpectRunning adds a "missing" violation for every shard in expected that does
// not run on exactly one host at the end of the ledgers (two hosts are already an
// overlap).
func (r *Result) ExpectRunning(expected []interfaces.ShardID) {
	for _, s := range expected {
		if len(r.Running[s]) == 0 {
			r.Violations = append(r.Violations, Violation{Kind: KindMissing, Shard: s, Detail: "expected to run at the end but runs nowhere"})
		}
	}
}

// Check reads the ledger files of all hosts, merges them and checks them (see
// CheckEvents). Files that cannot be read or parsed are an error, not a
// violation.
func Check(files ...string) (*Result, error) {
	if len(files) == 0 {
		return nil, errors.New("ledger check: no files given")
	}
	var all []Event
	var torn []TornLine
	for _, f := range files {
		sc, err := readFile(f)
		if err != nil {
			return nil, err
		}
		all = append(all, sc.events...)
		if sc.torn != nil {
			torn = append(torn, *sc.torn)
		}
	}
	r := CheckEvents(all)
	r.Torn = torn
	return r, nil
}

// CheckEvents checks the events of any number of hosts. Each host's events are
// taken in sequence order.
func CheckEvents(events []Event) *Result {
	r := &Result{Events: len(events), Running: map[interfaces.ShardID][]string{}}
	byHost := map[string][]Event{}
	for _, e := range events {
		byHost[e.Host] = append(byHost[e.Host], e)
	}
	for h := range byHost {
		r.Hosts = append(r.Hosts, h)
	}
	sort.Strings(r.Hosts)

	// Per host: pair starts with stops into intervals.
	for _, h := range r.Hosts {
		evs := byHost[h]
		sort.Slice(evs, func(i, j int) bool { return evs[i].Seq < evs[j].Seq })
		open := map[interfaces.ShardID]Event{}
		for i, e := range evs {
			if i > 0 && e.Seq == evs[i-1].Seq {
				r.add(KindOrder, e.Shard, fmt.Sprintf("seq %d appears twice", e.Seq), h)
			} else if i > 0 && e.Seq != evs[i-1].Seq+1 {
				r.add(KindOrder, e.Shard, fmt.Sprintf("seq gap: %d follows %d (lines lost)", e.Seq, evs[i-1].Seq), h)
			}
			switch e.Event {
			case EventStart:
				if prev, ok := open[e.Shard]; ok {
					r.add(KindOverlap, e.Shard, fmt.Sprintf("started again (seq %d, epoch %d) while running since seq %d (epoch %d)", e.Seq, e.Epoch, prev.Seq, prev.Epoch), h)
					r.Intervals = append(r.Intervals, Interval{Host: h, Shard: e.Shard, Epoch: prev.Epoch, Start: prev.TS, End: e.TS})
				}
				open[e.Shard] = e
			case EventStop:
				s, ok := open[e.Shard]
				if !ok {
					r.add(KindOrder, e.Shard, fmt.Sprintf("stop (seq %d) without a start", e.Seq), h)
					continue
				}
				if s.Epoch != e.Epoch {
					r.add(KindOrder, e.Shard, fmt.Sprintf("stop (seq %d) has epoch %d, its start (seq %d) epoch %d", e.Seq, e.Epoch, s.Seq, s.Epoch), h)
				}
				if e.TS < s.TS {
					r.add(KindOrder, e.Shard, fmt.Sprintf("stop (seq %d) at %d is before its start at %d", e.Seq, e.TS, s.TS), h)
				}
				delete(open, e.Shard)
				r.Intervals = append(r.Intervals, Interval{Host: h, Shard: e.Shard, Epoch: s.Epoch, Start: s.TS, End: e.TS})
			default:
				r.add(KindOrder, e.Shard, fmt.Sprintf("unknown event %q (seq %d)", e.Event, e.Seq), h)
			}
		}
		for s, e := range open {
			r.Intervals = append(r.Intervals, Interval{Host: h, Shard: s, Epoch: e.Epoch, Start: e.TS, End: math.MaxInt64})
			r.Running[s] = append(r.Running[s], h)
		}
	}
	for s := range r.Running {
		sort.Strings(r.Running[s])
	}
	sort.Slice(r.Intervals, func(i, j int) bool {
		a, b := r.Intervals[i], r.Intervals[j]
		if a.Shard != b.Shard {
			return a.Shard < b.Shard
		}
		if a.Start != b.Start {
			return a.Start < b.Start
		}
		return a.Host < b.Host
	})

	// Across hosts: overlapping intervals and epoch order, per shard.
	for i := 0; i < len(r.Intervals); {
		j := i
		for j < len(r.Intervals) && r.Intervals[j].Shard == r.Intervals[i].Shard {
			j++
		}
		r.checkShard(r.Intervals[i:j])
		i = j
	}
	return r
}

func (r *Result) checkShard(ivs []Interval) {
	for a := 0; a < len(ivs); a++ {
		for b := a + 1; b < len(ivs) && ivs[b].Start < ivs[a].End; b++ {
			x, y := ivs[a], ivs[b]
			if x.Host == y.Host {
				continue // same-host overlaps are double starts, reported above
			}
			r.add(KindOverlap, x.Shard, fmt.Sprintf("runs on %s [%s) epoch %d and on %s [%s) epoch %d at once",
				x.Host, span(x), x.Epoch, y.Host, span(y), y.Epoch), x.Host, y.Host)
		}
	}
	// ivs is sorted by start time: each start's epoch must not go below any
	// earlier start's, and must exceed an earlier start's on another host.
	var maxEpoch interfaces.Epoch
	maxHosts := map[string]bool{}
	for _, iv := range ivs {
		switch {
		case iv.Epoch < maxEpoch:
			r.add(KindEpoch, iv.Shard, fmt.Sprintf("started on %s with epoch %d after a start with epoch %d", iv.Host, iv.Epoch, maxEpoch), iv.Host)
			continue
		case iv.Epoch == maxEpoch && len(maxHosts) > 0 && !maxHosts[iv.Host]:
			var others []string
			for h := range maxHosts {
				others = append(others, h)
			}
			sort.Strings(others)
			r.add(KindEpoch, iv.Shard, fmt.Sprintf("started on %s with epoch %d, already used by %s", iv.Host, iv.Epoch, strings.Join(others, ",")), iv.Host)
		case iv.Epoch > maxEpoch:
			maxEpoch = iv.Epoch
			maxHosts = map[string]bool{}
		}
		maxHosts[iv.Host] = true
	}
}

func span(iv Interval) string {
	if iv.Open() {
		return fmt.Sprintf("%d, running", iv.Start)
	}
	return fmt.Sprintf("%d, %d", iv.Start, iv.End)
}

func (r *Result) add(kind string, shard interfaces.ShardID, detail string, hosts ...string) {
	r.Violations = append(r.Violations, Violation{Kind: kind, Shard: shard, Hosts: hosts, Detail: detail})
}

func sortEvents(evs []Event) {
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].Host != evs[j].Host {
			return evs[i].Host < evs[j].Host
		}
		return evs[i].Seq < evs[j].Seq
	})
}

// LongestGap is the longest time in [from, to] that no interval of ivs (one
// shard's, sorted by start as Result.Intervals is) covers: how long the shard
// ran nowhere in that window (0: it ran throughout).
func LongestGap(ivs []Interval, from, to int64) time.Duration {
	var gap int64
	cur := from
	for _, iv := range ivs {
		if iv.End <= cur {
			continue
		}
		if iv.Start > to {
			break
		}
		if iv.Start > cur {
			gap = max(gap, iv.Start-cur)
		}
		cur = max(cur, iv.End)
		if cur >= to {
			break
		}
	}
	if cur < to {
		gap = max(gap, to-cur)
	}
	return time.Duration(gap)
}

// WindowStops is how the shards fared in one window [From, To]: of the
// shards running at From, how many ran nowhere for a while before To
// (Stopped), and the longest such gap.
type WindowStops struct {
	Name     string
	From, To int64
	Shards   int
	Stopped  int
	Longest  time.Duration
	// StoppedShards lists the shards that stopped, sorted.
	StoppedShards []interfaces.ShardID
}

// Stops measures a window: see WindowStops.
func (r *Result) Stops(name string, from, to int64) WindowStops {
	w := WindowStops{Name: name, From: from, To: to}
	byShard := map[interfaces.ShardID][]Interval{}
	for _, iv := range r.Intervals {
		byShard[iv.Shard] = append(byShard[iv.Shard], iv)
	}
	for s, ivs := range byShard {
		running := false
		for _, iv := range ivs {
			running = running || (iv.Start <= from && from < iv.End)
		}
		if !running {
			continue
		}
		w.Shards++
		if g := LongestGap(ivs, from, to); g > 0 {
			w.Stopped++
			w.Longest = max(w.Longest, g)
			w.StoppedShards = append(w.StoppedShards, s)
		}
	}
	sort.Slice(w.StoppedShards, func(i, j int) bool { return w.StoppedShards[i] < w.StoppedShards[j] })
	return w
}
