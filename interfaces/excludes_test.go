package interfaces

import "testing"

func TestExcludesAndMatchesLabels(t *testing.T) {
	c := Child{ID: "h1", Labels: map[string]string{"zone": "a", "disk": "ssd"}}
	cases := []struct {
		name    string
		sc      ShardConstraints
		why     string
		matches bool
	}{
		{"no rules", ShardConstraints{}, "", true},
		{"pinned here", ShardConstraints{Pinned: "h1"}, "", true},
		{"pinned elsewhere", ShardConstraints{Pinned: "h2"}, `pinned to "h2"`, true},
		{"allowed", ShardConstraints{Allowed: []ChildID{"h0", "h1"}}, "", true},
		{"not allowed", ShardConstraints{Allowed: []ChildID{"h0"}}, "not among its allowed children", true},
		{"labels held", ShardConstraints{Labels: map[string]string{"zone": "a", "disk": "ssd"}}, "", true},
		{"label value differs", ShardConstraints{Labels: map[string]string{"zone": "b"}}, `needs label zone=b (the child has "a")`, false},
		// Two labels missing: the reason names the first in key order, every time.
		{"labels missing", ShardConstraints{Labels: map[string]string{"rack": "r1", "gpu": "yes"}}, `needs label gpu=yes (the child has "")`, false},
	}
	for _, tc := range cases {
		for range 5 {
			if got := tc.sc.Excludes(&c); got != tc.why {
				t.Errorf("%s: Excludes = %q, want %q", tc.name, got, tc.why)
			}
		}
		if got := tc.sc.MatchesLabels(&c); got != tc.matches {
			t.Errorf("%s: MatchesLabels = %v, want %v", tc.name, got, tc.matches)
		}
	}
}
