package tiers

import (
	"errors"
	"strings"
	"testing"

	"github.com/strata-sched/strata/interfaces"
)

func TestSolverPolicyTargetKey(t *testing.T) {
	p, err := NewSolverPolicy("local", "local", interfaces.PolicyConfig{"target_max_over_lb": "1.02"})
	if err != nil {
		t.Fatal(err)
	}
	if p.opts.TargetMaxOverLB != 1.02 {
		t.Fatalf("target %g, want 1.02", p.opts.TargetMaxOverLB)
	}
	for _, v := range []string{"0.9", "x", "NaN", "+Inf"} {
		_, err := New("local", interfaces.PolicyConfig{"target_max_over_lb": v})
		if !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), `key "target_max_over_lb"`) {
			t.Errorf("%q: %v, want ErrInvalid naming the key", v, err)
		}
	}
}
