package interfaces

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func validShard() Shard {
	return Shard{ID: "job-a/0", Job: "job-a", Load: Load{CPU: 1, Mem: 1 << 30}, InputRate: 100, StateBytes: 1 << 20, LatencySLO: 50 * time.Millisecond}
}

func validChild() Child {
	return Child{ID: "host-1", Tier: TierHost, Capacity: Load{CPU: 16, Mem: 64 << 30}}
}

func TestValidateShard(t *testing.T) {
	if err := ValidateShard(validShard()); err != nil {
		t.Fatalf("valid shard rejected: %v", err)
	}
	tests := []struct {
		name   string
		mutate func(*Shard)
		want   string // exact message
	}{
		{"missing id", func(s *Shard) { s.ID = "" }, "shard.id: is required"},
		{"bad id", func(s *Shard) { s.ID = "a b" }, `shard.id: ` + IDRule + ` (got "a b")`},
		{"id starting with dash", func(s *Shard) { s.ID = "-x" }, `shard.id: ` + IDRule + ` (got "-x")`},
		{"missing job", func(s *Shard) { s.Job = "" }, "shard.job: is required"},
		{"negative cpu", func(s *Shard) { s.Load.CPU = -1 }, "shard.load.cpu: must be ≥ 0 (got -1)"},
		{"NaN mem", func(s *Shard) { s.Load.Mem = math.NaN() }, "shard.load.mem: must be a finite number (got NaN)"},
		{"infinite net", func(s *Shard) { s.Load.Net = math.Inf(1) }, "shard.load.net: must be a finite number (got +Inf)"},
		{"huge cpu", func(s *Shard) { s.Load.CPU = 1.5e308 }, "shard.load.cpu: must be at most 1e24 (got 1.5e+308)"},
		{"huge input rate", func(s *Shard) { s.InputRate = 1e25 }, "shard.input_rate: must be at most 1e24 (got 1e+25)"},
		{"negative tasks", func(s *Shard) { s.Load.Tasks = -2 }, "shard.load.tasks: must be ≥ 0 (got -2)"},
		{"negative extra", func(s *Shard) { s.Load.Extra = map[string]float64{"gpu": -1} }, "shard.load.gpu: must be ≥ 0 (got -1)"},
		{"extra shadows builtin", func(s *Shard) { s.Load.Extra = map[string]float64{"cpu": 1} }, "shard.load.cpu: is a built-in dimension and must not be set as extra"},
		{"empty extra name", func(s *Shard) { s.Load.Extra = map[string]float64{"": 1} }, "shard.load: extra dimension names must not be empty"},
		{"negative input rate", func(s *Shard) { s.InputRate = -5 }, "shard.input_rate: must be ≥ 0 (got -5)"},
		{"negative state", func(s *Shard) { s.StateBytes = -1 }, "shard.state_bytes: must be ≥ 0 (got -1)"},
		{"negative slo", func(s *Shard) { s.LatencySLO = -time.Second }, "shard.latency_slo: must be ≥ 0 (got -1s)"},
		{"bad pinned", func(s *Shard) { s.Constraints.Pinned = "no spaces" }, `shard.constraints.pinned: ` + IDRule + ` (got "no spaces")`},
		{"pinned outside allowed", func(s *Shard) {
			s.Constraints.Pinned = "h1"
			s.Constraints.Allowed = []ChildID{"h2"}
		}, "shard.constraints.pinned: must be one of shard.constraints.allowed (got h1)"},
		{"bad allowed", func(s *Shard) { s.Constraints.Allowed = []ChildID{"ok", ""} }, "shard.constraints.allowed[1]: is required"},
		{"empty label key", func(s *Shard) { s.Constraints.Labels = map[string]string{"": "x"} }, "shard.constraints.labels: label keys must not be empty"},
		{"negative max per child", func(s *Shard) {
			s.Constraints.AntiAffinity = "g"
			s.Constraints.MaxPerChild = -1
		}, "shard.constraints.max_per_child: must be ≥ 0 (got -1)"},
		{"max per child without group", func(s *Shard) { s.Constraints.MaxPerChild = 2 }, "shard.constraints.max_per_child: needs shard.constraints.anti_affinity to name a group (got 2)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := validShard()
			tt.mutate(&s)
			err := ValidateShard(s)
			if err == nil {
				t.Fatalf("want error %q, got nil", tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("got  %q\nwant %q", err.Error(), tt.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid: %v", err)
			}
			var fe *FieldError
			if !errors.As(err, &fe) || !strings.HasPrefix(tt.want, fe.Field) {
				t.Errorf("FieldError.Field = %q does not name the field of %q", fe.Field, tt.want)
			}
		})
	}
}

// TestValidateShardsIsValidateShard: ValidateShards reports the first shard
// ValidateShard rejects, with ValidateShard's error, whatever the jobs of the
// shards around it (its job check is skipped for a repeated job).
func TestValidateShardsIsValidateShard(t *testing.T) {
	edits := map[string]func(*Shard){
		"bad id":             func(s *Shard) { s.ID = "a b" },
		"missing id":         func(s *Shard) { s.ID = "" },
		"missing job":        func(s *Shard) { s.Job = "" },
		"bad job":            func(s *Shard) { s.Job = "job a" },
		"NaN cpu":            func(s *Shard) { s.Load.CPU = math.NaN() },
		"negative -Inf mem":  func(s *Shard) { s.Load.Mem = math.Inf(-1) },
		"huge tasks":         func(s *Shard) { s.Load.Tasks = 2e24 },
		"bad extra":          func(s *Shard) { s.Load.Extra = map[string]float64{"gpu": -1} },
		"bad allowed":        func(s *Shard) { s.Constraints.Allowed = []ChildID{"h1", ""} },
		"bad pinned":         func(s *Shard) { s.Constraints.Pinned = "h 1" },
		"pinned not allowed": func(s *Shard) { s.Constraints.Pinned, s.Constraints.Allowed = "h1", []ChildID{"h2"} },
		"empty label key":    func(s *Shard) { s.Constraints.Labels = map[string]string{"": "a"} },
		"negative bytes":     func(s *Shard) { s.StateBytes = -1 },
	}
	for name, edit := range edits {
		for _, job := range []string{"job-a", "job-b", ""} {
			for _, at := range []int{0, 1, 3} {
				shards := make([]Shard, 4)
				for i := range shards {
					shards[i] = validShard()
				}
				shards[2].Job = "job-b"
				shards[at].Job = job
				edit(&shards[at])
				want := -1
				var wantErr error
				for i := range shards {
					if wantErr = ValidateShard(shards[i]); wantErr != nil {
						want = i
						break
					}
				}
				got, err := ValidateShards(shards)
				if got != want || (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
					t.Errorf("%s (job %q at %d): got %d, %v; want %d, %v", name, job, at, got, err, want, wantErr)
				}
			}
		}
	}
	if i, err := ValidateShards([]Shard{validShard(), validShard()}); i != -1 || err != nil {
		t.Errorf("valid shards: got %d, %v", i, err)
	}
}

func TestValidateChild(t *testing.T) {
	if err := ValidateChild(validChild()); err != nil {
		t.Fatalf("valid child rejected: %v", err)
	}
	tests := []struct {
		name   string
		mutate func(*Child)
		want   string
	}{
		{"missing id", func(c *Child) { c.ID = "" }, "child.id: is required"},
		{"missing tier", func(c *Child) { c.Tier = "" }, "child.tier: is required"},
		{"zero capacity", func(c *Child) { c.Capacity = Load{} }, "child.capacity: must be > 0 in at least one dimension"},
		{"negative capacity", func(c *Child) { c.Capacity.CPU = -4 }, "child.capacity.cpu: must be ≥ 0 (got -4)"},
		{"bad state", func(c *Child) { c.State = 9 }, "child.state: must be active, draining or failed (got 9)"},
		{"empty label key", func(c *Child) { c.Labels = map[string]string{"": "eu"} }, "child.labels: label keys must not be empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validChild()
			tt.mutate(&c)
			err := ValidateChild(c)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid")
			}
		})
	}
}

func TestValidateLoadAcceptsValid(t *testing.T) {
	if err := ValidateLoad("load", Load{CPU: 0, Extra: map[string]float64{"gpu": 2}}); err != nil {
		t.Errorf("valid load rejected: %v", err)
	}
	if err := ValidateCapacity("cap", Load{Extra: map[string]float64{"gpu": 2}}); err != nil {
		t.Errorf("capacity with only an extra dimension rejected: %v", err)
	}
}

func TestEnumStrings(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{ChildDraining.String(), "draining"}, {ChildState(77).String(), "unknown"},
		{HintShed.String(), "shed"}, {HintKind(77).String(), "unknown"},
		{ConstraintAntiAffinity.String(), "anti_affinity"}, {ConstraintKind(77).String(), "unknown"},
		{StatusInfeasible.String(), "infeasible"}, {Status(77).String(), "unknown"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}
