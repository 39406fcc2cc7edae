package chaos

import (
	"bufio"
	"os"
	"strings"
	"time"

	"github.com/strata-sched/strata/coordinator/e2e"
)

// Reconnect is how a leader fault's children found a leader again: the
// first "became leader" in the group's logs after the fault began, and each
// child's first "session: connected to" after it (within heal + gap).
type Reconnect struct {
	Fault       Fault
	Children    int
	Reconnected int
	Elected     time.Duration // after Fault.Start; 0 when no new election was logged
	Slowest     time.Duration // the last child's reconnect, after Fault.Start
}

// leaderFault reports the group a fault hits the leader of ("" for none)
// and whether its children are that group's hosts.
func leaderFault(k Kind) (global bool, ok bool) {
	switch k {
	case KillGlobalLeader, PauseGlobalLeader, IsolateGlobalLeader, OrphanGlobalChildren:
		return true, true
	case KillRegionLeader, PauseRegionLeader, IsolateRegionLeader, OrphanRegionChildren:
		return false, true
	}
	return false, false
}

// Reconnects measures every leader fault from the processes' logs.
func Reconnects(t *Topology, faults []Fault, gap time.Duration) []Reconnect {
	var out []Reconnect
	for _, f := range faults {
		global, ok := leaderFault(f.Kind)
		if !ok || f.Err != "" {
			continue
		}
		var group, children []*e2e.Proc
		if global {
			group = t.Cluster.Global
			for _, r := range t.RegionNames() {
				children = append(children, t.Group(r)...)
			}
		} else {
			region := ""
			for _, r := range t.RegionNames() {
				for _, p := range t.Group(r) {
					if p.Name == f.Target {
						region = r
					}
				}
			}
			group = t.Group(region)
			for _, h := range t.HostsOf(region) {
				children = append(children, t.Cluster.Hosts[h])
			}
		}
		until := f.End.Add(gap)
		r := Reconnect{Fault: f, Children: len(children)}
		for _, p := range group {
			if at, ok := firstLogLine(p.Log, "became leader", f.Start, until); ok && (r.Elected == 0 || at.Sub(f.Start) < r.Elected) {
				r.Elected = at.Sub(f.Start)
			}
		}
		for _, p := range children {
			if at, ok := firstLogLine(p.Log, "session: connected to", f.Start, until); ok {
				r.Reconnected++
				r.Slowest = max(r.Slowest, at.Sub(f.Start))
			}
		}
		out = append(out, r)
	}
	return out
}

// firstLogLine finds the first line of a daemon log (log.LstdFlags with
// microseconds after a prefix: "name 2006/01/02 15:04:05.000000 msg")
// holding marker, stamped in (from, until].
func firstLogLine(path, marker string, from, until time.Time) (time.Time, bool) {
	f, err := os.Open(path)
	if err != nil {
		return time.Time{}, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, marker) {
			continue
		}
		if at, ok := logTime(line); ok && at.After(from) && !at.After(until) {
			return at, true
		}
	}
	return time.Time{}, false
}

// logTime reads the "2006/01/02 15:04:05.000000" stamp after the line's
// prefix word (the daemons log in local time).
func logTime(line string) (time.Time, bool) {
	fs := strings.Fields(line)
	if len(fs) < 3 {
		return time.Time{}, false
	}
	at, err := time.ParseInLocation("2006/01/02 15:04:05.000000", fs[1]+" "+fs[2], time.Local)
	return at, err == nil
}

// PausedWorkers is how long a paused host's workers went on: of the worker
// processes alive on the host when it was stopped, the longest time they
// still beat after the SIGSTOP (until the SIGCONT at most).
type PausedWorkers struct {
	Fault   Fault
	Workers int
	RanFor  time.Duration
}

// PausedHostWorkers measures every pause-host fault from the heartbeats.
func (c *Checker) PausedHostWorkers(faults []Fault) []PausedWorkers {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []PausedWorkers
	for _, f := range faults {
		if f.Kind != PauseHost || f.Err != "" {
			continue
		}
		pw := PausedWorkers{Fault: f}
		from, to := f.Start.UnixNano(), f.End.UnixNano()
		for _, r := range c.runs {
			if r.Host != f.Target || r.First > from || r.Last < from {
				continue
			}
			pw.Workers++
			pw.RanFor = max(pw.RanFor, time.Duration(min(r.Last, to)-from))
		}
		out = append(out, pw)
	}
	return out
}
