package interfaces

import (
	"errors"
	"strings"
	"testing"
)

// TestValidIDMatchesPattern: the hand-written check accepts exactly what
// idPattern accepts, on edge cases and on every string of up to 3 characters
// over an alphabet with allowed, disallowed and non-ASCII characters.
func TestValidIDMatchesPattern(t *testing.T) {
	cases := []string{"", "a", "-a", "a-", ".x", "x.y", "shard-12", "a b", "é", "aé", "a\n", "a\x00",
		"a/../../etc", "a//b", "a/", "a/.", "a/..", "a/.x", "j/0", "a/b/c", strings.Repeat("a/", 126) + "a",
		strings.Repeat("a", 253), strings.Repeat("a", 254), strings.Repeat("é", 100), "A:b/c_d.e-f"}
	alphabet := []string{"a", "Z", "0", ".", "_", ":", "/", "-", " ", "é", "\n", "+"}
	var gen func(prefix string, n int)
	gen = func(prefix string, n int) {
		cases = append(cases, prefix)
		if n == 0 {
			return
		}
		for _, c := range alphabet {
			gen(prefix+c, n-1)
		}
	}
	gen("", 3)
	for _, id := range cases {
		if got, want := validID(id), len(id) <= 253 && idPattern.MatchString(id); got != want {
			t.Errorf("validID(%q) = %v, the pattern says %v", id, got, want)
		}
	}
}

// TestIDsNamePaths: an ID cannot climb out of a directory it is joined to, nor
// name an empty, "." or ".." segment; job and child IDs contain no "/", a
// shard ID one at most. Each refusal names the field and the rule.
func TestIDsNamePaths(t *testing.T) {
	for _, tc := range []struct {
		check func(field, id string) error
		id    string
		rule  string // "" when valid
	}{
		{ValidateID, "a/../../etc", IDRule},
		{ValidateID, "a//b", IDRule},
		{ValidateID, "a/", IDRule},
		{ValidateID, "/a", IDRule},
		{ValidateID, "a/./b", IDRule},
		{ValidateID, "a/..", IDRule},
		{ValidateID, "..", IDRule},
		{ValidateID, "a/.hidden", IDRule},
		{ValidateID, "a/-x", IDRule},
		{ValidateID, "a.b/c..d", ""}, // dots inside a segment are fine
		{ValidateShardID, "job/0", ""},
		{ValidateShardID, "job/0/1", ShardIDRule},
		{ValidateShardID, "a/../etc", IDRule},
		{ValidateName, "job", ""},
		{ValidateName, "team/job", NameRule},
		{ValidateName, "a/../../etc", IDRule},
	} {
		err := tc.check("shard.id", tc.id)
		if tc.rule == "" {
			if err != nil {
				t.Errorf("%q: %v, want valid", tc.id, err)
			}
			continue
		}
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "shard.id: "+tc.rule) {
			t.Errorf("%q: %v, want an ErrInvalid naming shard.id and %q", tc.id, err, tc.rule)
		}
	}
	// The spec checks use them: a shard of job "a/../../etc" is refused for its job.
	s := Shard{ID: "x/0", Job: "a/../../etc", Load: Load{CPU: 1}}
	if err := ValidateShard(s); err == nil || !strings.Contains(err.Error(), "shard.job") {
		t.Errorf("ValidateShard with a path job: %v", err)
	}
	if i, err := ValidateShards([]Shard{{ID: "j/0", Job: "j"}, {ID: "j/0/../x", Job: "j"}}); i != 1 || err == nil || !strings.Contains(err.Error(), "shard.id") {
		t.Errorf("ValidateShards: %d, %v; want index 1 refused for shard.id", i, err)
	}
	if err := ValidateChild(Child{ID: "h/1", Tier: TierHost, Capacity: Load{CPU: 1}}); err == nil || !strings.Contains(err.Error(), "child.id: "+NameRule) {
		t.Errorf("ValidateChild(h/1): %v", err)
	}
}
