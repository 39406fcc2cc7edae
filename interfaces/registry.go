package interfaces

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Registry maps names to values — the factories of solvers, tier policies and
// control policies, each kept in one. It is safe for concurrent use; make one
// with NewRegistry.
type Registry[F any] struct {
	kind string
	mu   sync.RWMutex
	m    map[string]F
}

// NewRegistry returns an empty registry; kind names what it holds ("policy",
// "solver") in its errors.
func NewRegistry[F any](kind string) *Registry[F] {
	return &Registry[F]{kind: kind, m: map[string]F{}}
}

// Add registers f under name. A name that is not an ID (ValidateID) wraps
// ErrInvalid; one already taken wraps ErrConflict.
func (r *Registry[F]) Add(name string, f F) error {
	if err := ValidateID(r.kind+" name", name); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.m[name]; ok {
		return fmt.Errorf("%s %q is already registered: %w", r.kind, name, ErrConflict)
	}
	r.m[name] = f
	return nil
}

// Get returns what is registered under name. An unknown name is an error that
// lists the known ones and wraps ErrNotFound.
func (r *Registry[F]) Get(name string) (F, error) {
	r.mu.RLock()
	f, ok := r.m[name]
	r.mu.RUnlock()
	if !ok {
		return f, fmt.Errorf("unknown %s %q (known: %s): %w", r.kind, name, strings.Join(r.Names(), ", "), ErrNotFound)
	}
	return f, nil
}

// Has reports whether name is registered.
func (r *Registry[F]) Has(name string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.m[name]
	return ok
}

// Names returns the registered names, sorted.
func (r *Registry[F]) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.m))
	for n := range r.m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
