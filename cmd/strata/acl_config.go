package main

import (
	"fmt"

	"gopkg.in/yaml.v3"

	"github.com/strata-sched/strata/coordinator/tierd"
	"github.com/strata-sched/strata/interfaces"
)

// aclFile is a tier config's acl section (tierd.ACLConfig): a mapping
// {enabled, bootstrap_token_file, anonymous_http}, or the word disabled. As
// with tls, outside 'strata dev' a tier config without it refuses to start
// (docs/security.md, "Authorization (ACL tokens)").
type aclFile struct {
	set                bool // the key is present
	disabled           bool
	Enabled            bool
	BootstrapTokenFile string
	AnonymousHTTP      []string
}

func (a *aclFile) UnmarshalYAML(n *yaml.Node) error {
	a.set = true
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Value != "disabled" {
			return fmt.Errorf("line %d: must be {enabled: true, ...} or the word disabled (got %q)", n.Line, n.Value)
		}
		a.disabled = true
		return nil
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			var err error
			switch k.Value {
			case "enabled":
				err = v.Decode(&a.Enabled)
			case "bootstrap_token_file":
				err = v.Decode(&a.BootstrapTokenFile)
			case "anonymous_http":
				err = v.Decode(&a.AnonymousHTTP)
			default:
				return fmt.Errorf("line %d: acl.%s: unknown key (known here: enabled, bootstrap_token_file, anonymous_http)", k.Line, k.Value)
			}
			if err != nil {
				return fmt.Errorf("line %d: acl.%s: %v", v.Line, k.Value, err)
			}
		}
		return nil
	}
	return fmt.Errorf("line %d: must be {enabled: true, ...} or the word disabled", n.Line)
}

// errACLRequired is the refusal of a tier config without an acl section.
var errACLRequired = fmt.Errorf(`acl: is required outside 'strata dev': give acl: {enabled: true} (the Admin API then needs a token; the group's first leader writes a bootstrap token to <data_dir>/acl-bootstrap-token unless acl.bootstrap_token_file names one), or say "acl: disabled" to let anyone who reaches the Admin API call it (see docs/security.md): %w`, interfaces.ErrInvalid)

// config is the daemon's ACL configuration; an error when the section is
// missing. "acl: disabled" and "acl: {enabled: false}" both turn tokens off
// (and the daemon warns at every start).
func (a aclFile) config() (tierd.ACLConfig, error) {
	if !a.set {
		return tierd.ACLConfig{}, errACLRequired
	}
	if a.disabled {
		return tierd.ACLConfig{}, nil
	}
	return tierd.ACLConfig{Enabled: a.Enabled, BootstrapTokenFile: a.BootstrapTokenFile, AnonymousHTTP: a.AnonymousHTTP}, nil
}
