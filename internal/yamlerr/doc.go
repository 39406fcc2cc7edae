// Package yamlerr decodes the YAML files people write for Strata (daemon
// configurations, simulator scenarios and plans) strictly, and turns the YAML
// decoder's messages into errors that name the file, the line and the key:
//
//	g.yaml:51: control.max_moves: must be an integer, got "abc"
//	s.yaml:16: policies[0].bogus: unknown key (known here: name, solver, ...)
//
// It sits under internal/ because it serves the commands and the simulator
// alike and is not part of any contract.
package yamlerr
