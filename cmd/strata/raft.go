package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/spf13/cobra"
	"github.com/strata-sched/strata/coordinator/raftnode"
)

func init() { commands = append(commands, newRaftCmd) }

// newRaftCmd is "strata raft": cluster membership of a tier's Raft group, through
// any replica's admin endpoint (writes are forwarded to the leader).
func newRaftCmd(g *globalOptions) *cobra.Command {
	var addr string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "raft",
		Short: "Inspect and change the membership of a tier's Raft group",
		Long: `Inspect and change the membership of a tier's Raft group through the Raft admin
endpoint of any of its replicas (--addr: the replica's listen.admin address, which a
tier daemon serves when its config sets it; the dev cluster's global tier serves it
on 127.0.0.1:7401). Changes are forwarded to the leader.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.PersistentFlags().StringVar(&addr, "addr", devRaftAdminAddr, "Raft admin address of a replica (its listen.admin)")
	cmd.PersistentFlags().DurationVar(&timeout, "timeout", 10*time.Second, "how long to wait for the group")
	call := func(out *outputFlag, fn func(context.Context, *raftnode.Client) error) error {
		if err := out.check(); err != nil {
			return err
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return &exitError{code: 2, err: fmt.Errorf("--addr %q: must be host:port", addr)}
		}
		if timeout <= 0 {
			return &exitError{code: 2, err: fmt.Errorf("--timeout: must be positive (got %v)", timeout)}
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return remoteErr(fn(ctx, raftnode.NewClient(addr)))
	}
	cmd.AddCommand(newRaftPeersCmd(g, call), newRaftStatusCmd(g, call),
		newRaftJoinCmd(g, call), newRaftRemoveCmd(g, call))
	return cmd
}

// raftCall runs one subcommand's call: it checks --output, --addr and
// --timeout (exit code 2), then runs fn against the replica under the
// --timeout deadline; fn's error exits with code 1.
type raftCall func(out *outputFlag, fn func(context.Context, *raftnode.Client) error) error

// remoteErr gives failures of the remote call exit code 1 (usage errors are 2).
func remoteErr(err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: 1, err: err}
}

func newRaftPeersCmd(g *globalOptions, call raftCall) *cobra.Command {
	var out outputFlag
	cmd := &cobra.Command{
		Use:   "peers",
		Short: "List the servers of the group",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var peers []raftnode.Peer
			if err := call(&out, func(ctx context.Context, c *raftnode.Client) (err error) {
				peers, err = c.Peers(ctx)
				return err
			}); err != nil {
				return err
			}
			return out.print(g.stdout, raftnode.PeersResponse{Peers: peers}, func(w io.Writer) error {
				tw := newTable(w)
				fmt.Fprintln(tw, "ID\tADDRESS\tSUFFRAGE\tLEADER")
				for _, p := range peers {
					lead := ""
					if p.Leader {
						lead = "*"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.ID, p.Address, p.Suffrage, lead)
				}
				return tw.Flush()
			})
		},
	}
	out.register(cmd)
	return cmd
}

func newRaftStatusCmd(g *globalOptions, call raftCall) *cobra.Command {
	var out outputFlag
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show one replica's view of the group (state, leader, term, indexes)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var s raftnode.Status
			if err := call(&out, func(ctx context.Context, c *raftnode.Client) (err error) {
				s, err = c.Status(ctx)
				return err
			}); err != nil {
				return err
			}
			return out.print(g.stdout, s, func(w io.Writer) error {
				tw := newTable(w)
				fmt.Fprintf(tw, "ID\t%s\nSTATE\t%s\nRAFT ADDRESS\t%s\nLEADER\t%s (%s)\nTERM\t%d\nLAST INDEX\t%d\nCOMMIT INDEX\t%d\nAPPLIED INDEX\t%d\n",
					s.ID, s.State, s.RaftAddr, s.LeaderID, s.LeaderAddr, s.Term, s.LastIndex, s.CommitIndex, s.AppliedIndex)
				return tw.Flush()
			})
		},
	}
	out.register(cmd)
	return cmd
}

type raftChangeJSON struct {
	Action   string `json:"action"`
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr,omitempty"`
	OK       bool   `json:"ok"`
}

func newRaftJoinCmd(g *globalOptions, call raftCall) *cobra.Command {
	var out outputFlag
	var admin string
	cmd := &cobra.Command{
		Use:   "join ID RAFT_ADDR",
		Short: "Add a replica (server ID, raft host:port) to the group as a voter",
		Long: `Add a replica to the group as a voter. The replica must be running with the
given ID and listening for Raft at RAFT_ADDR: the leader first connects to
RAFT_ADDR and, with --admin-addr, asks the replica's admin endpoint for its ID
and raft address, and refuses the join (exit code 1, naming the address) when it
cannot reach it or the replica is another one. Joining a member again is
harmless.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, raftAddr := args[0], args[1]
			if id == "" {
				return &exitError{code: 2, err: fmt.Errorf("ID: is required (the new replica's server ID)")}
			}
			if _, _, err := net.SplitHostPort(raftAddr); err != nil {
				return &exitError{code: 2, err: fmt.Errorf("RAFT_ADDR %q: must be host:port", raftAddr)}
			}
			if err := call(&out, func(ctx context.Context, c *raftnode.Client) error {
				return c.Join(ctx, raftnode.JoinRequest{ID: id, RaftAddr: raftAddr, AdminAddr: admin})
			}); err != nil {
				return err
			}
			res := raftChangeJSON{Action: "join", ID: id, RaftAddr: raftAddr, OK: true}
			return out.print(g.stdout, res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "joined %s (%s) as a voter\n", id, raftAddr)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&admin, "admin-addr", "", "the new replica's admin address, so the others can forward to it when it leads")
	out.register(cmd)
	return cmd
}

func newRaftRemoveCmd(g *globalOptions, call raftCall) *cobra.Command {
	var out outputFlag
	cmd := &cobra.Command{
		Use:   "remove ID",
		Short: "Remove a server from the group",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] == "" {
				return &exitError{code: 2, err: fmt.Errorf("ID: is required (the server ID to remove)")}
			}
			if err := call(&out, func(ctx context.Context, c *raftnode.Client) error {
				return c.Remove(ctx, args[0])
			}); err != nil {
				return err
			}
			res := raftChangeJSON{Action: "remove", ID: args[0], OK: true}
			return out.print(g.stdout, res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "removed %s\n", args[0])
				return err
			})
		},
	}
	out.register(cmd)
	return cmd
}
