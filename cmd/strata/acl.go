package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/strata-sched/strata/coordinator/acl"
	"github.com/strata-sched/strata/interfaces"
	"github.com/strata-sched/strata/interfaces/wire"
)

func init() { commands = append(commands, newACLCmd) }

// newACLCmd is "strata acl": the ACL tokens of the Admin API
// (docs/security.md, "Authorization (ACL tokens)").
func newACLCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "acl",
		Short: "Manage the ACL tokens of the Admin API",
		Long: `Manage the ACL tokens of the Admin API. Every tier instance keeps its own tokens in
its Raft group; these commands need an admin token (--token or STRATA_TOKEN), such
as the bootstrap token. Policies: read (status, shards, jobs, explain, Raft peers),
operate (read, and drain, undrain, plan, apply a plan, release a shard) and admin
(operate, and submit and delete jobs, Raft membership, tokens).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	token := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke tokens",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	token.AddCommand(newTokenCreateCmd(g), newTokenListCmd(g), newTokenRevokeCmd(g))
	cmd.AddCommand(token)
	return cmd
}

type tokenCreateJSON struct {
	ID        string   `json:"id"`
	Policy    string   `json:"policy"`
	Secret    string   `json:"secret"`
	Instances []string `json:"instances"` // tier/instance where it was created
}

func newTokenCreateCmd(g *globalOptions) *cobra.Command {
	var cf clientFlags
	var out outputFlag
	var policy, desc string
	var tree bool
	cmd := &cobra.Command{
		Use:   "create ID",
		Short: "Create a token and print its secret (once: tiers keep only its hash)",
		Long: `Create a token with a policy at the tier instance --addr names and print its
secret. The secret is shown once: the tier stores only its SHA-256.

With --tree the same secret is created at every tier instance of the tree below
--addr too (the regions and any custom tier, reached as "strata status" reaches
them), so that one token serves the commands that walk the tree (status, shards,
host drain). It stops at the first instance that refuses, naming it; the
instances already done keep the token (revoke it with 'strata acl token revoke
ID --tree').`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return usageErr(err)
			}
			if err := cf.check(); err != nil {
				return err
			}
			if err := interfaces.ValidateName("ID", args[0]); err != nil {
				return usageErr(err)
			}
			if _, err := acl.ParsePolicy("--policy", policy); err != nil {
				return usageErr(err)
			}
			ctx, conns, done := cf.connect()
			defer done()
			addrs, err := tokenTargets(ctx, conns, cf.addr, tree)
			if err != nil {
				return err
			}
			req := &wire.CreateTokenRequest{Id: args[0], Policy: policy, Description: desc}
			if tree {
				// One secret for every instance: made here, sent to each.
				if req.Secret, err = acl.NewSecret(rand.Reader); err != nil {
					return err
				}
			}
			res := tokenCreateJSON{ID: args[0], Policy: policy}
			for _, t := range addrs {
				c, err := conns.client(t.addr)
				if err != nil {
					return err
				}
				r, err := c.CreateToken(ctx, req)
				if err != nil {
					return remoteCallErr(t.addr, fmt.Errorf("%s: %w", t.name, err))
				}
				res.Secret = r.GetSecret()
				res.Instances = append(res.Instances, t.name)
			}
			return out.print(g.stdout, res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "token %s (%s) created at %d tier instance(s); its secret, shown only now:\n%s\n", res.ID, res.Policy, len(res.Instances), res.Secret)
				return err
			})
		},
	}
	cf.register(cmd)
	out.register(cmd)
	cmd.Flags().StringVar(&policy, "policy", "read", "the token's policy: read, operate or admin")
	cmd.Flags().StringVar(&desc, "description", "", "what the token is for")
	cmd.Flags().BoolVar(&tree, "tree", false, "create the same token at every tier instance below --addr too")
	return cmd
}

// tokenTarget is a tier instance to manage tokens at.
type tokenTarget struct{ name, addr string }

// tokenTargets is the instance at addr, and with tree every instance below it.
func tokenTargets(ctx context.Context, conns *adminConns, addr string, tree bool) ([]tokenTarget, error) {
	if !tree {
		return []tokenTarget{{name: addr, addr: addr}}, nil
	}
	roots, err := walkTree(ctx, conns, addr)
	if err != nil {
		return nil, err
	}
	if u := unreachable(roots); len(u) > 0 {
		return nil, &exitError{code: 1, err: fmt.Errorf("--tree: %d tier instance(s) cannot be reached; nothing was changed: %v", len(u), u)}
	}
	var out []tokenTarget
	eachInstance(roots, func(n *tierNode, _ *childNode) {
		out = append(out, tokenTarget{name: n.Tier + "/" + n.Instance, addr: n.Address})
	})
	return out, nil
}

func newTokenListCmd(g *globalOptions) *cobra.Command {
	var cf clientFlags
	var out outputFlag
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the tokens of a tier instance (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return usageErr(err)
			}
			if err := cf.check(); err != nil {
				return err
			}
			ctx, c, done, err := cf.admin()
			if err != nil {
				return err
			}
			defer done()
			r, err := c.ListTokens(ctx, &wire.ListTokensRequest{})
			if err != nil {
				return remoteCallErr(cf.addr, err)
			}
			type row struct {
				ID          string `json:"id"`
				Policy      string `json:"policy"`
				HashPrefix  string `json:"hash_prefix"`
				Bootstrap   bool   `json:"bootstrap,omitempty"`
				Description string `json:"description,omitempty"`
			}
			rows := []row{}
			for _, t := range r.GetTokens() {
				rows = append(rows, row{t.GetId(), t.GetPolicy(), t.GetHashPrefix(), t.GetBootstrap(), t.GetDescription()})
			}
			return out.print(g.stdout, rows, func(w io.Writer) error {
				tw := newTable(w)
				fmt.Fprintln(tw, "ID\tPOLICY\tHASH\tDESCRIPTION")
				for _, t := range rows {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.ID, t.Policy, t.HashPrefix, t.Description)
				}
				return tw.Flush()
			})
		},
	}
	cf.register(cmd)
	out.register(cmd)
	return cmd
}

func newTokenRevokeCmd(g *globalOptions) *cobra.Command {
	var cf clientFlags
	var tree bool
	cmd := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a token (at once: the next call with it is refused)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cf.check(); err != nil {
				return err
			}
			if err := interfaces.ValidateName("ID", args[0]); err != nil {
				return usageErr(err)
			}
			ctx, conns, done := cf.connect()
			defer done()
			addrs, err := tokenTargets(ctx, conns, cf.addr, tree)
			if err != nil {
				return err
			}
			for _, t := range addrs {
				c, err := conns.client(t.addr)
				if err != nil {
					return err
				}
				if _, err := c.RevokeToken(ctx, &wire.RevokeTokenRequest{Id: args[0]}); err != nil {
					return remoteCallErr(t.addr, fmt.Errorf("%s: %w", t.name, err))
				}
				fmt.Fprintf(g.stdout, "revoked %s at %s\n", args[0], t.name)
			}
			return nil
		},
	}
	cf.register(cmd)
	cmd.Flags().BoolVar(&tree, "tree", false, "revoke it at every tier instance below --addr too")
	return cmd
}
