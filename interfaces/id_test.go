package interfaces

import (
	"strings"
	"testing"
)

// TestValidIDMatchesPattern: the hand-written check accepts exactly what
// idPattern accepts, on edge cases and on every string of up to 3 characters
// over an alphabet with allowed, disallowed and non-ASCII characters.
func TestValidIDMatchesPattern(t *testing.T) {
	cases := []string{"", "a", "-a", "a-", ".x", "x.y", "shard-12", "a b", "é", "aé", "a\n", "a\x00",
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
		if got, want := validID(id), idPattern.MatchString(id); got != want {
			t.Errorf("validID(%q) = %v, the pattern says %v", id, got, want)
		}
	}
}
