package tierd

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/strata-sched/strata/interfaces"
)

func TestValidateIntegration(t *testing.T) {
	base := Config{Integration: IntegrationManual}
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{Integration: "x"}, "integration: must be decoupled, manual or collaborative"},
		{Config{Integration: IntegrationCollaborative, Constraints: []interfaces.Constraint{{Kind: interfaces.ConstraintMaxMoves}}}, "constraints: operator constraints need integration: manual"},
		{func() Config {
			c := base
			c.Constraints = []interfaces.Constraint{{Kind: interfaces.ConstraintPin, Shards: []interfaces.ShardID{"s"}, Children: []interfaces.ChildID{"a", "b"}}}
			return c
		}(), "constraints[0].children: must name exactly one child"},
		{func() Config {
			c := base
			c.Constraints = []interfaces.Constraint{{Kind: interfaces.ConstraintAvoid, Children: []interfaces.ChildID{"a"}}}
			return c
		}(), "constraints[0].shards: is required for avoid"},
		{func() Config {
			c := base
			c.Constraints = []interfaces.Constraint{{Kind: interfaces.ConstraintMaxMoves, Max: -1}}
			return c
		}(), "max and max_bytes must be ≥ 0"},
		{func() Config { c := base; c.Constraints = []interfaces.Constraint{{Kind: 42}}; return c }(), "constraints[0].kind"},
		{Config{Integration: IntegrationCollaborative, Labels: map[string]string{"": "x"}}, "labels: keys must not be empty"},
	} {
		err := tc.c.validateIntegration()
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, interfaces.ErrInvalid) {
			t.Errorf("%+v: got %v, want %q", tc.c, err, tc.want)
		}
	}
	if err := (Config{Integration: IntegrationDecoupled}).validateIntegration(); err != nil {
		t.Fatal(err)
	}
}

// A what-if plan sees the cooperation rules a round would: the operator's in
// manual mode, the last derived ones in collaborative mode, none when
// decoupled — and asking changes nothing.
func TestRulesInForce(t *testing.T) {
	v := &interfaces.View{
		Children: []interfaces.Child{{ID: "r1"}, {ID: "r2"}},
		Shards:   []interfaces.Shard{{ID: "s1"}, {ID: "s2"}},
	}
	op := interfaces.Constraint{Kind: interfaces.ConstraintAllowed, Shards: []interfaces.ShardID{"s1"}, Children: []interfaces.ChildID{"r2"}, Reason: "operator: s1 in r2"}
	derived := interfaces.Constraint{Kind: interfaces.ConstraintAllowed, Shards: []interfaces.ShardID{"s2", "gone"}, Children: []interfaces.ChildID{"r1"}, Reason: "r2 shed it"}
	for _, tc := range []struct {
		mode string
		want []string
	}{
		{IntegrationDecoupled, nil},
		{IntegrationManual, []string{"operator: s1 in r2"}},
		{IntegrationCollaborative, []string{"r2 shed it"}},
	} {
		d := &Daemon{cfg: Config{Integration: tc.mode, Constraints: []interfaces.Constraint{op}}}
		d.coop.last = []interfaces.Constraint{derived}
		var got []string
		for _, c := range d.rulesInForce(v) {
			got = append(got, c.Reason)
			for _, s := range c.Shards {
				if s == "gone" {
					t.Errorf("%s: a shard outside the view is kept: %+v", tc.mode, c)
				}
			}
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: rules %v, want %v", tc.mode, got, tc.want)
		}
		if len(d.coop.last) != 1 || len(d.coop.last[0].Shards) != 2 {
			t.Errorf("%s: asking changed the derived rules: %+v", tc.mode, d.coop.last)
		}
	}
}
