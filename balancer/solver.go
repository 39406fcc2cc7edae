package balancer

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/strata-sched/strata/interfaces"
)

// Solver turns a Problem into a Result. Solve must be deterministic for the same
// problem and options (time and seed come in the options), must not modify p, and
// must never violate a hard constraint that the start assignment satisfied. A
// problem that cannot be fully placed is a Result with Status Infeasible, not an
// error; an error means bad input (wrapping interfaces.ErrInvalid or ErrNotFound).
type Solver interface {
	Name() string
	Solve(p *Problem, o Options) (Result, error)
}

// SolverFactory builds a Solver. Solvers are cheap values; a factory may return
// the same one every time.
type SolverFactory func() Solver

var (
	registryMu sync.RWMutex
	registry   = map[string]SolverFactory{}
)

// RegisterSolver makes a solver selectable by name. It is meant for init
// functions (the exact solver registers itself from its own file) and panics on a
// programming error: an empty or duplicate name, or a nil factory.
func RegisterSolver(name string, f SolverFactory) {
	if name == "" || f == nil {
		panic("balancer: RegisterSolver needs a name and a factory")
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[name]; dup {
		panic(fmt.Sprintf("balancer: solver %q registered twice", name))
	}
	registry[name] = f
}

// SolverByName returns the solver registered under name. An unknown name is an
// error wrapping interfaces.ErrNotFound that lists the known names.
func SolverByName(name string) (Solver, error) {
	registryMu.RLock()
	f, ok := registry[name]
	registryMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("solver %q: unknown (known: %s): %w", name, strings.Join(SolverNames(), ", "), interfaces.ErrNotFound)
	}
	return f(), nil
}

// SolverNames lists the registered solver names, sorted.
func SolverNames() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Solve is SolverByName(name) followed by Solve.
func Solve(name string, p *Problem, o Options) (Result, error) {
	s, err := SolverByName(name)
	if err != nil {
		return Result{}, err
	}
	return s.Solve(p, o)
}
