package tiers

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/strata-sched/strata/interfaces"
)

// Registry maps policy names to factories. The zero value is not usable; use
// NewRegistry. A Registry is safe for concurrent use.
type Registry struct {
	mu        sync.RWMutex
	factories map[string]interfaces.Factory
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{factories: map[string]interfaces.Factory{}}
}

// Register adds a factory under name. It fails when the name is empty, malformed
// or already taken, or the factory is nil.
func (r *Registry) Register(name string, f interfaces.Factory) error {
	if err := interfaces.ValidateID("policy name", name); err != nil {
		return err
	}
	if f == nil {
		return fmt.Errorf("policy %q: factory is nil: %w", name, interfaces.ErrInvalid)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.factories[name]; ok {
		return fmt.Errorf("policy %q is already registered: %w", name, interfaces.ErrConflict)
	}
	r.factories[name] = f
	return nil
}

// New builds the policy registered under name with cfg. An unknown name is an
// error that lists the known ones.
func (r *Registry) New(name string, cfg interfaces.PolicyConfig) (interfaces.Policy, error) {
	r.mu.RLock()
	f, ok := r.factories[name]
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("unknown policy %q (known: %s): %w", name, strings.Join(r.Names(), ", "), interfaces.ErrNotFound)
	}
	p, err := f(cfg)
	if err != nil {
		return nil, fmt.Errorf("policy %q: %w", name, err)
	}
	return p, nil
}

// Has reports whether name is registered.
func (r *Registry) Has(name string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.factories[name]
	return ok
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.factories))
	for n := range r.factories {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Default is the process-wide registry that built-in policies register into and
// that the daemons and the simulator select policies from by name.
var Default = NewRegistry()

// Register adds a policy factory to the Default registry: the one call a custom Go
// policy makes (usually from an init function) to be selectable by name in
// configuration.
func Register(name string, f interfaces.Factory) error { return Default.Register(name, f) }

// MustRegister is Register for init functions: it panics on a programming error
// (a duplicate or malformed name), never on user input.
func MustRegister(name string, f interfaces.Factory) {
	if err := Register(name, f); err != nil {
		panic(err)
	}
}

// New builds a policy from the Default registry.
func New(name string, cfg interfaces.PolicyConfig) (interfaces.Policy, error) {
	return Default.New(name, cfg)
}
