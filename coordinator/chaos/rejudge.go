package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/strata-sched/strata/coordinator/e2e"
)

// Rejudge runs the checker again over a kept run directory (its ledgers,
// heartbeats, ops.jsonl and faults.jsonl), e.g. after the checker changed.
// What needs the live cluster (lost shards, orphans) is not recomputed; the
// jobs listed at the end come from listed.json.
func Rejudge(dir string, cfg Config) (*Report, error) {
	hosts, err := filepath.Glob(filepath.Join(dir, "host", "*"))
	if err != nil || len(hosts) == 0 {
		return nil, fmt.Errorf("rejudge %s: no host directories (%v)", dir, err)
	}
	t := &Topology{Shape: cfg.Shape, Dir: dir, BeatDir: filepath.Join(dir, "beats"),
		Cluster: &e2e.Cluster{Regions: map[string][]*e2e.Proc{}, Hosts: map[string]*e2e.Proc{}, HostRegion: map[string]string{}}}
	// The layout and names NewCluster makes: global/global-N,
	// region/region-R-N, host/region-R-host-M.
	proc := func(d string) *e2e.Proc {
		return &e2e.Proc{Name: filepath.Base(d), DataDir: d, Log: filepath.Join(d, "log.txt")}
	}
	for _, h := range hosts {
		p := proc(h)
		t.Cluster.Hosts[p.Name] = p
		if i := strings.Index(p.Name, "-host-"); i > 0 {
			t.Cluster.HostRegion[p.Name] = p.Name[:i]
		}
	}
	globals, _ := filepath.Glob(filepath.Join(dir, "global", "*"))
	for _, g := range globals {
		t.Cluster.Global = append(t.Cluster.Global, proc(g))
	}
	regions, _ := filepath.Glob(filepath.Join(dir, "region", "*"))
	for _, r := range regions {
		p := proc(r)
		name := p.Name[:strings.LastIndexByte(p.Name, '-')]
		t.Cluster.Regions[name] = append(t.Cluster.Regions[name], p)
	}
	rep := &Report{Config: cfg}
	if err := readJSONL(filepath.Join(dir, "ops.jsonl"), func(d *json.Decoder) error {
		var o Op
		err := d.Decode(&o)
		rep.Ops = append(rep.Ops, o)
		return err
	}); err != nil {
		return nil, err
	}
	if err := readJSONL(filepath.Join(dir, "faults.jsonl"), func(d *json.Decoder) error {
		var f Fault
		err := d.Decode(&f)
		rep.Faults = append(rep.Faults, f)
		return err
	}); err != nil {
		return nil, err
	}
	if b, err := os.ReadFile(filepath.Join(dir, "listed.json")); err == nil {
		if err := json.Unmarshal(b, &rep.Listed); err != nil {
			return nil, fmt.Errorf("listed.json: %w", err)
		}
	}
	ops := effectiveOps(rep.Ops, rep.Listed) // without listed.json: every failed delete may have landed
	if len(rep.Faults) > 0 {
		rep.Began = rep.Faults[0].Start
	}
	chk := NewChecker(t, rep.Began, func(string, ...any) {})
	if rep.Ledger, err = chk.Poll(); err != nil {
		return nil, err
	}
	rep.Findings = chk.Findings()
	rep.Workers, _, _ = chk.WorkerRuns(time.Now(), 0)
	for _, f := range rep.Findings {
		if len(f.Text) > 14 && f.Text[:14] == "worker overlap" {
			rep.WorkerOverlap++
		}
	}
	var last time.Time
	for _, o := range rep.Ops {
		last = maxTime(last, o.End)
	}
	for _, f := range rep.Faults {
		last = maxTime(last, f.End)
	}
	slack := Slack{Host: cfg.Shape.HostLease() + cfg.Shape.Timing.Grace + 5*time.Second, ControlPlane: cfg.Gap}
	rep.Stops = Classify(rep.Ledger, ops, rep.Faults, last.Add(cfg.Settle), slack)
	rep.PerFault = StopsPerFault(rep.Ledger, ops, rep.Faults, cfg.Gap)
	rep.Paused = chk.PausedHostWorkers(rep.Faults)
	rep.Reconnects = Reconnects(t, rep.Faults, cfg.Gap)
	return rep, nil
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func readJSONL(path string, each func(*json.Decoder) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	d := json.NewDecoder(bufio.NewReader(f))
	for d.More() {
		if err := each(d); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}
