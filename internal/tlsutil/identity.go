package tlsutil

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// The roles a certificate can name besides a tier replica.
const (
	RoleHost     = "host"
	RolePlugin   = "plugin"
	RoleOperator = "operator"
	RoleWorker   = "worker"
	// RoleReplica is a replica of a tier instance (global, region, or a
	// custom tier); Identity.Tier names the tier.
	RoleReplica = "replica"
)

// Scheme is the URI scheme of identities.
const Scheme = "strata"

// ErrIdentity is wrapped by every refusal of a peer's identity.
var ErrIdentity = errors.New("identity refused")

// Identity is who a certificate says its holder is.
//
//	replica of a tier instance: strata://TIER/INSTANCE/NODE (strata://region/eu-1/n1,
//	                            strata://global/global/g1)
//	host, plugin, operator, worker: strata://ROLE/ID (strata://host/h-7)
type Identity struct {
	Role     string // RoleReplica, RoleHost, RolePlugin, RoleOperator or RoleWorker
	Tier     string // replicas: the tier ("global", "region", "rack")
	Instance string // replicas: the tier instance ("eu-1"; "global" for the global tier)
	ID       string // replicas: the Raft node ID; others: the host, plugin, operator or worker name
}

// Replica is the identity of replica node of tier instance tier/instance.
func Replica(tier, instance, node string) Identity {
	return Identity{Role: RoleReplica, Tier: tier, Instance: instance, ID: node}
}

// Named is the identity of a host, plugin, operator or worker.
func Named(role, id string) Identity { return Identity{Role: role, ID: id} }

// URI is the identity as the URI SAN a certificate carries.
func (id Identity) URI() *url.URL {
	if id.Role == RoleReplica {
		return &url.URL{Scheme: Scheme, Host: id.Tier, Path: "/" + id.Instance + "/" + id.ID}
	}
	return &url.URL{Scheme: Scheme, Host: id.Role, Path: "/" + id.ID}
}

func (id Identity) String() string { return id.URI().String() }

// Describe names the identity in words: "host h-7", "region eu-1 replica n1".
func (id Identity) Describe() string {
	if id.Role == RoleReplica {
		return fmt.Sprintf("%s %s replica %s", id.Tier, id.Instance, id.ID)
	}
	return id.Role + " " + id.ID
}

// Validate checks every part of the identity: a known role, and parts that
// are non-empty, without '/', and not "." or "..".
func (id Identity) Validate() error {
	parts := []struct{ name, v string }{{"id", id.ID}}
	switch id.Role {
	case RoleReplica:
		parts = append(parts, struct{ name, v string }{"tier", id.Tier}, struct{ name, v string }{"instance", id.Instance})
		if isNamedRole(id.Tier) {
			return fmt.Errorf("identity: tier %q: is a role name, not a tier", id.Tier)
		}
	case RoleHost, RolePlugin, RoleOperator, RoleWorker:
		if id.Tier != "" || id.Instance != "" {
			return fmt.Errorf("identity: role %s has no tier or instance", id.Role)
		}
	default:
		return fmt.Errorf("identity: role: must be a tier replica, host, plugin, operator or worker (got %q)", id.Role)
	}
	for _, p := range parts {
		if err := checkSegment(p.v); err != nil {
			return fmt.Errorf("identity: %s %q: %v", p.name, p.v, err)
		}
	}
	return nil
}

func isNamedRole(s string) bool {
	switch s {
	case RoleHost, RolePlugin, RoleOperator, RoleWorker:
		return true
	}
	return false
}

// checkSegment: letters, digits, '.', '_' and '-'; not "." or "..".
func checkSegment(s string) error {
	if s == "" {
		return errors.New("must not be empty")
	}
	if s == "." || s == ".." {
		return errors.New(`must not be "." or ".."`)
	}
	for _, r := range s {
		ok := r == '.' || r == '_' || r == '-' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
		if !ok {
			return fmt.Errorf("may hold only letters, digits, '.', '_' and '-' (found %q)", r)
		}
	}
	return nil
}

// ParseURI reads an identity from its URI (strata://host/h-7).
func ParseURI(u *url.URL) (Identity, error) {
	if u.Scheme != Scheme {
		return Identity{}, fmt.Errorf("identity %q: scheme must be %s", u, Scheme)
	}
	segs := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
	var id Identity
	switch len(segs) {
	case 1:
		id = Named(u.Host, segs[0])
	case 2:
		id = Replica(u.Host, segs[0], segs[1])
	default:
		return Identity{}, fmt.Errorf("identity %q: must be strata://ROLE/ID or strata://TIER/INSTANCE/NODE", u)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Port() != "" {
		return Identity{}, fmt.Errorf("identity %q: must be strata://ROLE/ID or strata://TIER/INSTANCE/NODE", u)
	}
	if err := id.Validate(); err != nil {
		return Identity{}, fmt.Errorf("identity %q: %w", u, err)
	}
	return id, nil
}

// FromCert reads the identity a certificate names: its one strata:// URI SAN.
func FromCert(c *x509.Certificate) (Identity, error) {
	var found []*url.URL
	for _, u := range c.URIs {
		if u.Scheme == Scheme {
			found = append(found, u)
		}
	}
	switch len(found) {
	case 0:
		return Identity{}, fmt.Errorf("certificate %q names no Strata identity (no strata:// URI SAN): %w", c.Subject.CommonName, ErrIdentity)
	case 1:
	default:
		return Identity{}, fmt.Errorf("certificate %q names %d Strata identities, want one: %w", c.Subject.CommonName, len(found), ErrIdentity)
	}
	id, err := ParseURI(found[0])
	if err != nil {
		return Identity{}, fmt.Errorf("certificate %q: %v: %w", c.Subject.CommonName, err, ErrIdentity)
	}
	return id, nil
}

// A Check accepts or refuses a peer's identity; its error says why.
type Check func(Identity) error

// refuse is the error of every Check: it names what was expected and what the
// certificate says.
func refuse(got Identity, want string) error {
	return fmt.Errorf("peer certificate names %s (%s), want %s: %w", got.Describe(), got, want, ErrIdentity)
}

// IsReplicaOf accepts a replica of tier instance tier/instance (any node).
func IsReplicaOf(tier, instance string) Check {
	return func(id Identity) error {
		if id.Role != RoleReplica || id.Tier != tier || id.Instance != instance {
			return refuse(id, fmt.Sprintf("a replica of %s %s", tier, instance))
		}
		return nil
	}
}

// IsAnyReplica accepts a replica of any tier instance.
func IsAnyReplica(id Identity) error {
	if id.Role != RoleReplica {
		return refuse(id, "a tier replica")
	}
	return nil
}

// IsRole accepts any identity of one of roles (RoleReplica for any replica).
func IsRole(roles ...string) Check {
	return func(id Identity) error {
		for _, r := range roles {
			if id.Role == r {
				return nil
			}
		}
		return refuse(id, "a certificate of role "+strings.Join(roles, " or "))
	}
}

// IsChild accepts the identity a child claiming childTier/childID must have: a
// host certificate naming the host, or a replica certificate of the child
// tier instance (any of its nodes).
func IsChild(childTier, childID string) Check {
	return func(id Identity) error {
		if childTier == RoleHost {
			if id.Role != RoleHost || id.ID != childID {
				return refuse(id, "host "+childID)
			}
			return nil
		}
		return IsReplicaOf(childTier, childID)(id)
	}
}
