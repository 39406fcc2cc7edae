package telemetry

import (
	"strconv"
	"sync"
	"time"

	gometrics "github.com/armon/go-metrics"
	"github.com/hashicorp/raft"
)

// RaftStats exports a replica's Raft state, read from r at every scrape: its
// state, term, commit, applied and last log index, pending FSM entries, voters
// and the time since it last heard from its leader. Every replica of a group
// exports its own, whatever the number of replicas in the process.
func (m *Metrics) RaftStats(r *raft.Raft) {
	stat := func(name, key string) {
		m.Func(name, func(emit Emit) {
			if v, err := strconv.ParseFloat(r.Stats()[key], 64); err == nil {
				emit(v)
			}
		})
	}
	stat("raft_term", "term")
	stat("raft_commit_index", "commit_index")
	stat("raft_applied_index", "applied_index")
	stat("raft_last_log_index", "last_log_index")
	stat("raft_fsm_pending", "fsm_pending")
	m.Func("raft_state", func(emit Emit) {
		cur := r.State()
		for _, s := range []raft.RaftState{raft.Leader, raft.Follower, raft.Candidate, raft.Shutdown} {
			v := 0.0
			if s == cur {
				v = 1
			}
			emit(v, s.String())
		}
	})
	m.Func("raft_peers", func(emit Emit) {
		f := r.GetConfiguration()
		if f.Error() != nil {
			return
		}
		n := 0
		for _, s := range f.Configuration().Servers {
			if s.Suffrage == raft.Voter {
				n++
			}
		}
		emit(float64(n))
	})
	m.Func("raft_last_contact_seconds", func(emit Emit) {
		if r.State() == raft.Leader {
			emit(0)
			return
		}
		if last := r.LastContact(); !last.IsZero() {
			emit(time.Since(last).Seconds())
		}
	})
}

// hashicorp/raft reports its own metrics (commit time, FSM apply time, state
// changes…) through the process-wide go-metrics sink, with no field naming the
// replica. They can be attributed to a daemon only in a process that runs one:
// OneDaemonProcess says so, and the next Metrics made claims the process (its
// Go runtime and process metrics, and raft's).
var process struct {
	mu      sync.Mutex
	one     bool     // OneDaemonProcess was called
	owner   *Metrics // the daemon that claimed the process
	sinkSet bool
	sink    raftSink
}

// OneDaemonProcess tells telemetry that this process runs a single daemon
// (strata tier, strata host), not the many of strata dev: its Metrics then
// also exports the Go runtime, the process and hashicorp/raft's own metrics.
func OneDaemonProcess() {
	process.mu.Lock()
	process.one = true
	process.mu.Unlock()
}

func claimProcess(m *Metrics) bool {
	process.mu.Lock()
	defer process.mu.Unlock()
	if !process.one || process.owner != nil {
		return false
	}
	process.owner = m
	if !process.sinkSet {
		cfg := gometrics.DefaultConfig("")
		cfg.EnableHostname = false
		cfg.EnableHostnameLabel = false
		cfg.EnableRuntimeMetrics = false
		cfg.EnableServiceLabel = false
		cfg.EnableTypePrefix = false
		if _, err := gometrics.NewGlobal(cfg, &process.sink); err == nil {
			process.sinkSet = true
		}
	}
	process.sink.set(m)
	return true
}

func releaseProcess(m *Metrics) {
	process.mu.Lock()
	defer process.mu.Unlock()
	if process.owner == m {
		process.owner = nil
		process.sink.set(nil)
	}
}

// raftSink is a go-metrics sink that forwards the raft metrics of the
// catalogue to the owning daemon's registry and drops every other key.
type raftSink struct {
	mu sync.Mutex
	m  *Metrics
}

func (s *raftSink) set(m *Metrics) {
	s.mu.Lock()
	s.m = m
	s.mu.Unlock()
}

func (s *raftSink) scope() *Scope {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		return nil
	}
	return s.m.Scope
}

func joinKey(key []string) string {
	out := ""
	for i, k := range key {
		if i > 0 {
			out += "."
		}
		out += k
	}
	return out
}

// raftSamples maps raft's timing keys (milliseconds) to histograms.
var raftSamples = map[string]string{
	"raft.commitTime":         "raft_commit_seconds",
	"raft.fsm.apply":          "raft_fsm_apply_seconds",
	"raft.leader.lastContact": "raft_leader_last_contact_seconds",
}

func (s *raftSink) SetGauge([]string, float32)                              {}
func (s *raftSink) SetGaugeWithLabels([]string, float32, []gometrics.Label) {}
func (s *raftSink) EmitKey([]string, float32)                               {}

func (s *raftSink) IncrCounter(key []string, val float32) {
	s.IncrCounterWithLabels(key, val, nil)
}

func (s *raftSink) IncrCounterWithLabels(key []string, val float32, _ []gometrics.Label) {
	sc := s.scope()
	if sc == nil {
		return
	}
	switch k := joinKey(key); k {
	case "raft.apply":
		sc.Counter("raft_apply_total").Inc(int64(val))
	case "raft.state.leader", "raft.state.follower", "raft.state.candidate":
		sc.Tagged(map[string]string{"state": key[2]}).Counter("raft_transitions_total").Inc(int64(val))
	case "raft.transition.heartbeat_timeout":
		sc.Counter("raft_heartbeat_timeouts_total").Inc(int64(val))
	}
}

func (s *raftSink) AddSample(key []string, val float32) { s.AddSampleWithLabels(key, val, nil) }

func (s *raftSink) AddSampleWithLabels(key []string, val float32, _ []gometrics.Label) {
	name, ok := raftSamples[joinKey(key)]
	if !ok {
		return
	}
	if sc := s.scope(); sc != nil {
		sc.Timer(name).Record(time.Duration(float64(val) * float64(time.Millisecond)))
	}
}
