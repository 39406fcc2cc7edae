package acl

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"strings"

	"github.com/strata-sched/strata/interfaces"
)

// Policy is what a token may do. Each policy allows what the ones below it
// allow.
type Policy uint8

// Policies. Values are stored in the Raft log and snapshots: only ever append.
const (
	PolicyNone    Policy = iota // no access; never a token's policy
	PolicyRead                  // status, shards, jobs, explain, plans as what-ifs, Raft peers
	PolicyOperate               // read, and drain/undrain, apply plan, release shard
	PolicyAdmin                 // operate, and jobs submit/delete, Raft membership, tokens
	policyEnd
)

var policyNames = [...]string{"none", "read", "operate", "admin"}

func (p Policy) String() string {
	if int(p) < len(policyNames) {
		return policyNames[p]
	}
	return fmt.Sprintf("policy(%d)", uint8(p))
}

// Valid says whether p is a token's policy (read, operate or admin).
func (p Policy) Valid() bool { return p > PolicyNone && p < policyEnd }

// Allows says whether a token with policy p may make a call that needs need.
func (p Policy) Allows(need Policy) bool { return p.Valid() && p >= need }

// PolicyRule is the rule ParsePolicy enforces, for messages and docs.
const PolicyRule = "must be read, operate or admin"

// ParsePolicy reads a policy name; field names the input in the error.
func ParsePolicy(field, s string) (Policy, error) {
	for i := PolicyRead; i < policyEnd; i++ {
		if policyNames[i] == s {
			return i, nil
		}
	}
	return PolicyNone, fmt.Errorf("%s: %s (got %q): %w", field, PolicyRule, s, interfaces.ErrInvalid)
}

// Hash is the SHA-256 of a token's secret. A tier stores only the hash: a
// copy of its state (a snapshot, a backup) does not give the secrets away. The
// secrets are 32 random bytes, so a plain hash (no salt, no slow KDF) is as
// strong as the secret.
type Hash [sha256.Size]byte

// HashSecret returns the hash a tier stores for secret.
func HashSecret(secret string) Hash { return sha256.Sum256([]byte(secret)) }

// String is the hash in hex.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// Equal compares two hashes in constant time.
func (h Hash) Equal(o Hash) bool { return subtle.ConstantTimeCompare(h[:], o[:]) == 1 }

// Token is a token as a tier stores it.
type Token struct {
	// ID names the token (an interfaces ID without "/"): it is public, shown by
	// "strata acl token list" and used to revoke it.
	ID     string
	Policy Policy
	Hash   Hash
	// Description is free text (at most interfaces.MaxTextLen bytes).
	Description string
}

// Validate checks a token, naming the field and the rule.
func (t Token) Validate() error {
	if err := interfaces.ValidateName("token.id", t.ID); err != nil {
		return err
	}
	if !t.Policy.Valid() {
		return fmt.Errorf("token.policy: %s (got %s): %w", PolicyRule, t.Policy, interfaces.ErrInvalid)
	}
	if t.Hash == (Hash{}) {
		return fmt.Errorf("token.hash: is required: %w", interfaces.ErrInvalid)
	}
	if len(t.Description) > interfaces.MaxTextLen {
		return fmt.Errorf("token.description: must be at most %d bytes (got %d): %w", interfaces.MaxTextLen, len(t.Description), interfaces.ErrInvalid)
	}
	return nil
}

// SecretPrefix starts every secret NewSecret makes, so that a leaked one is
// easy to recognise (and to search for in logs).
const SecretPrefix = "strata_"

// minSecretLen bounds the secrets a tier accepts from a caller or a file:
// anything shorter is too easy to guess.
const minSecretLen = 24

// NewSecret makes a secret from 32 bytes of rand (crypto/rand.Reader in the
// daemons; a fixed reader in tests).
func NewSecret(rand io.Reader) (string, error) {
	var b [32]byte
	if _, err := io.ReadFull(rand, b[:]); err != nil {
		return "", fmt.Errorf("token secret: %w", err)
	}
	return SecretPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// CheckSecret checks a secret given by a caller or read from a file: at least
// 24 printable ASCII characters without spaces.
func CheckSecret(field, s string) error {
	if len(s) < minSecretLen {
		return fmt.Errorf("%s: must be at least %d characters (got %d): %w", field, minSecretLen, len(s), interfaces.ErrInvalid)
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return fmt.Errorf("%s: must be printable ASCII without spaces (byte %d is %#x): %w", field, i, s[i], interfaces.ErrInvalid)
		}
	}
	return nil
}

// MetadataKey is the gRPC metadata key that carries the token.
const MetadataKey = "authorization"

// BearerPrefix starts the value of the authorization header.
const BearerPrefix = "Bearer "

// Bearer returns the header value that carries secret.
func Bearer(secret string) string { return BearerPrefix + secret }

// ParseBearer reads the secret from an authorization header value ("Bearer
// <secret>"; the scheme is matched without regard to case).
func ParseBearer(v string) (string, bool) {
	if len(v) < len(BearerPrefix) || !strings.EqualFold(v[:len(BearerPrefix)], BearerPrefix) {
		return "", false
	}
	s := strings.TrimSpace(v[len(BearerPrefix):])
	return s, s != ""
}
