package balancer

import "github.com/strata-sched/strata/interfaces"

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

var solvers = interfaces.NewRegistry[SolverFactory]("solver")

// RegisterSolver makes a solver selectable by name. It is meant for init
// functions (the exact solver registers itself from its own file) and panics on a
// programming error: a malformed or duplicate name, or a nil factory.
func RegisterSolver(name string, f SolverFactory) {
	if f == nil {
		panic("balancer: RegisterSolver needs a factory")
	}
	if err := solvers.Add(name, f); err != nil {
		panic("balancer: " + err.Error())
	}
}

// SolverByName returns the solver registered under name. An unknown name is an
// error wrapping interfaces.ErrNotFound that lists the known names.
func SolverByName(name string) (Solver, error) {
	f, err := solvers.Get(name)
	if err != nil {
		return nil, err
	}
	return f(), nil
}

// SolverNames lists the registered solver names, sorted.
func SolverNames() []string { return solvers.Names() }

// Solve is SolverByName(name) followed by Solve.
func Solve(name string, p *Problem, o Options) (Result, error) {
	s, err := SolverByName(name)
	if err != nil {
		return Result{}, err
	}
	return s.Solve(p, o)
}
