package tiers

import (
	"fmt"

	"github.com/strata-sched/strata/interfaces"
)

// Registry maps policy names to factories. The zero value is not usable; use
// NewRegistry. A Registry is safe for concurrent use.
type Registry struct {
	r *interfaces.Registry[interfaces.Factory]
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{r: interfaces.NewRegistry[interfaces.Factory]("policy")}
}

// Register adds a factory under name. It fails when the name is empty, malformed
// or already taken, or the factory is nil.
func (r *Registry) Register(name string, f interfaces.Factory) error {
	if f == nil {
		return fmt.Errorf("policy %q: factory is nil: %w", name, interfaces.ErrInvalid)
	}
	return r.r.Add(name, f)
}

// New builds the policy registered under name with cfg. An unknown name is an
// error that lists the known ones.
func (r *Registry) New(name string, cfg interfaces.PolicyConfig) (interfaces.Policy, error) {
	f, err := r.r.Get(name)
	if err != nil {
		return nil, err
	}
	p, err := f(cfg)
	if err != nil {
		return nil, fmt.Errorf("policy %q: %w", name, err)
	}
	return p, nil
}

// Has reports whether name is registered.
func (r *Registry) Has(name string) bool { return r.r.Has(name) }

// Names returns the registered names, sorted.
func (r *Registry) Names() []string { return r.r.Names() }

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
