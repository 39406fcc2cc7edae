package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"time"

	"github.com/strata-sched/strata/coordinator/e2e"
	"github.com/strata-sched/strata/coordinator/tierd"
)

// Shape is the size of the hierarchy under test.
type Shape struct {
	Replicas       int // per tier group (global and each region)
	Regions        int
	HostsPerRegion int
	HostCPU        float64
	// Driver is "exec" (each shard a beat worker process: the workers' own
	// heartbeats are checked too) or "synthetic" (ledgers only).
	Driver string
	Timing e2e.Timing
}

// FullShape is the suite's topology: 3 global replicas, 2 regions of 3
// replicas, 3 hosts per region. Leases and report intervals are the daemons'
// defaults per tier (a region's hosts 4 s, the global tier's regions 20 s):
// static stability is judged on what an operator runs, not on leases made
// short to hurry the test.
var FullShape = Shape{Replicas: 3, Regions: 2, HostsPerRegion: 3, HostCPU: 16, Driver: "exec",
	Timing: e2e.Timing{Interval: 300 * time.Millisecond, Grace: 500 * time.Millisecond}}

// HostLease is the lease the hosts hold: Timing.LeaseTTL, or the daemons'
// default for a tier whose children are hosts.
func (s Shape) HostLease() time.Duration {
	if s.Timing.LeaseTTL > 0 {
		return s.Timing.LeaseTTL
	}
	return tierd.DefaultHostLeaseTTL
}

// Topology is a running cluster on its own network.
type Topology struct {
	Shape   Shape
	Dir     string
	BeatDir string
	Net     *Netns
	Cluster *e2e.Cluster
}

// Binaries builds strata and the beat worker into dir.
func Binaries(dir string) (strata, beat string, err error) {
	if strata, err = e2e.BuildStrata(dir); err != nil {
		return "", "", err
	}
	beat = filepath.Join(dir, "beat")
	cmd := exec.Command("go", "build", "-o", beat, "./internal/beat")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("go build beat: %v\n%s", err, out)
	}
	return strata, beat, nil
}

// NewTopology creates the network and the cluster's configs under dir; Start
// launches the processes.
func NewTopology(dir, strataBin, beatBin string, s Shape) (*Topology, error) {
	nw, err := NewNetns()
	if err != nil {
		return nil, err
	}
	t := &Topology{Shape: s, Dir: dir, BeatDir: filepath.Join(dir, "beats"), Net: nw}
	if err := os.MkdirAll(t.BeatDir, 0o755); err != nil {
		nw.Close()
		return nil, err
	}
	// Secured as an operator runs it: mutual TLS on every connection (the
	// cluster's default) and ACL tokens on every tier's Admin API; the
	// workload and the checker call with the bootstrap token.
	spec := e2e.Spec{Replicas: s.Replicas, Regions: s.Regions, HostsPerRegion: s.HostsPerRegion, HostCPU: s.HostCPU, Timing: s.Timing, Net: nw, ACL: true}
	if s.Driver == "exec" {
		spec.HostDriver = func(string) string {
			return fmt.Sprintf("{kind: exec, exec: {command: [%q, %q], stop_timeout: 1s}}", beatBin, t.BeatDir)
		}
	}
	if t.Cluster, err = e2e.NewCluster(dir, strataBin, spec); err != nil {
		nw.Close()
		return nil, err
	}
	return t, nil
}

// Start launches every process.
func (t *Topology) Start() error { return t.Cluster.Start() }

// Close stops every process (SIGKILL: the ledgers are read before) and
// removes the network.
func (t *Topology) Close() {
	for _, p := range t.Cluster.All() {
		p.Resume()
		p.Kill()
	}
	t.Net.Close()
}

// Hosts lists the host names, sorted.
func (t *Topology) Hosts() []string {
	var out []string
	for h := range t.Cluster.Hosts {
		out = append(out, h)
	}
	sort.Strings(out)
	return out
}

// RegionNames lists the regions, sorted.
func (t *Topology) RegionNames() []string {
	var out []string
	for r := range t.Cluster.Regions {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// HostsOf lists the hosts of region, sorted.
func (t *Topology) HostsOf(region string) []string {
	var out []string
	for _, h := range t.Hosts() {
		if t.Cluster.HostRegion[h] == region {
			out = append(out, h)
		}
	}
	return out
}

// Group returns the replicas of a tier group: "global" or a region name.
func (t *Topology) Group(name string) []*e2e.Proc {
	if name == "global" {
		return t.Cluster.Global
	}
	return t.Cluster.Regions[name]
}

// Proc returns the process named name.
func (t *Topology) Proc(name string) *e2e.Proc {
	for _, p := range t.Cluster.All() {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// LedgerPath is a host's ownership ledger; BeatPath its workers' heartbeats.
func (t *Topology) LedgerPath(host string) string {
	return filepath.Join(t.Cluster.Hosts[host].DataDir, "ledger.jsonl")
}

// BeatPath is the heartbeat file of host's workers.
func (t *Topology) BeatPath(host string) string { return filepath.Join(t.BeatDir, host+".beats") }

func names(ps []*e2e.Proc) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}
