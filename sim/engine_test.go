package sim

import (
	"context"
	"testing"
)

func TestBasicRun(t *testing.T) {
	sc, err := LoadScenario("testdata/unit/basic.yaml")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), sc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Policies {
		t.Logf("%+v", p.Summary)
		for _, a := range p.Assertions {
			t.Logf("%s: %s", p.Summary.Policy, a.Message)
		}
	}
}
