package wire_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/strata-sched/strata/interfaces/wire"
)

func TestNegotiate(t *testing.T) {
	cases := []struct {
		ours, theirs []uint32
		want         uint32
		fail         bool
	}{
		{[]uint32{1}, []uint32{1}, 1, false},
		{[]uint32{1, 2, 3}, []uint32{2, 3, 4}, 3, false},
		{[]uint32{3, 1, 2}, []uint32{4, 1, 2}, 2, false},
		{[]uint32{1, 2}, []uint32{3, 4}, 0, true},
		{[]uint32{1}, nil, 0, true},
		{[]uint32{0, 1}, []uint32{0}, 0, true}, // 0 is never a version
	}
	for _, c := range cases {
		got, err := wire.Negotiate(c.ours, c.theirs)
		if c.fail {
			if !errors.Is(err, wire.ErrNoCommonVersion) {
				t.Errorf("Negotiate(%v, %v) = %d, %v; want ErrNoCommonVersion", c.ours, c.theirs, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Negotiate(%v, %v) = %d, %v; want %d", c.ours, c.theirs, got, err, c.want)
		}
	}
	_, err := wire.Negotiate([]uint32{2, 1}, []uint32{5})
	if err == nil || !strings.Contains(err.Error(), "we speak [1 2], the peer speaks [5]") {
		t.Errorf("error message: %v", err)
	}
}

func TestVersionRange(t *testing.T) {
	cases := []struct {
		lo, hi uint32
		want   []uint32
	}{
		{1, 3, []uint32{1, 2, 3}},
		{0, 3, []uint32{3}},
		{2, 2, []uint32{2}},
		{3, 2, nil},
		{0, 0, nil},
		{^uint32(0) - 1, ^uint32(0), []uint32{^uint32(0) - 1, ^uint32(0)}}, // no overflow at the top
	}
	for _, c := range cases {
		if got := wire.VersionRange(c.lo, c.hi); !reflect.DeepEqual(got, c.want) {
			t.Errorf("VersionRange(%d, %d) = %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
	if got := wire.HelloVersions(&wire.Hello{ProtocolVersion: 2, MinProtocolVersion: 1}); !reflect.DeepEqual(got, []uint32{1, 2}) {
		t.Errorf("HelloVersions = %v", got)
	}
	if got := wire.HelloVersions(nil); got != nil {
		t.Errorf("HelloVersions(nil) = %v", got)
	}
	sv := wire.SupportedVersions()
	if len(sv) == 0 || sv[0] != wire.MinContractVersion || sv[len(sv)-1] != wire.ContractVersion {
		t.Errorf("SupportedVersions = %v (min %d, max %d)", sv, wire.MinContractVersion, wire.ContractVersion)
	}
}
