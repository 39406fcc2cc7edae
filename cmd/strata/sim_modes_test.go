package main

import (
	"strings"
	"testing"
)

// strata sim compare --modes runs each scenario as decoupled / collaborative
// with one solver and prints one table with the gains and no_loss.
func TestSimCompareModes(t *testing.T) {
	a, b := writeScenario(t, cliScenario), writeScenario(t, strings.Replace(cliScenario, "name: cli", "name: cli2", 1))
	code, out, errOut := runCLI("sim", "compare", "--modes", "--deterministic", "--no-progress", a, b)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"SCENARIO", "SPREAD DEC", "P99 GAIN", "NO_LOSS", "cli ", "cli2 ", "held", "median gain of collaborative", "solver local"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if code, _, errOut := runCLI("sim", "compare", "--modes", "--solver", "nope", a); code == 0 || !strings.Contains(errOut, `unknown policy "nope"`) {
		t.Errorf("--solver nope: exit %d, %s", code, errOut)
	}
}
