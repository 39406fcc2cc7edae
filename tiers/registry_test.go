package tiers

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/strata-sched/strata/interfaces"
)

type nopPolicy struct{ name string }

func (p nopPolicy) Name() string { return p.name }
func (p nopPolicy) Plan(context.Context, *interfaces.View) (interfaces.Plan, error) {
	return interfaces.Plan{}, nil
}

func TestRegistry(t *testing.T) {
	r := NewRegistry()
	f := func(cfg interfaces.PolicyConfig) (interfaces.Policy, error) {
		if cfg["bad"] != "" {
			return nil, errors.New("bad config")
		}
		return nopPolicy{name: "nop"}, nil
	}
	if err := r.Register("nop", f); err != nil {
		t.Fatal(err)
	}
	if err := r.Register("nop", f); !errors.Is(err, interfaces.ErrConflict) {
		t.Errorf("duplicate: got %v, want ErrConflict", err)
	}
	if err := r.Register("", f); !errors.Is(err, interfaces.ErrInvalid) {
		t.Errorf("empty name: got %v, want ErrInvalid", err)
	}
	if err := r.Register("x", nil); !errors.Is(err, interfaces.ErrInvalid) {
		t.Errorf("nil factory: got %v, want ErrInvalid", err)
	}
	p, err := r.New("nop", nil)
	if err != nil || p.Name() != "nop" {
		t.Fatalf("New: %v %v", p, err)
	}
	_, err = r.New("missing", nil)
	if !errors.Is(err, interfaces.ErrNotFound) || !strings.Contains(err.Error(), `unknown policy "missing" (known: nop)`) {
		t.Errorf("unknown: got %v", err)
	}
	if _, err := r.New("nop", interfaces.PolicyConfig{"bad": "1"}); err == nil || !strings.Contains(err.Error(), `policy "nop": bad config`) {
		t.Errorf("factory error not wrapped: %v", err)
	}
	if !r.Has("nop") || r.Has("missing") {
		t.Error("Has wrong")
	}
}
