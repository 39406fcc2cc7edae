package interfaces

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestRegistry(t *testing.T) {
	r := NewRegistry[int]("widget")
	for _, n := range []string{"b", "a", "c"} {
		if err := r.Add(n, len(n)); err != nil {
			t.Fatalf("Add(%q): %v", n, err)
		}
	}
	if err := r.Add("a", 9); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), `widget "a" is already registered`) {
		t.Errorf("duplicate: %v, want a conflict naming it", err)
	}
	for _, bad := range []string{"", "has space", "tab\there"} {
		if err := r.Add(bad, 1); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "widget name") {
			t.Errorf("Add(%q): %v, want ErrInvalid naming the field", bad, err)
		}
	}
	if v, err := r.Get("a"); err != nil || v != 1 {
		t.Errorf("Get(a) = %d, %v", v, err)
	}
	_, err := r.Get("zz")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `unknown widget "zz" (known: a, b, c)`) {
		t.Errorf("Get(zz): %v", err)
	}
	if !r.Has("b") || r.Has("zz") {
		t.Error("Has")
	}
	if got := r.Names(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("Names() = %v", got)
	}
}
