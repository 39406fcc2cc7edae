package acl

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/strata-sched/strata/interfaces"
)

func TestPolicies(t *testing.T) {
	for _, tc := range []struct {
		have, need Policy
		ok         bool
	}{
		{PolicyRead, PolicyRead, true}, {PolicyRead, PolicyOperate, false}, {PolicyRead, PolicyAdmin, false},
		{PolicyOperate, PolicyRead, true}, {PolicyOperate, PolicyOperate, true}, {PolicyOperate, PolicyAdmin, false},
		{PolicyAdmin, PolicyAdmin, true}, {PolicyNone, PolicyNone, false}, {policyEnd, PolicyRead, false},
	} {
		if got := tc.have.Allows(tc.need); got != tc.ok {
			t.Errorf("%s allows %s = %v, want %v", tc.have, tc.need, got, tc.ok)
		}
	}
	for _, name := range []string{"read", "operate", "admin"} {
		p, err := ParsePolicy("policy", name)
		if err != nil || p.String() != name {
			t.Errorf("ParsePolicy(%q) = %v, %v", name, p, err)
		}
	}
	if _, err := ParsePolicy("policy", "none"); !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), "policy: "+PolicyRule) {
		t.Errorf("ParsePolicy(none): %v", err)
	}
}

func TestSecretsAndBearer(t *testing.T) {
	s, err := NewSecret(bytes.NewReader(make([]byte, 32)))
	if err != nil || !strings.HasPrefix(s, SecretPrefix) || CheckSecret("secret", s) != nil {
		t.Fatalf("NewSecret: %q, %v", s, err)
	}
	if _, err := NewSecret(bytes.NewReader(nil)); err == nil {
		t.Error("NewSecret from an empty reader: no error")
	}
	for _, bad := range []string{"short", strings.Repeat("a", 23), strings.Repeat("a", 30) + " x", strings.Repeat("é", 20)} {
		if err := CheckSecret("secret", bad); !errors.Is(err, interfaces.ErrInvalid) {
			t.Errorf("CheckSecret(%q): %v", bad, err)
		}
	}
	for v, want := range map[string]string{"Bearer abc": "abc", "bearer abc ": "abc", "Basic abc": "", "Bearer ": "", "": ""} {
		got, ok := ParseBearer(v)
		if got != want || ok != (want != "") {
			t.Errorf("ParseBearer(%q) = %q, %v", v, got, ok)
		}
	}
	if HashSecret("a").Equal(HashSecret("b")) || !HashSecret("a").Equal(HashSecret("a")) {
		t.Error("Hash.Equal")
	}
}

func TestTokenValidate(t *testing.T) {
	ok := Token{ID: "ci", Policy: PolicyRead, Hash: HashSecret("x")}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for field, tok := range map[string]Token{
		"token.id":          {ID: "a/../b", Policy: PolicyRead, Hash: ok.Hash},
		"token.policy":      {ID: "a", Hash: ok.Hash},
		"token.hash":        {ID: "a", Policy: PolicyAdmin},
		"token.description": {ID: "a", Policy: PolicyAdmin, Hash: ok.Hash, Description: strings.Repeat("d", interfaces.MaxTextLen+1)},
	} {
		if err := tok.Validate(); !errors.Is(err, interfaces.ErrInvalid) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v", field, err)
		}
	}
}
