package wire

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// ContractVersion is the version of the strata.v1 contract this build speaks at
// most: the session protocol and the tier-policy contract share it. It grows only
// when the meaning of the contract changes in a way an older peer would get wrong;
// appending fields or enum values does not change it.
const ContractVersion uint32 = 1

// MinContractVersion is the oldest contract version this build still speaks.
const MinContractVersion uint32 = 1

// ErrNoCommonVersion: the two sides of a session or a plugin call speak no contract
// version in common (gRPC FailedPrecondition).
var ErrNoCommonVersion = errors.New("no common contract version")

// SupportedVersions lists the contract versions this build speaks, oldest first.
func SupportedVersions() []uint32 {
	return VersionRange(MinContractVersion, ContractVersion)
}

// VersionRange lists the versions from lo to hi, oldest first. lo of 0 means hi
// alone (a Hello that leaves min_protocol_version unset); hi of 0 or below lo is
// the empty list.
func VersionRange(lo, hi uint32) []uint32 {
	if lo == 0 {
		lo = hi
	}
	if hi == 0 || hi < lo {
		return nil
	}
	out := make([]uint32, 0, hi-lo+1)
	for v := lo; ; v++ {
		out = append(out, v)
		if v == hi {
			break
		}
	}
	return out
}

// HelloVersions lists the contract versions a child offers in its Hello.
func HelloVersions(h *Hello) []uint32 {
	return VersionRange(h.GetMinProtocolVersion(), h.GetProtocolVersion())
}

// Negotiate returns the highest version in both ours and theirs. With none in
// common it returns an error that wraps ErrNoCommonVersion and lists both sides.
func Negotiate(ours, theirs []uint32) (uint32, error) {
	have := make(map[uint32]bool, len(ours))
	for _, v := range ours {
		have[v] = true
	}
	best, found := uint32(0), false
	for _, v := range theirs {
		if v != 0 && have[v] && (!found || v > best) {
			best, found = v, true
		}
	}
	if !found {
		return 0, fmt.Errorf("we speak %s, the peer speaks %s: %w", versionList(ours), versionList(theirs), ErrNoCommonVersion)
	}
	return best, nil
}

func versionList(vs []uint32) string {
	if len(vs) == 0 {
		return "none"
	}
	s := append([]uint32(nil), vs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = fmt.Sprint(v)
	}
	return "[" + strings.Join(parts, " ") + "]"
}
