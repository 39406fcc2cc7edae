package interfaces

import (
	"testing"
	"time"
)

// TestShardEqual checks that every field counts: the tier uplink's old copy
// ignored Constraints, so a job re-pinned at the parent kept its old pin below.
func TestShardEqual(t *testing.T) {
	base := Shard{
		ID: "j/1", Job: "j", Load: Load{CPU: 1, Mem: 2, Extra: map[string]float64{"gpu": 1}},
		InputRate: 10, StateBytes: 100, LatencySLO: time.Second,
		Constraints: ShardConstraints{Pinned: "a", Allowed: []ChildID{"a", "b"}, Labels: map[string]string{"z": "1"}, AntiAffinity: "g", MaxPerChild: 2},
	}
	clone := func() Shard {
		s := base
		s.Load.Extra = map[string]float64{"gpu": 1}
		s.Constraints.Allowed = append([]ChildID(nil), base.Constraints.Allowed...)
		s.Constraints.Labels = map[string]string{"z": "1"}
		return s
	}
	if !base.Equal(clone()) {
		t.Fatal("a copy is not equal")
	}
	changes := map[string]func(*Shard){
		"id":            func(s *Shard) { s.ID = "j/2" },
		"job":           func(s *Shard) { s.Job = "k" },
		"load":          func(s *Shard) { s.Load.CPU = 3 },
		"extra load":    func(s *Shard) { s.Load.Extra["gpu"] = 2 },
		"input rate":    func(s *Shard) { s.InputRate = 11 },
		"state bytes":   func(s *Shard) { s.StateBytes = 101 },
		"latency slo":   func(s *Shard) { s.LatencySLO = 2 * time.Second },
		"pinned":        func(s *Shard) { s.Constraints.Pinned = "b" },
		"allowed":       func(s *Shard) { s.Constraints.Allowed[1] = "c" },
		"allowed count": func(s *Shard) { s.Constraints.Allowed = s.Constraints.Allowed[:1] },
		"label value":   func(s *Shard) { s.Constraints.Labels["z"] = "2" },
		"label key":     func(s *Shard) { s.Constraints.Labels = map[string]string{"y": "1"} },
		"anti-affinity": func(s *Shard) { s.Constraints.AntiAffinity = "h" },
		"max per child": func(s *Shard) { s.Constraints.MaxPerChild = 3 },
	}
	for name, change := range changes {
		s := clone()
		change(&s)
		if base.Equal(s) || s.Equal(base) {
			t.Errorf("%s: a changed shard is equal", name)
		}
	}
}
